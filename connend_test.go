package braid

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	varint "github.com/multiformats/go-varint"
)

// Connection-end tests: every way a session's connection can end under an
// open stream, on both protocols. A stream the peer did not finish with a
// FIN must never return an error that errors.Is matches to io.EOF (code
// that tests for the end of a stream that way, as x/net/http2 does, would
// take truncated data as complete), and each way must say why.

// connEndPeer is a raw peer on one end of a loopback TCP connection with a
// braid Server on the other: it opens one stream and writes its bytes by
// hand, so that each case can end the connection exactly where it wants.
type connEndPeer struct {
	proto Protocol
	conn  net.Conn // the raw peer's end
}

// open returns the bytes that open the peer's first stream and carry body.
func (p connEndPeer) open(body []byte) []byte {
	if p.proto == Mplex {
		return append(mplexFrameBytes(0, mplexNewStream, nil), mplexFrameBytes(0, mplexMessageInitiator, body)...)
	}
	h := header{typ: typeData, flags: flagSYN, streamID: 1, length: uint32(len(body))}
	return append(h.appendTo(nil), body...)
}

// dataHeader returns the header of a data frame of n bytes on that stream.
func (p connEndPeer) dataHeader(n int) []byte {
	if p.proto == Mplex {
		return append(varint.ToUvarint(0<<3|mplexMessageInitiator), varint.ToUvarint(uint64(n))...)
	}
	return header{typ: typeData, streamID: 1, length: uint32(n)}.appendTo(nil)
}

// failConn is a conn whose writes fail with err once fail is set.
type failConn struct {
	net.Conn
	fail atomic.Bool
	err  error
}

func (c *failConn) Write(b []byte) (int, error) {
	if c.fail.Load() {
		return 0, c.err
	}
	return c.Conn.Write(b)
}

// connEnd is one way a connection ends.
type connEnd struct {
	name  string
	yamux bool // yamux only (go-away, pings)
	cfg   func(*Config)
	// end ends the connection once braid's stream has read the peer's
	// first bytes; braidConn is braid's end.
	end func(t *testing.T, p connEndPeer, braidConn *failConn, st *Stream)
	// want must match the session's error and every stream call's.
	want error
}

func connEnds() []connEnd {
	return []connEnd{
		{name: "peer closes TCP at a frame boundary", want: ErrPeerClosedConn,
			end: func(t *testing.T, p connEndPeer, _ *failConn, _ *Stream) { _ = p.conn.Close() }},
		{name: "peer half-closes TCP at a frame boundary", want: ErrPeerClosedConn,
			end: func(t *testing.T, p connEndPeer, _ *failConn, _ *Stream) { _ = p.conn.(*net.TCPConn).CloseWrite() }},
		{name: "peer closes TCP mid-header", want: io.ErrUnexpectedEOF,
			end: func(t *testing.T, p connEndPeer, _ *failConn, _ *Stream) {
				_, _ = p.conn.Write(p.dataHeader(100)[:1])
				_ = p.conn.Close()
			}},
		{name: "peer closes TCP before a payload", want: io.ErrUnexpectedEOF,
			end: func(t *testing.T, p connEndPeer, _ *failConn, _ *Stream) {
				_, _ = p.conn.Write(p.dataHeader(100))
				_ = p.conn.Close()
			}},
		{name: "peer closes TCP mid-payload", want: io.ErrUnexpectedEOF,
			end: func(t *testing.T, p connEndPeer, _ *failConn, _ *Stream) {
				_, _ = p.conn.Write(append(p.dataHeader(100), make([]byte, 50)...))
				_ = p.conn.Close()
			}},
		{name: "local conn Close", want: net.ErrClosed,
			end: func(t *testing.T, _ connEndPeer, c *failConn, _ *Stream) { _ = c.Conn.Close() }},
		{name: "write error io.EOF", want: ErrPeerClosedConn,
			end: func(t *testing.T, _ connEndPeer, c *failConn, st *Stream) {
				c.err = io.EOF
				c.fail.Store(true)
				_, _ = st.Write([]byte("x")) // the writer fails
			}},
		{name: "write error", want: errWriteBroken,
			end: func(t *testing.T, _ connEndPeer, c *failConn, st *Stream) {
				c.err = errWriteBroken
				c.fail.Store(true)
				_, _ = st.Write([]byte("x"))
			}},
		{name: "keep-alive timeout", yamux: true, want: ErrKeepAliveTimeout,
			cfg: func(c *Config) {
				c.DisableKeepAlive, c.KeepAliveInterval, c.ConnectionWriteTimeout = false, 20*time.Millisecond, 100*time.Millisecond
			},
			end: func(t *testing.T, p connEndPeer, _ *failConn, _ *Stream) {}}, // the peer reads the pings, never answers
		{name: "peer's go-away with an error code", yamux: true, want: &GoAwayError{ErrorCode: GoAwayInternalError, Remote: true},
			end: func(t *testing.T, p connEndPeer, _ *failConn, _ *Stream) {
				_, _ = p.conn.Write(header{typ: typeGoAway, length: GoAwayInternalError}.appendTo(nil))
			}},
		{name: "peer's normal go-away, then TCP close", yamux: true, want: &GoAwayError{ErrorCode: GoAwayNormal, Remote: true},
			end: func(t *testing.T, p connEndPeer, _ *failConn, _ *Stream) {
				_, _ = p.conn.Write(header{typ: typeGoAway, length: GoAwayNormal}.appendTo(nil))
				_ = p.conn.Close()
			}},
		{name: "local Close", want: ErrSessionClosed,
			end: func(t *testing.T, _ connEndPeer, _ *failConn, st *Stream) { _ = st.Session().Close() }},
	}
}

var errWriteBroken = errors.New("test: write failed")

// TestConnectionEndNeverEOF ends the connection under an open stream in
// every way and checks every call's error: Read (after the bytes that did
// arrive), Write, AcceptStream, OpenStream, Ping and Session.Err all fail
// with an error that matches the way's cause and ErrSessionClosed, the
// stream's also ErrStreamReset, and none matches io.EOF.
func TestConnectionEndNeverEOF(t *testing.T) { forEachConnEnd(t, testConnectionEnd) }

// forEachConnEnd runs test as a subtest for each protocol and each way of
// connEnds that applies to it.
func forEachConnEnd(t *testing.T, test func(*testing.T, Protocol, connEnd)) {
	for _, proto := range []Protocol{Yamux, Mplex} {
		pname := map[Protocol]string{Yamux: "yamux", Mplex: "mplex"}[proto]
		for _, ce := range connEnds() {
			if ce.yamux && proto != Yamux {
				continue
			}
			t.Run(pname+"/"+ce.name, func(t *testing.T) { test(t, proto, ce) })
		}
	}
}

// connEndSession is a braid server over TCP whose conn a test can end in
// the ways of connEnds, with one stream the raw peer opened and sent
// "hello" on, read: the session, its conn (fc), the raw peer and the
// stream. The peer drains what braid sends (its ACK, pings), counted in
// read: a socket closed with unread bytes would reset the connection
// instead of closing it. tweak, if not nil, changes the config after ce's.
func connEndSession(t *testing.T, proto Protocol, ce connEnd, tweak func(*Config)) (s *Session, fc *failConn, p connEndPeer, st *Stream, read *atomic.Int64) {
	cfg := DefaultConfig()
	cfg.Protocol = proto
	cfg.DisableKeepAlive = true
	if ce.cfg != nil {
		ce.cfg(cfg)
	}
	if tweak != nil {
		tweak(cfg)
	}
	c1, c2 := tcpPair(t)
	fc = &failConn{Conn: c2}
	s, err := Server(fc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		_ = c1.Close()
	})
	p = connEndPeer{proto: proto, conn: c1}
	drained := make(chan struct{})
	read = new(atomic.Int64)
	go func() {
		defer close(drained)
		buf := make([]byte, 64*1024)
		for {
			n, err := c1.Read(buf)
			read.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	// Runs before the cleanup above (cleanups run last first), as a
	// deferred close at the test's end did.
	t.Cleanup(func() { _ = c1.Close(); <-drained })
	if _, err := c1.Write(p.open([]byte("hello"))); err != nil {
		t.Fatal(err)
	}
	st = acceptWithin(t, s)
	got := make([]byte, 5)
	if _, err := io.ReadFull(st, got); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	return s, fc, p, st, read
}

func testConnectionEnd(t *testing.T, proto Protocol, ce connEnd) {
	s, fc, p, st, read := connEndSession(t, proto, ce, nil)
	if proto == Yamux {
		// braid's first ping (it measures the RTT from the start) and the
		// stream's ACK must have reached the peer.
		for deadline := time.Now().Add(5 * time.Second); read.Load() < 2*headerSize; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no ACK from braid")
			}
		}
	}
	ce.end(t, p, fc, st)

	check := func(what string, err error, stream bool) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s: no error", what)
		case errors.Is(err, io.EOF):
			t.Errorf("%s: %q matches io.EOF", what, err)
		case !errors.Is(err, ce.want):
			t.Errorf("%s: %q does not match %v", what, err, ce.want)
		case !errors.Is(err, ErrSessionClosed):
			t.Errorf("%s: %q does not match ErrSessionClosed", what, err)
		case stream && !errors.Is(err, ErrStreamReset):
			t.Errorf("%s: %q does not match ErrStreamReset", what, err)
		}
		if ga := (*GoAwayError)(nil); errors.As(ce.want, &ga) {
			var got *GoAwayError
			if !errors.As(err, &got) || *got != *ga {
				t.Errorf("%s: %q is not %#v", what, err, *ga)
			}
		}
	}
	_, rerr := st.Read(make([]byte, 5)) // waits for the end (the deadline bounds it)
	if errors.Is(rerr, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v: the session did not end", rerr)
	}
	check("Read", rerr, true)
	select {
	case <-s.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("session still open")
	}
	_, werr := st.Write([]byte("more"))
	check("Write", werr, true)
	_, aerr := s.AcceptStream()
	check("AcceptStream", aerr, false)
	_, oerr := s.OpenStream(context.Background())
	check("OpenStream", oerr, false)
	if proto == Yamux {
		_, perr := s.Ping()
		check("Ping", perr, false)
	}
	check("Session.Err", s.Err(), false)
	t.Logf("Read: %v", rerr)
}
