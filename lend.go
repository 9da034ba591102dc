package braid

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Lending: a Read waiting with an empty buffer offers its own buffer to
// the read loop, which reads the next data frame's payload straight into
// it, instead of into a pooled buffer that the Read then copies out of.
// On loopback TCP the copies are most of a bulk flow's cost (the sender's
// into the kernel, the kernel's into the receiver, and without lending a
// third, from the stream's buffer into the caller's), so a lent read
// moves a large message at close to a raw conn's rate.
//
// While the read loop fills a lent buffer, the Read that lent it cannot
// return: the buffer is the caller's. A Read that must end meanwhile (its
// deadline passed, the stream was reset or closed for reading) asks for a
// cut: the conn's read deadline is set in the past, the read loop's read
// returns a timeout, and the read loop gives the buffer back with what it
// holds and reads the rest of the frame as usual. So a peer that stalls
// in the middle of a frame cannot hold a Read past its deadline. Only
// conns whose reads resume after a timeout can lend (lendable): a noise
// or other wrapped conn may lose its state at a timeout.
//
// A lent buffer's bytes are consumed, for flow control, when the read
// loop gives the buffer back: they are the caller's from then on, braid
// holds nothing for them, and the Read that lent the buffer returns them
// whatever ends it. So the window update goes out from the read loop,
// before it reads on, and joins the pong of the marker that follows the
// data (inflight.go) in one write. Credited when the Read returned, it
// took a second write: at GOMAXPROCS 1 the writer woken by the pong ran
// first. Measured with Polkadot's notifications on loopback TCP at
// GOMAXPROCS 1 (session 17, Session.Stats): the receiver's writes per
// 256 KiB message went from 2.00 to 1.01, and the messages per second
// doubled (docs/measurements.md, session 17; TestLentBytesCreditedAtGiveBack).
//
// Lock order: Stream.mu, then readCutter.mu. The read loop takes
// readCutter.mu with no stream lock held.

const (
	// minLend is the least a lent buffer must take of a frame's payload
	// (all of it, for a smaller payload): a smaller part saves a copy of
	// a few KiB, less than the lend's extra lock and the partial frame
	// that then goes through the stream's buffer after all. io.Copy
	// reads into 32 KiB, io.Discard into 8 KiB: the second never lends a
	// 64 KiB frame, and goes on as before.
	minLend = 16 * 1024
)

// errLendCut is the read loop's own: its read into a lent buffer was cut
// (readCutter). It never leaves the read loop.
var errLendCut = errors.New("braid: read into a lent buffer was cut")

// lendable reports whether reads of conn can be cut by a read deadline in
// the past and then resumed: the net package's own conns (or an unnamed
// struct that is one, wrappedNetConn), and crypto/tls over them (a
// timeout in the middle of a record keeps what was read of it).
func lendable(conn net.Conn) bool {
	switch c := conn.(type) {
	case *net.TCPConn, *net.UnixConn:
		return true
	case *tls.Conn:
		return lendable(c.NetConn())
	}
	return wrappedNetConn(conn) != nil
}

// readCutter interrupts the read loop's conn read for a Read whose lent
// buffer it holds. Streams call cut; the read loop calls cleared on a
// read's error.
type readCutter struct {
	conn  net.Conn
	mu    sync.Mutex // guards asked, and with it the conn's read deadline
	asked bool       // a cut was asked: the conn's read deadline is in the past
}

// newReadCutter returns the cutter for conn, or nil if conn can't lend.
func newReadCutter(conn net.Conn) *readCutter {
	if !lendable(conn) {
		return nil
	}
	return &readCutter{conn: conn}
}

// cut makes the read loop's current or next conn read return at once.
func (c *readCutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cutLocked()
}

// cutLocked is cut with mu held.
func (c *readCutter) cutLocked() {
	if !c.asked {
		c.asked = true
		_ = c.conn.SetReadDeadline(time.Unix(1, 0)) // long past; a closed conn's read fails anyway
	}
}

// cutIdle cuts the read loop's read if idle is set: a Read that wants
// the conn turn (turn.go) cuts the read loop's header read at a quiet
// moment, and no other read. endIdle clears idle under the same lock.
func (c *readCutter) cutIdle(idle *atomic.Bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if idle.Load() {
		c.cutLocked()
	}
}

// endIdle clears idle once the read loop's header read at a quiet moment
// returned, and with gotHeader (it brought the header) drops a cut still
// pending: asked as the header came, it would end the payload's read,
// which may fill a lent buffer, with what had arrived of it. A cut that
// is still wanted then is asked again by whoever wants it: a lend's once
// the payload's read has begun; a Read that wants the turn is lent it
// after this frame. Only here is a pending cut dropped: a lend's cut is
// for every read of its payload, not the one under way, and a taker's
// (an event of its stream's, cutFor) must outlast the buffered frames
// it handles before its next read. A read waker's cut (readwake.go) that
// lands after the read loop's busy header read can still end a lend
// early; the Read then returns what was lent, as a cut does.
func (c *readCutter) endIdle(idle *atomic.Bool, gotHeader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idle.Store(false)
	if gotHeader && c.asked {
		c.asked = false
		_ = c.conn.SetReadDeadline(time.Time{})
	}
}

// cleared reports whether err is the timeout of a cut, and if so clears
// the conn's read deadline, so that the next read waits again. A timeout
// that no cut asked for is an error of the conn's.
func (c *readCutter) cleared(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.asked {
		return false
	}
	c.asked = false
	_ = c.conn.SetReadDeadline(time.Time{})
	return true
}

// lendSlot is a stream's lent buffer, made on the stream's first lend (an
// idle stream holds none). The stream's mu guards it.
type lendSlot struct {
	buf    []byte // the waiting Read's buffer; nil when none is offered
	active bool   // the read loop is filling buf: its Read waits
	filled int    // bytes the read loop put in buf, not yet returned by its Read
	cut    bool   // the Read asked for a cut of this lend
}

// holds reports whether b is the buffer the slot holds.
func (l *lendSlot) holds(b []byte) bool {
	return l != nil && len(l.buf) > 0 && len(b) > 0 && &l.buf[0] == &b[0]
}

// offerLocked lends b, the buffer of a Read about to wait with nothing
// buffered, if it is large enough, the conn can lend, and no other Read's
// buffer is lent. mu held.
func (s *Stream) offerLocked(b []byte) {
	if s.session.cutter == nil || len(b) < minLend || s.readState != halfOpen {
		return
	}
	if s.lend == nil {
		s.lend = &lendSlot{}
	}
	if s.lend.buf == nil {
		s.lend.buf = b
	}
}

// awaitLentLocked waits while the read loop fills the Read's lent
// buffer, and asks for a cut once the Read must end (its deadline passed,
// or the read side ended). mu held on entry and on return; released while
// waiting.
func (s *Stream) awaitLentLocked() {
	l := s.lend
	if !l.cut && (s.readState != halfOpen || s.readDeadline.expired()) {
		l.cut = true
		s.session.cutter.cut()
	}
	wait := waitChan(&s.readWait)
	var deadline <-chan struct{}
	if !l.cut {
		deadline = s.readDeadline.wait() // after the cut, the deadline's closed channel would spin
	}
	s.mu.Unlock()
	select {
	case <-wait:
	case <-deadline:
	}
	s.mu.Lock()
}

// take withdraws the offer, once the read loop gave the buffer back, and
// returns the bytes it put there (the Read returns them). mu held.
func (l *lendSlot) take() int {
	n := l.filled
	l.filled, l.buf = 0, nil
	return n
}

// borrow is the read loop's: it takes the lent buffer for a data frame's
// n payload bytes, if a Read waits with one, nothing is buffered before
// it, and it takes at least minLend of them (or all). It returns the part
// to fill, or nil.
func (s *Stream) borrow(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lend
	if l == nil || l.buf == nil || l.active || l.filled > 0 || s.recv.size > 0 || s.readState != halfOpen {
		return nil
	}
	if len(l.buf) < min(n, minLend) {
		return nil
	}
	l.active, l.cut = true, false
	return l.buf[:min(n, len(l.buf))]
}

// giveBack is the read loop's: it returns the lent buffer with the k
// bytes it put there, wakes its Read, and credits the bytes back to the
// peer now (see the top of the file). Bytes nobody will read (the read
// side ended meanwhile) are dropped, and credited back the same way.
func (s *Stream) giveBack(k int) {
	s.mu.Lock()
	l := s.lend
	l.active, l.cut = false, false
	notify(s.readWait)
	if k == 0 {
		s.mu.Unlock()
		return
	}
	if s.receivedLocked(k) {
		l.filled = k // its Read returns them, whatever ends it
	}
	s.consumedAndUnlock(uint32(k))
}
