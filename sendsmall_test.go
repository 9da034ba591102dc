package braid

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Small Writes take sendSmall, under writer.mu alone; the rest take the
// full path with writeMu. These tests hold the promises the full path
// kept alone before: concurrent Writes never interleave, a Write after
// CloseWrite or a reset fails, and credit is never overspent.

// recordHeader is a test record's header: its whole length, the writer's
// number and the record's number; the payload bytes follow from them.
const recordHeader = 4 + 1 + 4

// makeRecord returns writer w's record seq of n bytes in all (n >=
// recordHeader).
func makeRecord(w byte, seq uint32, n int) []byte {
	r := make([]byte, n)
	binary.BigEndian.PutUint32(r, uint32(n))
	r[4] = w
	binary.BigEndian.PutUint32(r[5:], seq)
	for i := recordHeader; i < n; i++ {
		r[i] = byte(int(w)*31 + int(seq) + i)
	}
	return r
}

// readRecords reads records until n of them have come, checking that
// each is whole and that each writer's come in order.
func readRecords(r io.Reader, writers, n int) error {
	next := make([]uint32, writers)
	var h [recordHeader]byte
	for range n {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		size := int(binary.BigEndian.Uint32(h[:]))
		w, seq := h[4], binary.BigEndian.Uint32(h[5:])
		if int(w) >= writers || size < recordHeader {
			return fmt.Errorf("record header %x: not a record's start (Writes interleaved)", h)
		}
		if seq != next[w] {
			return fmt.Errorf("writer %d: record %d, want %d", w, seq, next[w])
		}
		next[w]++
		body := make([]byte, size-recordHeader)
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		for i, c := range body {
			if want := byte(int(w)*31 + int(seq) + recordHeader + i); c != want {
				return fmt.Errorf("writer %d record %d: byte %d is %d, want %d (Writes interleaved)", w, seq, recordHeader+i, c, want)
			}
		}
	}
	return nil
}

// TestConcurrentWritesStayWhole: writers on one stream, small Writes
// (sendSmall) mixed with medium ones (copied, on the full path once the
// window runs short) and large ones (by reference, larger than the
// window, so they take credit in several turns): every Write's bytes
// arrive together, each writer's in order. Both ends write, so the
// accepted stream's first frame (which carries the ACK) is covered too.
func TestConcurrentWritesStayWhole(t *testing.T) {
	sizes := []int{recordHeader + 1, 64, 200, 1000, 4000, 15000, 40000, 300000}
	const writers, perWriter = 6, 60
	_, _, a, b := streamPair(t, nil)
	for _, dir := range []struct {
		name     string
		from, to *Stream
	}{{"opener", a, b}, {"acceptor", b, a}} {
		t.Run(dir.name, func(t *testing.T) {
			var wg sync.WaitGroup
			errc := make(chan error, writers)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for seq := range perWriter {
						n := sizes[(w+seq)%len(sizes)]
						if _, err := dir.from.Write(makeRecord(byte(w), uint32(seq), n)); err != nil {
							errc <- err
							return
						}
					}
				}()
			}
			require.NoError(t, readRecords(dir.to, writers, writers*perWriter))
			wg.Wait()
			close(errc)
			require.NoError(t, <-errc)
		})
	}
}

// TestSmallWriteAfterCloseOrReset: once CloseWrite or Reset returned, or
// the peer's reset has been seen, a small Write fails as a large one
// does, and a small Write right after a large one goes direct again.
func TestSmallWriteAfterCloseOrReset(t *testing.T) {
	client, server, a, b := streamPair(t, nil)
	small := []byte("ping")
	// opened opens a stream whose first frame has gone, and accepts it.
	opened := func() (*Stream, *Stream) {
		t.Helper()
		out, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		_, err = out.Write(small)
		require.NoError(t, err)
		in, err := server.AcceptStream()
		require.NoError(t, err)
		return out, in
	}
	_, err := a.Write(make([]byte, 100000)) // the full path
	require.NoError(t, err)
	w := client.w
	w.mu.Lock()
	direct := a.send.direct
	w.mu.Unlock()
	require.True(t, direct, "direct again once the full path ended")
	_, err = a.Write(small)
	require.NoError(t, err)
	_, err = io.ReadFull(b, make([]byte, 100000+len(small)))
	require.NoError(t, err)

	require.NoError(t, a.CloseWrite())
	_, err = a.Write(small)
	require.ErrorIs(t, err, ErrStreamClosed)

	c, _ := opened()
	require.NoError(t, c.Reset())
	_, err = c.Write(small)
	require.ErrorIs(t, err, ErrStreamReset)

	// The peer's reset: once a Read has seen it, Write sees it too.
	e, f := opened()
	_, err = f.Write(small)
	require.NoError(t, err)
	require.NoError(t, f.Reset())
	_, err = io.ReadAll(e) // a reset drops what was buffered
	require.ErrorIs(t, err, ErrStreamReset)
	_, err = e.Write(small)
	require.ErrorIs(t, err, ErrStreamReset)
}

// TestSmallWritesRespectTheWindow: small Writes never send more than the
// peer's window: with nobody reading, they stop after the initial window
// (the next one blocks until its deadline), and every byte is there once
// the reader reads.
func TestSmallWritesRespectTheWindow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxStreamWindow = InitialStreamWindow // no grant beyond it, whatever the path
	_, _, a, b := streamPair(t, cfg)
	msg := make([]byte, 1000)
	written := 0
	require.NoError(t, a.SetWriteDeadline(time.Now().Add(500*time.Millisecond)))
	for {
		n, err := a.Write(msg)
		written += n
		if err != nil {
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			break
		}
		require.LessOrEqual(t, written, InitialStreamWindow, "wrote past the peer's window")
	}
	require.Equal(t, InitialStreamWindow, written, "the window's worth, then the deadline")
	_, err := io.ReadFull(b, make([]byte, written))
	require.NoError(t, err)
}

// TestSendSmallRules: the writer's side of sendSmall, unit by unit: it
// takes nothing unless the stream is direct and its credit covers the
// payload, and takes the credit when it queues; taking credit for a full
// Write (takeCredit) stops the stream being direct until setDirect, so
// no small Write can queue between a full Write's frames; a dropped
// stream is never direct again; credit that would pass 2^32-1 is refused;
// mplex, with no send credit, never takes it.
func TestSendSmallRules(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c2.Close()
	defer c1.Close()
	w := newWriter(c1, yamuxCodec{}, DefaultConfig())
	s := streamSend{window: 100}
	payload := make([]byte, 60)

	ok, err := w.sendSmall(&s, 1, payload)
	require.False(t, ok, "not direct: the full path")
	require.NoError(t, err)

	w.setDirect(&s, true)
	ok, err = w.sendSmall(&s, 1, payload)
	require.True(t, ok)
	require.NoError(t, err)
	require.EqualValues(t, 40, s.window, "the credit is taken")
	ok, _ = w.sendSmall(&s, 1, payload)
	require.False(t, ok, "credit short: the full path")
	require.EqualValues(t, 40, s.window)

	require.Equal(t, 40, w.takeCredit(&s, 1000))
	require.False(t, s.direct, "a full Write holds the stream")
	require.True(t, w.addCredit(&s, 500))
	ok, _ = w.sendSmall(&s, 1, payload)
	require.False(t, ok, "no small Write between a full Write's frames")
	w.setDirect(&s, true)
	ok, _ = w.sendSmall(&s, 1, payload)
	require.True(t, ok)

	require.False(t, w.addCredit(&s, ^uint32(0)), "past 2^32-1")
	require.EqualValues(t, 440, s.window)

	w.drop(&s)
	w.setDirect(&s, true)
	ok, _ = w.sendSmall(&s, 1, payload)
	require.False(t, ok, "a dropped stream is never direct")

	require.Zero(t, newWriter(c1, newCodec(Mplex, true), DefaultConfig()).smallMax, "mplex: no send credit, no sendSmall")
	require.Equal(t, refThreshold-1, w.smallMax)
}
