package braid

import (
	"io"
	"time"
)

// Lingering close. A conn closed while the peer is still writing to it
// (a window update, a pong, bulk data) answers the peer's next bytes with
// a TCP RST, and a kernel that takes an RST drops what its application
// has not read yet: the go-away Close just wrote goes with it, and the
// peer sees a reset connection instead of braid's code. (The interop
// matrix's braid-go-away-while-peer-sends row failed so in 7 of 20 runs
// against go-yamux and hashicorp/yamux while Close closed at once.)
//
// So after the writer has flushed, Close closes a conn that can half-close
// (TCP, Unix, TLS) for writing, which tells the peer that nothing follows
// the go-away, and the read loop reads on, dropping what comes, until the
// peer closes its end (every yamux and mplex peer does once it has read
// the go-away or the end of the conn) or a few round trips pass
// (lingerFor). Only then is the conn closed, with nothing unread in it.
// This is net/http's closeWriteAndWait, bounded by the peer's end rather
// than by a fixed sleep.
//
// Only a local Close lingers, and only once the writer flushed in time
// (a writer stuck on a peer that does not read would wait in vain). The
// read loop's ends (the peer's go-away with a code, a broken protocol, a
// failed conn) close at once.

const (
	// closeLinger bounds how long Close waits, after the flush, for the
	// peer to close its end: a peer that has read the go-away closes
	// within a round trip or so, and one that never does costs Close
	// lingerFor, at most this much.
	closeLinger = time.Second
	// lingerRTTs is the round trips Close waits for the peer's end, when
	// the session measured one (a ping's pong): the go-away's way there,
	// the peer's end's way back, and as much again for the peer's
	// goroutines to run.
	lingerRTTs = 4
	// lingerMin is the least wait: on loopback a round trip is tens of
	// microseconds, while the peer's read loop may wait for a CPU for
	// milliseconds on a busy machine; and a session without a measured
	// round trip (mplex has no pings) waits this long.
	lingerMin = 50 * time.Millisecond
)

// lingerFor is how long Close waits for the peer's end (see the top of
// the file): lingerRTTs round trips, at least lingerMin and at most
// closeLinger.
func (s *Session) lingerFor() time.Duration {
	return min(max(lingerRTTs*s.RTT(), lingerMin), closeLinger)
}

// halfCloser is a conn that can close its writing side alone:
// *net.TCPConn, *net.UnixConn, *tls.Conn (whose CloseWrite sends the
// close_notify alert, which the peer's tls.Conn reads as io.EOF).
type halfCloser interface {
	CloseWrite() error
}

// linger half-closes the conn and waits, at most lingerFor, until the
// read loop has read the peer's end (see the top of the file). Called by
// Close's goroutine once the writer flushed; the read loop reads on, and
// drops the rest once its frames end (drainAfterClose).
func (s *Session) linger() {
	hc, ok := s.conn.(halfCloser)
	if !ok {
		return
	}
	s.lingering.Store(true)
	if hc.CloseWrite() != nil {
		return
	}
	t := time.NewTimer(s.lingerFor())
	defer t.Stop()
	select {
	case <-s.readDone:
	case <-t.C:
	}
}

// drainAfterClose is the read loop's once its frames ended while Close
// lingers: whatever made them end (the peer's end, or a frame a closing
// session can't take: its control queue, which nobody writes any more,
// full), it reads and drops the rest of the conn until the peer's end or
// Close's closing of the conn, so that nothing stays unread to turn the
// close into a reset. Close's goroutine ends the session; the read loop
// reports nothing.
func (s *Session) drainAfterClose() {
	_, _ = io.Copy(io.Discard, s.br)
}
