package braid

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/braidmux/braid/slowconn"
	"github.com/stretchr/testify/require"
)

// TestPendingCallsAtSessionEnd ends the connection in every way of
// connEnds while calls wait on the session: a Read, a Write blocked on the
// peer's window, an OpenStream blocked on the ACK backlog, an
// AcceptStream and a Ping. Each must return within closeBound of the end
// with an error matching the way's cause and ErrSessionClosed (a stream's
// also ErrStreamReset), never io.EOF.
func TestPendingCallsAtSessionEnd(t *testing.T) { forEachConnEnd(t, testPendingAtEnd) }

// closeBound is what Close may take: its flush and its linger, each at
// most a second, and a little.
const closeBound = closeFlushTimeout + closeLinger + 500*time.Millisecond

func testPendingAtEnd(t *testing.T, proto Protocol, ce connEnd) {
	// One stream may wait for its ACK: the next OpenStream waits.
	s, fc, p, st, _ := connEndSession(t, proto, ce, func(c *Config) { c.MaxUnackedStreams = 1 })
	cfg := s.cfg

	type result struct {
		what   string
		err    error
		stream bool
		at     time.Time
	}
	results := make(chan result, 8)
	pending := 0
	start := func(what string, stream bool, f func() error) {
		pending++
		go func() {
			err := f()
			results <- result{what, err, stream, time.Now()}
		}()
	}
	start("Read", true, func() error { _, err := st.Read(make([]byte, 10)); return err })
	start("AcceptStream", false, func() error { _, err := s.AcceptStream(); return err })
	pingBlocks := proto == Yamux && cfg.ConnectionWriteTimeout > closeBound
	if proto == Yamux {
		// Our stream, which the raw peer never acknowledges: the next
		// OpenStream waits for the ACK backlog, and a Write of more than
		// the window waits for credit.
		ours, err := s.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start("Write", true, func() error { _, err := ours.Write(make([]byte, 2*InitialStreamWindow)); return err })
		start("OpenStream", false, func() error { _, err := s.OpenStream(context.Background()); return err })
		if pingBlocks {
			start("Ping", false, func() error { _, err := s.Ping(); return err })
		}
	}
	time.Sleep(100 * time.Millisecond) // every call waits
	select {
	case r := <-results:
		t.Fatalf("%s returned before the end: %v", r.what, r.err)
	default:
	}
	ended := time.Now()
	ce.end(t, p, fc, st)
	timeout := time.After(closeBound + time.Since(ended))
	for range pending {
		var r result
		select {
		case r = <-results:
		case <-timeout:
			t.Fatalf("a call still blocked %v after the end", time.Since(ended))
		}
		t.Logf("%s after %v: %v", r.what, r.at.Sub(ended), r.err)
		switch {
		case r.err == nil:
			t.Errorf("%s: no error", r.what)
		case errors.Is(r.err, io.EOF):
			t.Errorf("%s: %q matches io.EOF", r.what, r.err)
		case errors.Is(r.err, os.ErrDeadlineExceeded):
			t.Errorf("%s: %q: timed out instead of ending with the session", r.what, r.err)
		case !errors.Is(r.err, ce.want):
			t.Errorf("%s: %q does not match %v", r.what, r.err, ce.want)
		case r.what == "OpenStream" && errors.Is(r.err, ErrRemoteGoAway):
			// The peer's normal go-away came first: the OpenStream
			// waiting for the ACK backlog fails with it, as it should.
		case !errors.Is(r.err, ErrSessionClosed):
			t.Errorf("%s: %q does not match ErrSessionClosed", r.what, r.err)
		case r.stream && !errors.Is(r.err, ErrStreamReset):
			t.Errorf("%s: %q does not match ErrStreamReset", r.what, r.err)
		}
	}
}

// TestKeepAliveLongFrameOnSlowLink: a peer sends one data frame that
// takes many keep-alive intervals to cross a slow link (go-yamux and
// hashicorp/yamux send a stream's whole window as one frame: 256 KiB at
// 1 Mbit/s is over two seconds). Bytes arrive all along, so the
// keep-alive, which closes only a session from which nothing at all
// arrived within ConnectionWriteTimeout of its ping, must not close it:
// the pong can't overtake the frame. In a synctest bubble over slowconn.
func TestKeepAliveLongFrameOnSlowLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DisableKeepAlive = false
		cfg.KeepAliveInterval = 100 * time.Millisecond
		cfg.ConnectionWriteTimeout = 300 * time.Millisecond
		link := slowconn.Link{Bandwidth: 1e6, Latency: 10 * time.Millisecond}
		c1, peer := slowconn.Pipe(link)
		discarded := make(chan struct{})
		go func() {
			defer close(discarded)
			_, _ = io.Copy(io.Discard, peer) // braid's ACK and pings
		}()
		defer func() { _ = peer.Close(); <-discarded }()
		s, err := Server(c1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		payload := make([]byte, InitialStreamWindow)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		frame := append(header{typ: typeData, flags: flagSYN, streamID: 1, length: uint32(len(payload))}.appendTo(nil), payload...)
		wrote := make(chan error, 1)
		go func() { _, err := peer.Write(frame); wrote <- err }()
		start := time.Now()
		st, err := s.AcceptStream()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(payload))
		if _, err := io.ReadFull(st, got); err != nil {
			t.Fatalf("reading a frame still arriving after %v: %v", time.Since(start), err)
		}
		t.Logf("the frame took %v (interval %v, write timeout %v)", time.Since(start), cfg.KeepAliveInterval, cfg.ConnectionWriteTimeout)
		if err := s.Err(); err != nil {
			t.Fatalf("session ended while the frame arrived: %v", err)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
	})
}

// TestCloseEndsReadsBeforeFlush: a local Close ends the Reads waiting on
// its streams at once, as a net.Conn's Close does, not after its flush
// and linger (up to closeFlushTimeout + closeLinger). The raw peer stops
// reading while braid writes more than the socket buffers hold, so the
// flush waits for closeFlushTimeout; each Read must have ended while the
// writer still waits (w.done open). For a Read waiting with nothing
// coming, and for one whose buffer the read loop is filling (lent, a frame
// half arrived: the Read asks for a cut), on yamux and mplex.
func TestCloseEndsReadsBeforeFlush(t *testing.T) {
	for _, proto := range []Protocol{Yamux, Mplex} {
		pname := map[Protocol]string{Yamux: "yamux", Mplex: "mplex"}[proto]
		for _, lent := range []bool{false, true} {
			name := pname + "/waiting"
			if lent {
				name = pname + "/lent-frame-half-arrived"
			}
			t.Run(name, func(t *testing.T) { testCloseEndsReads(t, proto, lent) })
		}
	}
}

func testCloseEndsReads(t *testing.T, proto Protocol, lent bool) {
	cfg := DefaultConfig()
	cfg.Protocol = proto
	cfg.DisableKeepAlive = true
	c1, c2 := tcpPair(t)
	defer c1.Close()
	s, err := Server(c2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := connEndPeer{proto: proto, conn: c1}
	if _, err := c1.Write(p.open([]byte("hello"))); err != nil {
		t.Fatal(err)
	}
	st := acceptWithin(t, s)
	if _, err := io.ReadFull(st, make([]byte, len("hello"))); err != nil {
		t.Fatal(err)
	}
	const stuck = 32 << 20 // far more than loopback's socket buffers
	if proto == Yamux {
		grant := header{typ: typeWindowUpdate, streamID: 1, length: stuck}.appendTo(nil)
		if _, err := c1.Write(grant); err != nil {
			t.Fatal(err)
		}
	}

	type result struct {
		n   int
		err error
	}
	reads := make(chan result, 1)
	buf := make([]byte, 64*1024) // at least minLend
	go func() {
		n, err := st.Read(buf)
		reads <- result{n, err}
	}()
	require.Eventually(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.reading || s.turn.holder.Load() == st // parked, or reading the conn itself (turn.go)
	}, 5*time.Second, time.Millisecond, "the Read to wait")
	if lent {
		const arrived = 1024
		if _, err := c1.Write(append(p.dataHeader(32*1024), make([]byte, arrived)...)); err != nil {
			t.Fatal(err)
		}
		if s.cutter == nil {
			t.Fatal("a TCP conn must lend")
		}
		require.Eventually(t, func() bool {
			st.mu.Lock()
			defer st.mu.Unlock()
			return st.lend != nil && st.lend.active
		}, 5*time.Second, time.Millisecond, "the read loop to fill the lent buffer")
	}
	writes := make(chan error, 1)
	go func() {
		_, err := st.Write(make([]byte, stuck))
		writes <- err
	}()
	// Once its frames are being written (by the writer, or inline by the
	// Write itself), the Write can't end: the peer reads none of them.
	require.Eventually(t, func() bool {
		s.w.mu.Lock()
		defer s.w.mu.Unlock()
		return s.w.inline || s.w.writing || s.w.sched.busy()
	}, 5*time.Second, time.Millisecond, "the Write's frames to be written")
	// And until the conn's buffers are full: a write blocked for good
	// (the peer reads none of it), so that the flush can't end before
	// Close gives up on it. Before they fill, Close drops the Write's
	// queued frames and the flush of the frames in the write under way
	// could end within the Read's return: the writer done first, and
	// the check below can't tell whether the Read waited for it.
	require.Eventually(t, func() bool {
		before := s.Stats()
		time.Sleep(20 * time.Millisecond)
		after := s.Stats()
		return after.Writes == before.Writes && after.BytesSent == before.BytesSent
	}, 10*time.Second, time.Millisecond, "the conn's buffers to fill")

	closed := make(chan struct{})
	go func() {
		_ = s.Close()
		close(closed)
	}()
	var r result
	select {
	case r = <-reads:
	case <-closed:
		t.Fatal("Close returned before the Read did")
	}
	if r.err == nil {
		// The lent buffer came back with the bytes that had arrived:
		// the next Read returns the end.
		if !lent || r.n == 0 {
			t.Fatalf("Read returned %d bytes and no error", r.n)
		}
		_, r.err = st.Read(buf)
	}
	select {
	case <-s.w.done:
		t.Fatal("the Read ended only once the writer was done: after the flush")
	default:
	}
	switch {
	case r.err == nil:
		t.Fatal("Read after Close: no error")
	case errors.Is(r.err, io.EOF):
		t.Fatalf("Read after Close: %q matches io.EOF", r.err)
	case !errors.Is(r.err, ErrSessionClosed) || !errors.Is(r.err, ErrStreamReset):
		t.Fatalf("Read after Close: %q does not match ErrSessionClosed and ErrStreamReset", r.err)
	}
	<-closed
	if err := errWithin(t, writes, "the stuck Write"); err == nil {
		t.Fatal("a Write the peer never read returned no error")
	}
}
