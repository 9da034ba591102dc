package braid

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// streamPair opens a stream on a client session and accepts it on the
// server; both sessions are closed when the test ends.
func streamPair(t testing.TB, cfg *Config) (client, server *Session, a, b *Stream) {
	t.Helper()
	client, server = sessionPair(t, cfg)
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	b, err = server.AcceptStream()
	require.NoError(t, err)
	return client, server, a, b
}

// errWithin waits up to 5 s for an error from errc.
func errWithin(t testing.TB, errc <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still blocked after 5 s", what)
		return nil
	}
}

// TestDeadlineSetWhileBlocked proves that a deadline set (in the past or
// the near future) while Read or Write is already blocked, with no
// deadline set before, wakes the call with os.ErrDeadlineExceeded. This is
// what net.Conn users do to cancel a blocked call (and nettest checks).
func TestDeadlineSetWhileBlocked(t *testing.T) {
	for _, when := range []struct {
		name string
		at   func() time.Time
	}{
		{"past", func() time.Time { return time.Unix(1, 0) }},
		{"future", func() time.Time { return time.Now().Add(20 * time.Millisecond) }},
	} {
		t.Run(when.name, func(t *testing.T) {
			_, _, a, _ := streamPair(t, nil)
			readc := make(chan error, 1)
			go func() {
				_, err := a.Read(make([]byte, 10))
				readc <- err
			}()
			// Exhaust the send window (the peer never reads) so that
			// Write blocks too.
			writec := make(chan error, 1)
			go func() {
				_, err := a.Write(make([]byte, 2*InitialStreamWindow))
				writec <- err
			}()
			time.Sleep(50 * time.Millisecond) // let both calls block
			require.NoError(t, a.SetReadDeadline(when.at()))
			require.NoError(t, a.SetWriteDeadline(when.at()))
			require.ErrorIs(t, errWithin(t, readc, "Read"), os.ErrDeadlineExceeded)
			require.ErrorIs(t, errWithin(t, writec, "Write"), os.ErrDeadlineExceeded)
		})
	}
}

// TestWriteDeadlineWindowExhausted proves that a Write blocked on an
// exhausted send window (the peer doesn't read) returns
// os.ErrDeadlineExceeded with the count of bytes it did send, and that the
// stream works after the deadline is cleared: every byte written arrives
// once, in order.
func TestWriteDeadlineWindowExhausted(t *testing.T) {
	_, _, a, b := streamPair(t, nil)
	msg := make([]byte, 2*InitialStreamWindow)
	for i := range msg {
		msg[i] = byte(i % 251)
	}
	require.NoError(t, a.SetWriteDeadline(time.Now().Add(100*time.Millisecond)))
	n, err := a.Write(msg)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Equal(t, InitialStreamWindow, n, "bytes sent before the window ran out")
	// Still expired: a new Write fails at once.
	_, err = a.Write([]byte("x"))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)

	require.NoError(t, a.SetWriteDeadline(time.Time{}))
	errc := make(chan error, 1)
	go func() {
		_, err := a.Write(msg[n:])
		if err == nil {
			err = a.CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	require.NoError(t, errWithin(t, errc, "Write after clearing the deadline"))
	require.Equal(t, msg, got)
}

// TestReadDeadline proves that Read times out with os.ErrDeadlineExceeded
// (a net.Error with Timeout true), keeps timing out while the deadline is
// past, and reads normally once the deadline is cleared.
func TestReadDeadline(t *testing.T) {
	_, _, a, b := streamPair(t, nil)
	require.NoError(t, a.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	buf := make([]byte, 10)
	start := time.Now()
	_, err := a.Read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout())
	require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "timed out before the deadline")
	_, err = a.Read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)

	// Data that arrives while the deadline is past is kept for later.
	_, err = b.Write([]byte("late"))
	require.NoError(t, err)
	require.NoError(t, a.SetReadDeadline(time.Time{}))
	_, err = io.ReadFull(a, buf[:4])
	require.NoError(t, err)
	require.Equal(t, "late", string(buf[:4]))
}

// TestCloseReadPeerKeepsWriting proves that after CloseRead the peer's
// writes never stall (braid drops the bytes and credits the window back)
// while Read returns ErrStreamClosed and the other direction still works.
func TestCloseReadPeerKeepsWriting(t *testing.T) {
	_, server, a, b := streamPair(t, nil)
	require.NoError(t, a.CloseRead())
	_, err := a.Read(make([]byte, 1))
	require.ErrorIs(t, err, ErrStreamClosed)
	require.ErrorIs(t, err, net.ErrClosed)

	errc := make(chan error, 1)
	go func() {
		_, err := b.Write(make([]byte, 8*InitialStreamWindow)) // 8 windows
		errc <- err
	}()
	require.NoError(t, errWithin(t, errc, "peer Write after CloseRead"))

	// Writes from the side that closed its read half still arrive.
	_, err = a.Write([]byte("still here"))
	require.NoError(t, err)
	require.NoError(t, a.CloseWrite())
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	require.Equal(t, "still here", string(got))
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return server.NumStreams() == 0 }, 5*time.Second, 2*time.Millisecond)
}

// TestMaxUnackedStreams proves the libp2p ACK backlog: with a peer that
// never acknowledges, OpenStream opens MaxUnackedStreams streams, then
// waits until its context ends (returning the context's error), and
// proceeds as soon as the peer acknowledges one stream.
func TestMaxUnackedStreams(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DisableKeepAlive = true
	cfg.MaxUnackedStreams = 4
	p, s := newRawPeer(t, cfg, true) // braid is the client: ids 1, 3, 5, 7
	p.startReading()
	for i := 0; i < 4; i++ {
		_, err := s.OpenStream(context.Background())
		require.NoError(t, err)
	}
	p.await("SYNs", 4, func(f rawFrame) bool { return f.flags&flagSYN != 0 && f.streamID != 0 })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.OpenStream(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx2, cancel2 := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.OpenStream(ctx2)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel2()
	require.ErrorIs(t, errWithin(t, errc, "OpenStream after cancel"), context.Canceled)
	require.Equal(t, 4, s.NumStreams(), "a refused OpenStream left a stream behind")

	// The peer acknowledges stream 3: one more stream may open.
	go func() {
		st, err := s.OpenStream(context.Background())
		if err == nil && st.ID() != 9 {
			err = errors.New("unexpected stream id")
		}
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	p.send(header{typ: typeWindowUpdate, flags: flagACK, streamID: 3}, nil)
	require.NoError(t, errWithin(t, errc, "OpenStream after the ACK"))
	// A duplicate ACK frees nothing more.
	p.send(header{typ: typeWindowUpdate, flags: flagACK, streamID: 3}, nil)
	p.ping(1)
	ctx3, cancel3 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel3()
	_, err = s.OpenStream(ctx3)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestStatsCoalescing proves that the coalescing writer packs many
// streams' small frames into few writes (Writes far below FramesSent),
// and that with DisableCoalescing every frame is its own write.
func TestStatsCoalescing(t *testing.T) {
	const streams, msgs, size = 100, 100, 64
	for _, coalesce := range []bool{true, false} {
		t.Run(map[bool]string{true: "coalesce", false: "plain"}[coalesce], func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DisableCoalescing = !coalesce
			cfg.DisableKeepAlive = true
			client, server := sessionPair(t, cfg)
			go func() {
				for {
					st, err := server.AcceptStream()
					if err != nil {
						return
					}
					go func() { _, _ = io.Copy(io.Discard, st) }()
				}
			}()
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < streams; i++ {
				st, err := client.OpenStream(context.Background())
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer st.Close()
					<-start
					msg := make([]byte, size)
					for j := 0; j < msgs; j++ {
						if _, err := st.Write(msg); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			// Wait until the server has read every data frame.
			require.Eventually(t, func() bool {
				return server.Stats().BytesReceived >= streams*msgs*(size+headerSize)
			}, 10*time.Second, 5*time.Millisecond)
			st := client.Stats()
			t.Logf("%+v", st)
			require.GreaterOrEqual(t, st.FramesSent, uint64(streams*msgs))
			if coalesce {
				require.Less(t, st.Writes*4, st.FramesSent, "writes not coalesced")
			} else {
				require.Equal(t, st.FramesSent, st.Writes, "one write per frame without coalescing")
			}
		})
	}
}

// TestMemoryReleasedAfterClose proves that everything a session reserves
// from its MemoryManager (initial windows, window growth) is released once
// the sessions close, whatever state the streams were in: closed, reset,
// half-closed, open with unread data, never accepted.
func TestMemoryReleasedAfterClose(t *testing.T) {
	cm, sm := &countingMemory{}, &countingMemory{}
	ccfg, scfg := DefaultConfig(), DefaultConfig()
	ccfg.Memory, scfg.Memory = cm, sm
	c1, c2 := tcpPair(t)
	client, err := Client(c1, ccfg)
	require.NoError(t, err)
	server, err := Server(c2, scfg)
	require.NoError(t, err)
	defer client.Close()
	defer server.Close()

	open := func() (*Stream, *Stream) {
		a, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		b, err := server.AcceptStream()
		require.NoError(t, err)
		return a, b
	}
	// A large transfer grows the receive window (reserving more).
	a, b := open()
	go func() {
		_, _ = a.Write(make([]byte, 16<<20))
		_ = a.CloseWrite()
	}()
	_, err = io.Copy(io.Discard, b)
	require.NoError(t, err)
	// Closed both ways.
	require.NoError(t, b.Close())
	a, _ = open()
	require.NoError(t, a.Reset()) // reset
	a, _ = open()
	_, err = a.Write([]byte("unread")) // open, with unread data
	require.NoError(t, err)
	a, b = open()
	require.NoError(t, b.CloseWrite())               // half-closed
	_, err = client.OpenStream(context.Background()) // never accepted
	require.NoError(t, err)
	_ = a
	require.Eventually(t, func() bool { return server.NumStreams() == 3 }, 5*time.Second, 2*time.Millisecond)
	require.Positive(t, cm.reserved.Load())
	require.Positive(t, sm.reserved.Load())

	require.NoError(t, client.Close())
	require.NoError(t, server.Close())
	require.Zero(t, cm.reserved.Load(), "client memory still reserved")
	require.Zero(t, sm.reserved.Load(), "server memory still reserved")
}
