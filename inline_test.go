package braid

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Tests of inline writes (inline.go): a small frame written by its
// stream's goroutine when the writer is idle and a frame came since the
// last write.

// awaitWriterIdle waits until s's writer is parked with nothing queued.
func awaitWriterIdle(t *testing.T, s *Session) {
	t.Helper()
	w := s.w
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.idle && !w.inline && len(w.ctrl) == 0 && !w.sched.busy()
	}, 5*time.Second, 100*time.Microsecond, "writer idle")
}

// pingBothWays writes msg from a to b and back, each once its session's
// writer is idle, so that each may go inline (a request and its reply).
func pingBothWays(t *testing.T, client, server *Session, a, b *Stream, msg []byte) {
	t.Helper()
	buf := make([]byte, len(msg))
	awaitWriterIdle(t, client)
	_, err := a.Write(msg)
	require.NoError(t, err)
	_, err = io.ReadFull(b, buf)
	require.NoError(t, err)
	awaitWriterIdle(t, server)
	_, err = b.Write(msg)
	require.NoError(t, err)
	_, err = io.ReadFull(a, buf)
	require.NoError(t, err)
}

// TestInlineWrites: in a request-response exchange every small Write is
// written inline; a burst with nothing received
// between its writes has only its first frame inline, and the rest go to
// the writer, coalesced.
func TestInlineWrites(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxStreamWindow = InitialStreamWindow // no window growth: no window update between the messages
	client, server, a, b := streamPair(t, cfg)
	awaitRTT(t, client, server)
	msg := []byte("ping")
	exchange := func() { t.Helper(); pingBothWays(t, client, server, a, b, msg) }
	exchange() // each side has received a frame since its last write now
	c0, s0 := client.Stats(), server.Stats()
	const rounds = 10
	for range rounds {
		exchange()
	}
	c1, s1 := client.Stats(), server.Stats()
	require.Equal(t, uint64(rounds), c1.InlineWrites-c0.InlineWrites, "client's inline writes")
	require.Equal(t, uint64(rounds), s1.InlineWrites-s0.InlineWrites, "server's inline writes")

	const burst = 100
	awaitWriterIdle(t, client)
	for range burst {
		_, err := a.Write(msg)
		require.NoError(t, err)
	}
	_, err := io.ReadFull(b, make([]byte, burst*len(msg)))
	require.NoError(t, err)
	c2 := client.Stats()
	require.Equal(t, uint64(1), c2.InlineWrites-c1.InlineWrites, "inline writes in a burst")
	require.Less(t, c2.Writes-c1.Writes, uint64(burst/2), "the burst's conn writes")
}

// TestInlineWritesUnderDeadlines: a stream whose write deadline is later
// than the longest a conn write may block (ConnectionWriteTimeout and its
// slack) writes its exchanges' frames inline, as one without a deadline
// does (go-libp2p's ping handler sets one 30 s ahead, with a 10 s write
// timeout); one whose deadline is sooner writes none inline, so that a
// stalled conn can't hold its Write past the deadline
// (TestWriteDeadlineWithStalledPeer).
func TestInlineWritesUnderDeadlines(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxStreamWindow = InitialStreamWindow // no window growth: no window update between the messages
	client, server, a, b := streamPair(t, cfg)
	awaitRTT(t, client, server)
	longest := cfg.ConnectionWriteTimeout + cfg.ConnectionWriteTimeout/writeDeadlineSlack
	msg := []byte("ping")
	exchange := func() { t.Helper(); pingBothWays(t, client, server, a, b, msg) }
	exchange() // each side has received a frame since its last write now
	const rounds = 10
	for _, c := range []struct {
		name    string
		ahead   time.Duration
		inlines uint64
	}{
		{"deadline after the write timeout", 3 * longest, rounds},
		{"deadline before the write timeout", longest / 2, 0},
		{"deadline cleared", 0, rounds},
	} {
		deadline := time.Time{}
		if c.ahead > 0 {
			deadline = time.Now().Add(c.ahead)
		}
		require.NoError(t, a.SetWriteDeadline(deadline))
		require.NoError(t, b.SetDeadline(deadline))
		c0, s0 := client.Stats(), server.Stats()
		for range rounds {
			exchange()
		}
		c1, s1 := client.Stats(), server.Stats()
		require.Equal(t, c.inlines, c1.InlineWrites-c0.InlineWrites, "%s: client's inline writes", c.name)
		require.Equal(t, c.inlines, s1.InlineWrites-s0.InlineWrites, "%s: server's inline writes", c.name)
	}
}

// gatedConn is a conn whose Writes, once armed, wait at a gate: the test
// holds a write in progress while it looks at what else writes.
type gatedConn struct {
	net.Conn
	open    sync.Once
	mu      sync.Mutex
	gate    chan struct{} // closed to let Writes through; nil when not armed
	entered chan struct{} // gets a value as each gated Write arrives
	writing atomic.Int32  // Writes in progress
}

func (c *gatedConn) arm() {
	c.mu.Lock()
	c.gate, c.entered = make(chan struct{}), make(chan struct{}, 16)
	c.mu.Unlock()
}

// release lets gated Writes through.
func (c *gatedConn) release() {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil { // never armed: nothing waits
		c.open.Do(func() { close(gate) })
	}
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.writing.Add(1)
	defer c.writing.Add(-1)
	c.mu.Lock()
	gate, entered := c.gate, c.entered
	c.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	return c.Conn.Write(p)
}

// gatedSessionPair connects two sessions over loopback TCP, the client's
// conn a gatedConn (not armed), once both measured their first round trip.
func gatedSessionPair(t *testing.T) (*gatedConn, *Session, *Session) {
	t.Helper()
	c1, c2 := tcpPair(t)
	gc := &gatedConn{Conn: c1}
	client, server := sessionPairOver(t, gc, c2, nil)
	t.Cleanup(gc.release) // before the sessions close (cleanups run last first)
	awaitRTT(t, client, server)
	return gc, client, server
}

// TestInlineWriteExcludesTheWriter: while a stream writes inline, frames
// queued meanwhile wait: the writer does not write to the conn until the
// inline write is done, and then sends them.
func TestInlineWriteExcludesTheWriter(t *testing.T) {
	gc, client, server := gatedSessionPair(t)
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	other, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	for _, st := range []*Stream{a, other} {
		_, err = st.Write([]byte{0})
		require.NoError(t, err)
	}
	var peers []*Stream
	for range 2 {
		b, err := server.AcceptStream()
		require.NoError(t, err)
		_, err = io.ReadFull(b, make([]byte, 1))
		require.NoError(t, err)
		_, err = b.Write([]byte{1}) // a frame for the client to receive
		require.NoError(t, err)
		peers = append(peers, b)
	}
	for _, st := range []*Stream{a, other} {
		_, err = io.ReadFull(st, make([]byte, 1))
		require.NoError(t, err)
	}

	awaitWriterIdle(t, client)
	inline0 := client.Stats().InlineWrites
	gc.arm()
	errc := make(chan error, 2)
	go func() { _, err := a.Write([]byte("inline")); errc <- err }()
	<-gc.entered // the inline write is at the gate
	go func() { _, err := other.Write([]byte("queued")); errc <- err }()
	require.NoError(t, errWithin(t, errc, "the queued Write")) // queued, not written
	time.Sleep(20 * time.Millisecond)                          // the writer would write now if it could
	require.Equal(t, int32(1), gc.writing.Load(), "conn Writes in progress beside the inline one")
	gc.release()
	require.NoError(t, errWithin(t, errc, "the inline Write"))
	require.Equal(t, uint64(1), client.Stats().InlineWrites-inline0, "inline writes")
	for i, want := range []string{"inline", "queued"} {
		got := make([]byte, len(want))
		require.NoError(t, peers[i].SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err := io.ReadFull(peers[i], got)
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
}

// awaitRTT waits until both sessions measured their first round trip: the
// pings a session starts with are answered, and no frame of theirs is
// still to come.
func awaitRTT(t *testing.T, sessions ...*Session) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range sessions {
			if s.RTT() == 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "first round trips")
}

// TestInlineRefWrites: on a TCP conn a lone stream's large Writes are
// written by their own goroutine (counted in InlineWrites), and every byte
// arrives in order.
func TestInlineRefWrites(t *testing.T) {
	client, server, a, b := streamPair(t, nil)
	awaitRTT(t, client, server)
	const writes, size = 20, 100 << 10
	done := make(chan error, 1)
	go func() {
		got := make([]byte, size)
		for i := range writes {
			if _, err := io.ReadFull(b, got); err != nil {
				done <- err
				return
			}
			for j, c := range got {
				if c != byte(i+j) {
					done <- fmt.Errorf("write %d byte %d: got %d, want %d", i, j, c, byte(i+j))
					return
				}
			}
		}
		done <- nil
	}()
	awaitWriterIdle(t, client)
	inline0 := client.Stats().InlineWrites
	msg := make([]byte, size)
	for i := range writes {
		for j := range msg {
			msg[j] = byte(i + j)
		}
		_, err := a.Write(msg)
		require.NoError(t, err)
	}
	require.NoError(t, errWithin(t, done, "the reader"))
	require.Positive(t, client.Stats().InlineWrites-inline0, "inline by-reference writes")
}

// TestInlineRefAllowed: a by-reference frame goes inline only on a writev
// conn whose writer has nothing to write and nothing queued, and not
// once the Write's deadline passed.
func TestInlineRefAllowed(t *testing.T) {
	var frames atomic.Uint64
	newW := func() *writer {
		return &writer{codec: yamuxCodec{}, writev: true, coalesce: true, maxBatch: DefaultMaxBatchBytes,
			sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), inlineState: inlineState{received: &frames}}
	}
	closed := make(chan struct{})
	close(closed)
	require.True(t, newW().inlineRefAllowedLocked(nil), "an idle writer")
	cases := map[string]func(w *writer) <-chan struct{}{
		"no writev":         func(w *writer) <-chan struct{} { w.writev = false; return nil },
		"a batch in write":  func(w *writer) <-chan struct{} { w.writing = true; return nil },
		"an inline write":   func(w *writer) <-chan struct{} { w.inline = true; return nil },
		"coalescing off":    func(w *writer) <-chan struct{} { w.coalesce = false; return nil },
		"a coalesce delay":  func(w *writer) <-chan struct{} { w.delay = time.Millisecond; return nil },
		"draining":          func(w *writer) <-chan struct{} { w.draining = true; return nil },
		"failed":            func(w *writer) <-chan struct{} { w.err = ErrSessionClosed; return nil },
		"control queued":    func(w *writer) <-chan struct{} { w.ctrl = []byte{0}; return nil },
		"a deadline passed": func(w *writer) <-chan struct{} { return closed },
		"a stream queued": func(w *writer) <-chan struct{} {
			w.sched.push(&streamSend{}, header{typ: typeData, streamID: 1, length: 1}, []byte{0})
			return nil
		},
	}
	for name, set := range cases {
		w := newW()
		cancel := set(w)
		require.False(t, w.inlineRefAllowedLocked(cancel), name)
	}
}

// hiddenConn hides its conn's type: the writer sees a conn without writev
// (as a security layer's) and writes whole records (writeFlat).
type hiddenConn struct{ net.Conn }

// TestInlineWritesKeepRecordsWhole: on a conn without writev the writer
// keeps a frame's last partial record for its next batch; a small frame
// written inline meanwhile would split that frame. A bulk stream and a
// request-response stream run side by side, and every byte of both must
// arrive (a split frame is a protocol error at the peer).
func TestInlineWritesKeepRecordsWhole(t *testing.T) {
	c1, c2 := tcpPair(t)
	client, server := sessionPairOver(t, hiddenConn{c1}, hiddenConn{c2}, nil)
	awaitRTT(t, client, server)
	bulk, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	rpc, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = rpc.Write([]byte{0})
	require.NoError(t, err)
	const writes, size, exchanges = 40, 100<<10 + 7, 300
	errc := make(chan error, 3)
	go func() {
		msg := make([]byte, size)
		for i := range writes {
			for j := range msg {
				msg[j] = byte(i + j)
			}
			if _, err := bulk.Write(msg); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	go func() {
		var peers [2]*Stream
		for range 2 {
			st, err := server.AcceptStream()
			if err != nil {
				errc <- err
				return
			}
			if st.ID() == bulk.ID() {
				peers[0] = st
			} else {
				peers[1] = st
			}
		}
		go func() {
			got := make([]byte, size)
			for i := range writes {
				if _, err := io.ReadFull(peers[0], got); err != nil {
					errc <- err
					return
				}
				for j, c := range got {
					if c != byte(i+j) {
						errc <- fmt.Errorf("bulk write %d byte %d: got %d", i, j, c)
						return
					}
				}
			}
			errc <- nil
		}()
		buf := make([]byte, 1)
		if _, err := io.ReadFull(peers[1], buf); err != nil {
			errc <- err
			return
		}
		for range exchanges {
			if _, err := io.ReadFull(peers[1], buf); err != nil {
				errc <- err
				return
			}
			if _, err := peers[1].Write(buf); err != nil {
				errc <- err
				return
			}
		}
	}()
	buf := make([]byte, 1)
	for i := range exchanges {
		buf[0] = byte(i)
		_, err := rpc.Write(buf)
		require.NoError(t, err)
		_, err = io.ReadFull(rpc, buf)
		require.NoError(t, err)
		require.Equal(t, byte(i), buf[0])
	}
	for range 2 {
		require.NoError(t, errWithin(t, errc, "bulk"))
	}
	require.Positive(t, client.Stats().InlineWrites, "inline writes")
}

// TestWritesCountedAsTheyStart: Stats.Writes counts a conn write as soon
// as it is made, not once it returns: on loopback the peer can read a
// write's bytes before the call returns, and a count read then missed the
// write (braidbench once measured 0 writes for 500 coalesced messages).
func TestWritesCountedAsTheyStart(t *testing.T) {
	gc, client, _ := gatedSessionPair(t)
	st, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	awaitWriterIdle(t, client)
	writes0, bytes0 := client.Stats().Writes, client.Stats().BytesSent
	gc.arm()
	errc := make(chan error, 1)
	go func() { _, err := st.Write([]byte("counted")); errc <- err }()
	<-gc.entered // the write is made, held before the conn takes it
	require.Equal(t, writes0+1, client.Stats().Writes, "a write in progress is counted")
	require.Equal(t, bytes0, client.Stats().BytesSent, "its bytes count once written")
	gc.release()
	require.NoError(t, errWithin(t, errc, "the Write"))
}
