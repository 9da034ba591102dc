package braid

import (
	"context"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Tests of lending (lend.go): a waiting Read's buffer filled straight from
// the conn, and the cut that gives it back when the Read must end while a
// peer stalls inside a frame.

// awaitLend waits until st's lent buffer is offered by a waiting Read
// (active false) or being filled by the read loop (active true).
func awaitLend(t *testing.T, st *Stream, active bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		l := st.lend
		return l != nil && l.buf != nil && l.active == active
	}, 5*time.Second, time.Millisecond, "lend offered (active %v)", active)
}

// pattern returns n bytes that tell where in the stream each one was.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// readResult is what a Read returned.
type readResult struct {
	n   int
	err error
}

// readAsync starts a Read of st into buf.
func readAsync(st *Stream, buf []byte) chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		n, err := st.Read(buf)
		ch <- readResult{n, err}
	}()
	return ch
}

// TestReadLendsItsBuffer: over TCP, a frame that comes while a Read waits
// with a large enough buffer goes straight into that buffer, every byte in
// order; a Read with a small buffer lends nothing.
func TestReadLendsItsBuffer(t *testing.T) {
	client, server := sessionPair(t, nil)
	cs, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = cs.Write([]byte{1})
	require.NoError(t, err)
	ss, err := server.AcceptStream()
	require.NoError(t, err)
	_, err = io.ReadFull(ss, make([]byte, 1))
	require.NoError(t, err)

	msg := pattern(64 * 1024)
	buf := make([]byte, len(msg))
	got := readAsync(ss, buf)
	awaitLend(t, ss, false)
	lent := server.Stats().BytesLent
	_, err = cs.Write(msg)
	require.NoError(t, err)
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, len(msg), r.n, "the whole frame in one Read")
	require.Equal(t, msg, buf)
	require.Equal(t, uint64(len(msg)), server.Stats().BytesLent-lent, "bytes lent")

	small := make([]byte, minLend-1)
	got = readAsync(ss, small)
	_, err = cs.Write(msg)
	require.NoError(t, err)
	r = <-got
	require.NoError(t, r.err)
	rest := make([]byte, len(msg)-r.n)
	_, err = io.ReadFull(ss, rest)
	require.NoError(t, err)
	require.Equal(t, msg, append(small[:r.n], rest...))
	require.Equal(t, uint64(len(msg)), server.Stats().BytesLent-lent, "a small buffer is not lent")
}

// lendStall opens stream 1 from a raw peer, starts a Read of a 64 KiB
// buffer on braid's end and sends the header of a 64 KiB frame with only
// head bytes of its payload: the read loop holds the Read's buffer,
// waiting for the rest.
func lendStall(t *testing.T, head int) (*rawPeer, *Session, *Stream, []byte, []byte, chan readResult) {
	t.Helper()
	p, s := newRawPeer(t, nil, false)
	p.startReading()
	p.send(syn(1), nil)
	st := acceptID(t, s, 1)
	buf := make([]byte, 64*1024)
	got := readAsync(st, buf)
	awaitLend(t, st, false)
	payload := pattern(len(buf))
	p.sendRaw(append(header{typ: typeData, streamID: 1, length: uint32(len(payload))}.appendTo(nil), payload[:head]...))
	awaitLend(t, st, true)
	return p, s, st, buf, payload, got
}

// TestLentReadDeadline: a peer stalls in the middle of a frame that goes
// into a Read's lent buffer. The Read still returns at its deadline, with
// the bytes that came, and the session goes on: the rest of the frame
// reaches the next Read, in order.
func TestLentReadDeadline(t *testing.T) {
	const head = 100
	p, s, st, buf, payload, got := lendStall(t, head)
	require.NoError(t, st.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	select {
	case r := <-got:
		require.NoError(t, r.err)
		require.Equal(t, head, r.n, "the bytes that came before the deadline")
		require.Equal(t, payload[:head], buf[:head])
	case <-time.After(5 * time.Second):
		t.Fatal("a Read with a lent buffer outlived its deadline")
	}
	_, err := st.Read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)

	p.sendRaw(payload[head:])
	require.NoError(t, st.SetReadDeadline(time.Time{}))
	rest := make([]byte, len(payload)-head)
	_, err = io.ReadFull(st, rest)
	require.NoError(t, err)
	require.Equal(t, payload[head:], rest, "the rest of the frame, in order")
	require.Equal(t, uint64(head), s.Stats().BytesLent)
	requireUsable(t, p, s)
}

// TestLentReadEnds: a Read whose lent buffer the read loop holds, while the
// peer stalls inside the frame, returns when its stream is reset or closed
// for reading, or the session closes, with that error and never io.EOF.
func TestLentReadEnds(t *testing.T) {
	cases := []struct {
		name string
		end  func(s *Session, st *Stream)
		want error
	}{
		{"reset", func(_ *Session, st *Stream) { _ = st.Reset() }, ErrStreamReset},
		{"close for reading", func(_ *Session, st *Stream) { _ = st.CloseRead() }, ErrStreamClosed},
		{"session closed", func(s *Session, _ *Stream) { _ = s.Close() }, ErrStreamReset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, s, st, _, payload, got := lendStall(t, 0)
			go tc.end(s, st)
			select {
			case r := <-got:
				require.Zero(t, r.n)
				require.ErrorIs(t, r.err, tc.want)
				require.False(t, errors.Is(r.err, io.EOF), "%v matches io.EOF", r.err)
			case <-time.After(5 * time.Second):
				t.Fatal("a Read with a lent buffer did not end")
			}
			if !s.IsClosed() {
				p.sendRaw(payload) // dropped: the stream's read side is gone
				requireUsable(t, p, s)
			}
		})
	}
}

// TestLentBytesCreditedAtGiveBack: the read loop gives the peer credit for
// a lent buffer's bytes as it gives the buffer back (they are the caller's
// already, and its Read returns them whatever ends it), not when the Read
// returns. So the window update joins the pong of the marker that follows
// the data in one write. The read loop's part is played here with no Read
// waiting: the update must go out before any Read runs, and the Read that
// then takes the bytes credits nothing twice.
func TestLentBytesCreditedAtGiveBack(t *testing.T) {
	p, s := newRawPeer(t, nil, false)
	p.startReading()
	p.send(syn(1), nil)
	st := acceptID(t, s, 1)
	isCredit := func(f rawFrame) bool {
		return f.typ == typeWindowUpdate && f.streamID == 1 && f.flags == 0
	}

	buf := make([]byte, InitialStreamWindow)
	st.mu.Lock()
	st.offerLocked(buf)
	st.mu.Unlock()
	part := st.borrow(len(buf))
	require.Len(t, part, len(buf), "the whole window lent")
	copy(part, pattern(len(part)))
	st.giveBack(len(part))
	p.await("the window update of a given-back buffer", 1, func(f rawFrame) bool {
		return isCredit(f) && f.length >= InitialStreamWindow
	})

	n, err := st.Read(buf)
	require.NoError(t, err)
	require.Equal(t, len(buf), n, "the Read returns the given-back bytes")
	require.Equal(t, pattern(len(buf)), buf)
	p.ping(7)
	require.Equal(t, 1, p.count(isCredit), "the bytes are credited once")
}

// TestCutterIdleCutDropped: a Read that wants the conn turn cuts the read
// loop's header read at a quiet moment (cutIdle). When the header came
// before the cut reached the read, the read loop drops the cut as it ends
// the quiet moment (endIdle), so that the payload's read, which may fill
// a lent buffer, waits for its bytes instead of ending at once. A cut
// asked once idle is clear is not asked at all; a cut of a read that
// brought nothing is kept for the next read, which the read loop then
// gives up for the Read that wants the turn.
func TestCutterIdleCutDropped(t *testing.T) {
	c1, c2 := tcpPair(t)
	cutter := newReadCutter(c1)
	require.NotNil(t, cutter)
	var idle atomic.Bool
	buf := make([]byte, 16)

	// The header came; the cut is asked before the read loop ends idle.
	idle.Store(true)
	_, err := c2.Write([]byte("head"))
	require.NoError(t, err)
	n, err := io.ReadFull(c1, buf[:4])
	require.NoError(t, err, "read %d", n)
	cutter.cutIdle(&idle)
	cutter.endIdle(&idle, true)
	require.False(t, idle.Load())
	go func() { time.Sleep(20 * time.Millisecond); _, _ = c2.Write([]byte("payload")) }()
	n, err = io.ReadFull(c1, buf[:7])
	require.NoError(t, err, "the payload's read after a dropped cut")
	require.Equal(t, "payload", string(buf[:n]))

	// idle is clear: a Read that wants the turn asks no cut.
	cutter.cutIdle(&idle)
	require.False(t, cutter.asked)

	// The cut ended a read that brought nothing: it stays for the next.
	idle.Store(true)
	cutter.cutIdle(&idle)
	_, err = c1.Read(buf)
	require.True(t, cutter.cleared(err), "the cut header read: %v", err)
	cutter.cutIdle(&idle)
	cutter.endIdle(&idle, false)
	_, err = c1.Read(buf)
	require.True(t, cutter.cleared(err), "a cut of a read with no header is kept: %v", err)
}
