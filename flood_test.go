package braid

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Peers that never read what braid writes, played from raw bytes over
// loopback TCP (the raw peers of hostile_test.go and mplex_test.go): a
// stalled writer must not hold up the application's calls past their
// deadlines or behind the read loop's push-back.

const (
	// stallSmallSocketBuffer shrinks braid's kernel send buffer, so that
	// a peer that never reads stalls braid's writer once the peer's
	// receive buffer is full. The peer's receive buffer keeps its size:
	// shrunk too, it stopped the flood now and then (3 of 240 runs; the
	// peer's Write blocked while braid's read loop waited for bytes).
	stallSmallSocketBuffer = 4 * kib
	// stallWriteTimeout is braid's ConnectionWriteTimeout in tests where
	// braid's writer stalls: long enough that what must not wait for it
	// visibly doesn't.
	stallWriteTimeout = 5 * time.Second
	// stallPrompt bounds a call that must not wait for the peer.
	stallPrompt = time.Second
	// stallPoll is how often a condition is polled.
	stallPoll = time.Millisecond
	// stallFloodChunk is how many frames the flooding peer writes at once.
	stallFloodChunk = 4096
	// stallUnknownStream is a stream id of the raw peer's that was never
	// opened: a data frame for it makes braid queue a window update that
	// credits the dropped bytes back (handleStreamFrame).
	stallUnknownStream = 99
)

// stallShrinkBuffers makes braid's kernel send buffer small.
func stallShrinkBuffers(t *testing.T, braid net.Conn) {
	t.Helper()
	require.NoError(t, braid.(*net.TCPConn).SetWriteBuffer(stallSmallSocketBuffer))
}

// stalledRawPeer is a raw yamux peer over loopback TCP that reads nothing
// unless told to, and braid's session with it: keep-alive off, the write
// timeout stallWriteTimeout, braid's send buffer small.
func stalledRawPeer(t *testing.T) (*rawPeer, *Session) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DisableKeepAlive = true
	cfg.ConnectionWriteTimeout = stallWriteTimeout
	c1, c2 := tcpPair(t)
	stallShrinkBuffers(t, c2)
	return newRawPeerOver(t, c1, c2, cfg, false)
}

// stallFlood writes frames (each the bytes of one) to conn over and over
// until stop is closed or a write fails; the returned channel is closed
// when it has stopped.
func stallFlood(conn net.Conn, frame []byte, stop <-chan struct{}) <-chan struct{} {
	chunk := make([]byte, 0, len(frame)*stallFloodChunk)
	for range stallFloodChunk {
		chunk = append(chunk, frame...)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := conn.Write(chunk); err != nil {
				return
			}
		}
	}()
	return done
}

// stallAwaitCtrlFull waits until braid's control queue is at its bound:
// its writer is stalled on a peer that does not read, and the read loop
// pushes back on the peer's flood.
func stallAwaitCtrlFull(t *testing.T, s *Session) {
	t.Helper()
	require.Eventually(t, func() bool {
		s.w.mu.Lock()
		defer s.w.mu.Unlock()
		return len(s.w.ctrl) >= maxQueuedCtrlBytes
	}, 2*eventually, stallPoll, "the control queue never filled")
}

// TestControlQueueFullDoesNotBlockStreamCalls: Promise: a peer that
// never reads what braid writes and floods frames that each make braid
// queue a control frame (data for a stream it never opened: braid credits
// the bytes back) fills braid's control queue and so makes the read loop
// push back (bounded); but it must not hold up the application's calls on
// other streams. A Read of bytes already buffered returns them at once
// (within stallPrompt, well before the ConnectionWriteTimeout that would
// end the stall), and so do Reset and AcceptStream of a stream that was
// waiting in the backlog. Close then returns promptly and leaves no
// goroutine.
func TestControlQueueFullDoesNotBlockStreamCalls(t *testing.T) {
	p, s := stalledRawPeer(t)

	// Stream 1 holds a whole window of unread bytes; stream 3 and 5 wait
	// in the accept backlog.
	p.send(syn(1), nil)
	p.send(data(1, 0, InitialStreamWindow))
	st := acceptID(t, s, 1)
	p.send(syn(3), nil)
	p.send(syn(5), nil)
	require.Eventually(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.recv.size == InitialStreamWindow
	}, eventually, stallPoll, "stream 1's bytes never arrived")

	stop := make(chan struct{})
	frame := append(header{typ: typeData, streamID: stallUnknownStream, length: 1}.appendTo(nil), 0)
	flooded := stallFlood(p.conn, frame, stop)
	defer func() { close(stop); _ = p.conn.Close(); <-flooded }()
	stallAwaitCtrlFull(t, s)

	calls := []struct {
		name string
		call func() error
	}{
		{"Read of buffered bytes", func() error {
			_ = st.SetReadDeadline(time.Now().Add(stallPrompt / 2))
			n, err := st.Read(make([]byte, InitialStreamWindow))
			if err == nil && n != InitialStreamWindow {
				t.Errorf("Read returned %d bytes, want %d", n, InitialStreamWindow)
			}
			return err
		}},
		{"Reset", st.Reset},
		{"AcceptStream", func() error { _, err := s.AcceptStream(); return err }},
	}
	for _, c := range calls {
		errc := make(chan error, 1)
		start := time.Now()
		go func() { errc <- c.call() }()
		select {
		case err := <-errc:
			require.NoError(t, err, c.name)
		case <-time.After(stallPrompt):
			t.Errorf("%s blocked %v behind the peer's flood (the control queue is full)", c.name, time.Since(start))
		}
	}
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * stallPrompt):
		t.Fatal("Close did not return")
	}
}

// stallWriteTries bounds the small Writes TestWriteDeadlineWithStalledPeer
// makes: far more than a few kilobytes of socket buffers take.
const stallWriteTries = 500

// stallSmallWrite is the size of those Writes: copied, not by reference.
const stallSmallWrite = kib

// stallDeadline is the write deadline of each of them.
const stallDeadline = 100 * time.Millisecond

// TestWriteDeadlineWithStalledPeer: Promise: a small Write with a
// write deadline returns by its deadline (within stallPrompt) whatever
// the peer does: here the peer sends a frame before each Write, as a
// request-response peer does (which lets braid write a small frame inline,
// on the Write's goroutine), and never reads, so the socket buffers fill.
// Every Write returns nil (its bytes queued) or os.ErrDeadlineExceeded;
// none waits for the ConnectionWriteTimeout.
func TestWriteDeadlineWithStalledPeer(t *testing.T) {
	p, s := stalledRawPeer(t)
	p.send(syn(1), nil)
	st := acceptID(t, s, 1)
	payload := make([]byte, stallSmallWrite)
	for i := range stallWriteTries {
		// A frame from the peer that braid answers with nothing.
		before := s.Stats().FramesReceived
		p.send(header{typ: typeWindowUpdate, streamID: stallUnknownStream, length: 1}, nil)
		require.Eventually(t, func() bool { return s.Stats().FramesReceived > before },
			eventually, stallPoll/10, "braid stopped reading")
		require.NoError(t, st.SetWriteDeadline(time.Now().Add(stallDeadline)))
		errc := make(chan error, 1)
		start := time.Now()
		go func() { _, err := st.Write(payload); errc <- err }()
		select {
		case err := <-errc:
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Logf("Write %d: deadline exceeded (braid's queue is full): honoured", i)
				return
			}
			require.NoError(t, err, "Write %d", i)
		case <-time.After(stallPrompt):
			t.Fatalf("Write %d blocked %v, past its %v deadline (Stats %+v)", i, time.Since(start), stallDeadline, s.Stats())
		}
	}
	t.Fatalf("%d Writes never filled the buffers", stallWriteTries)
}

// stallRefusedMplexStream is the wire id of the streams the flooding mplex
// peer opens beyond MaxIncomingStreams: each is refused with a Reset, and
// a refused id is free again, so the same NewStream frame repeats.
const stallRefusedMplexStream = 5

// TestMplexControlQueueFullDoesNotBlockReset: Promise: the mplex
// counterpart of TestControlQueueFullDoesNotBlockStreamCalls. A peer
// that never reads and floods NewStream frames beyond MaxIncomingStreams
// fills braid's control queue with the Resets that refuse them (the read
// loop then pushes back), but Reset of an open stream still returns at
// once, and a Read of its buffered bytes before that too.
func TestMplexControlQueueFullDoesNotBlockReset(t *testing.T) {
	cfg := mplexConfig()
	cfg.MaxIncomingStreams = 1
	cfg.ConnectionWriteTimeout = stallWriteTimeout
	c1, c2 := tcpPair(t)
	stallShrinkBuffers(t, c2)
	s, err := Server(c2, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(); _ = c1.Close() })

	const msg = "held"
	_, err = c1.Write(append(rawMplex(0, mplexNewStream, nil), rawMplex(0, mplexMessageInitiator, []byte(msg))...))
	require.NoError(t, err)
	st := acceptWithin(t, s)
	require.Eventually(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.recv.size == len(msg)
	}, eventually, stallPoll, "the message never arrived")

	stop := make(chan struct{})
	flooded := stallFlood(c1, rawMplex(stallRefusedMplexStream, mplexNewStream, nil), stop)
	defer func() { close(stop); _ = c1.Close(); <-flooded }()
	stallAwaitCtrlFull(t, s)

	errc := make(chan error, 1)
	go func() {
		b := make([]byte, len(msg))
		if _, err := st.Read(b); err != nil {
			errc <- err
			return
		}
		errc <- st.Reset()
	}()
	select {
	case err := <-errc:
		require.NoError(t, err)
	case <-time.After(stallPrompt):
		t.Fatal("Read and Reset blocked behind the peer's flood (the control queue is full)")
	}
	require.False(t, s.IsClosed(), "session closed: %v", s.Err())
}
