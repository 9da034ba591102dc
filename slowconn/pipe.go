package slowconn

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Pipe returns the two ends of a simulated link that behaves as l in each
// direction; each direction draws its own jitter and loss from l.Seed.
// Both ends implement the full net.Conn contract (deadlines, partial
// reads, io.EOF after the peer closes and its data has arrived) and, like
// *net.TCPConn, a CloseWrite() error method that sends EOF but keeps
// reading. A Pipe runs no goroutines. It panics if l is invalid (see
// Link.Validate).
//
// As with a TCP conn, errors other than io.EOF are *net.OpErrors: they
// match os.ErrDeadlineExceeded when a deadline passes, net.ErrClosed once
// this end is closed, and io.ErrClosedPipe for a Write after this end's
// CloseWrite or after the peer's Close (which discards what still comes).
func Pipe(l Link) (net.Conn, net.Conn) {
	l.mustValidate()
	ab, ba := newHalf(l, 0), newHalf(l, 1)
	a := newPipeConn(ba, ab, "slowconn:a", "slowconn:b")
	b := newPipeConn(ab, ba, "slowconn:b", "slowconn:a")
	return a, b
}

// pipeConn is one end of a Pipe: it reads in and writes out.
type pipeConn struct {
	in, out       *half
	local, remote addr
	w             writer

	readSem chan struct{} // one-slot semaphore: held by the Read in progress
	// readTimer wakes the Read holding readSem when the head of in
	// arrives; it is reset, never re-created.
	readTimer *time.Timer
	rdl       deadline

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
}

func newPipeConn(in, out *half, local, remote addr) *pipeConn {
	c := &pipeConn{
		in:        in,
		out:       out,
		local:     local,
		remote:    remote,
		readSem:   make(chan struct{}, 1),
		readTimer: time.NewTimer(time.Hour),
		rdl:       makeDeadline(),
		closed:    make(chan struct{}),
	}
	c.readTimer.Stop()
	c.w = newWriter(out, c.closed)
	return c
}

// Read reads the bytes that have arrived, waiting for the first one. It
// returns io.EOF once the peer has closed and everything it wrote has
// arrived.
func (c *pipeConn) Read(p []byte) (int, error) {
	n, err := c.read(p)
	return n, opError("read", c.local, c.remote, err)
}

func (c *pipeConn) read(p []byte) (int, error) {
	if err := acquire(c.readSem, &c.rdl, c.closed); err != nil {
		return 0, err
	}
	defer func() { <-c.readSem }()
	for {
		if isClosed(c.closed) {
			return 0, net.ErrClosed
		}
		if isClosed(c.rdl.wait()) {
			return 0, os.ErrDeadlineExceeded
		}
		if len(p) == 0 {
			return 0, nil
		}
		n, wait, err := c.in.take(p, true)
		if n > 0 || err != nil {
			return n, err
		}
		var due <-chan time.Time
		if wait != noWake {
			c.readTimer.Reset(wait)
			due = c.readTimer.C
		}
		select {
		case <-due:
		case <-c.in.readable:
		case <-c.rdl.wait():
		case <-c.closed:
		}
		c.readTimer.Stop()
	}
}

// Write queues p on the link, blocking while the send buffer is full.
func (c *pipeConn) Write(p []byte) (int, error) {
	n, err := c.w.write(p)
	return n, opError("write", c.local, c.remote, err)
}

// Close closes both directions. Bytes already written are still delivered
// and then the peer reads io.EOF; bytes the peer sends from now on are
// discarded and its writes fail with io.ErrClosedPipe. Blocked calls return
// net.ErrClosed.
func (c *pipeConn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		err = nil
		close(c.closed)
		c.out.closeWrite()
		c.in.closeRead(io.ErrClosedPipe)
	})
	return opError("close", c.local, c.remote, err)
}

// CloseWrite closes the sending direction: the peer reads what was written
// and then io.EOF, while this end can still read. Later writes fail with
// io.ErrClosedPipe.
func (c *pipeConn) CloseWrite() error {
	if isClosed(c.closed) {
		return opError("close", c.local, c.remote, net.ErrClosed)
	}
	c.out.closeWrite()
	return nil
}

// LocalAddr returns this end's address.
func (c *pipeConn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address.
func (c *pipeConn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *pipeConn) SetDeadline(t time.Time) error {
	if isClosed(c.closed) {
		return opError("set", c.local, c.remote, net.ErrClosed)
	}
	c.rdl.set(t)
	c.w.dl.set(t)
	return nil
}

// SetReadDeadline sets the read deadline; it wakes a Read already waiting.
func (c *pipeConn) SetReadDeadline(t time.Time) error {
	if isClosed(c.closed) {
		return opError("set", c.local, c.remote, net.ErrClosed)
	}
	c.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the write deadline; it wakes a Write already
// blocked on a full send buffer.
func (c *pipeConn) SetWriteDeadline(t time.Time) error {
	if isClosed(c.closed) {
		return opError("set", c.local, c.remote, net.ErrClosed)
	}
	c.w.dl.set(t)
	return nil
}

// acquire takes the one-slot semaphore sem unless the deadline passes or
// the conn closes first. A closed conn reports net.ErrClosed even if the
// deadline has passed too (select would pick either at random).
func acquire(sem chan struct{}, dl *deadline, closed chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-dl.wait():
		if isClosed(closed) {
			return net.ErrClosed
		}
		return os.ErrDeadlineExceeded
	case <-closed:
		return net.ErrClosed
	}
}
