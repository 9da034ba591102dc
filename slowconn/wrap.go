package slowconn

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Wrap returns a conn that sends over c as if c's outbound direction were
// the link l: each Write is queued as on a [Pipe] and one goroutine hands
// the bytes to c when they arrive, coalescing everything due into one
// c.Write. Reads, and read deadlines, go straight to c; wrap both ends of a
// pair to shape both directions.
//
// Close delivers the bytes already written (as a TCP close does), waiting
// at most as long as they take to arrive plus a linger time of one second
// for c to accept them, then closes c; the goroutine has exited when Close
// returns. If c has a CloseWrite() error method, so does the wrapped conn.
// Wrap panics if c is nil or l is invalid (see Link.Validate), at once
// rather than in its goroutine.
func Wrap(c net.Conn, l Link) net.Conn {
	if c == nil {
		panic(errors.New("slowconn: Wrap of a nil net.Conn"))
	}
	l.mustValidate()
	w := &wrapConn{
		c:        c,
		out:      newHalf(l, 0),
		closed:   make(chan struct{}),
		pumpDone: make(chan struct{}),
	}
	w.w = newWriter(w.out, w.closed)
	go w.pump(min(w.out.limit, maxPumpWrite))
	if _, ok := c.(closeWriter); ok {
		return &wrapHalfCloser{w}
	}
	return w
}

const (
	// maxPumpWrite bounds one coalesced write to the wrapped conn, and the
	// pump's scratch buffer: large enough that the pump's per-write cost
	// is negligible at 10 Gbit/s, small enough to allocate per conn.
	maxPumpWrite = 256 << 10
	// closeLinger bounds how long Close waits for the wrapped conn to
	// accept the last bytes after they arrive, so a peer that never reads
	// cannot block Close forever.
	closeLinger = time.Second
)

// closeWriter is implemented by conns that can half-close, like
// *net.TCPConn.
type closeWriter interface {
	CloseWrite() error
}

// wrapConn shapes the outbound direction of c.
type wrapConn struct {
	c        net.Conn
	out      *half
	w        writer
	pumpDone chan struct{} // closed when the pump goroutine has exited

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
	closeErr  error         // result of c.Close, set inside closeOnce

	mu        sync.Mutex // guards writeShut
	writeShut bool       // CloseWrite was called: the pump half-closes c after the FIN
}

// Read reads from c.
func (w *wrapConn) Read(p []byte) (int, error) {
	if isClosed(w.closed) {
		return 0, opError("read", w.LocalAddr(), w.RemoteAddr(), net.ErrClosed)
	}
	n, err := w.c.Read(p)
	if err != nil && isClosed(w.closed) {
		err = opError("read", w.LocalAddr(), w.RemoteAddr(), net.ErrClosed)
	}
	return n, err
}

// Write queues p on the simulated link, blocking while the send buffer is
// full. Once writing to c has failed, Write returns that error.
func (w *wrapConn) Write(p []byte) (int, error) {
	n, err := w.w.write(p)
	return n, opError("write", w.LocalAddr(), w.RemoteAddr(), err)
}

// Close delivers what was written, closes c and waits for the pump
// goroutine to exit; see [Wrap].
func (w *wrapConn) Close() error {
	err := error(net.ErrClosed)
	w.closeOnce.Do(func() {
		close(w.closed)
		until := w.out.closeWrite()
		// Wake a Read blocked in c, and bound how long a peer that does
		// not read can hold the pump.
		_ = w.c.SetReadDeadline(time.Unix(1, 0)) // long past
		_ = w.c.SetWriteDeadline(time.Now().Add(until + closeLinger))
		<-w.pumpDone
		w.closeErr = w.c.Close()
		err = nil
	})
	if err != nil {
		return opError("close", w.LocalAddr(), w.RemoteAddr(), err)
	}
	return w.closeErr
}

// LocalAddr returns c's local address.
func (w *wrapConn) LocalAddr() net.Addr { return w.c.LocalAddr() }

// RemoteAddr returns c's remote address.
func (w *wrapConn) RemoteAddr() net.Addr { return w.c.RemoteAddr() }

// SetDeadline sets the write deadline of the simulated link and c's read
// deadline.
func (w *wrapConn) SetDeadline(t time.Time) error {
	if isClosed(w.closed) {
		return opError("set", w.LocalAddr(), w.RemoteAddr(), net.ErrClosed)
	}
	w.w.dl.set(t)
	return w.c.SetReadDeadline(t)
}

// SetReadDeadline sets c's read deadline.
func (w *wrapConn) SetReadDeadline(t time.Time) error {
	if isClosed(w.closed) {
		return opError("set", w.LocalAddr(), w.RemoteAddr(), net.ErrClosed)
	}
	return w.c.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline of the simulated link; it wakes
// a Write blocked on a full send buffer.
func (w *wrapConn) SetWriteDeadline(t time.Time) error {
	if isClosed(w.closed) {
		return opError("set", w.LocalAddr(), w.RemoteAddr(), net.ErrClosed)
	}
	w.w.dl.set(t)
	return nil
}

// pump hands bytes to c as they arrive until the FIN arrives or writing to
// c fails. It owns one timer, reset for each wait.
func (w *wrapConn) pump(bufSize int) {
	defer close(w.pumpDone)
	buf := make([]byte, bufSize)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	timer.Stop()
	for {
		n, wait, err := w.out.take(buf, false)
		if n > 0 {
			_, werr := w.c.Write(buf[:n])
			w.out.release(n)
			if werr != nil {
				w.out.closeRead(werr)
				return
			}
			continue
		}
		if err != nil { // the FIN arrived
			w.mu.Lock()
			shut := w.writeShut
			w.mu.Unlock()
			if shut && !isClosed(w.closed) {
				if err := w.c.(closeWriter).CloseWrite(); err != nil {
					w.out.closeRead(err)
				}
			}
			return
		}
		var due <-chan time.Time
		if wait != noWake {
			timer.Reset(wait)
			due = timer.C
		}
		select {
		case <-due:
		case <-w.out.readable:
		}
		timer.Stop()
	}
}

// wrapHalfCloser is a wrapConn around a conn that can half-close.
type wrapHalfCloser struct {
	*wrapConn
}

// CloseWrite sends EOF to the peer after the bytes already written have
// arrived, by calling c.CloseWrite then; reading continues. Later writes
// fail with io.ErrClosedPipe.
func (w *wrapHalfCloser) CloseWrite() error {
	if isClosed(w.closed) {
		return opError("close", w.LocalAddr(), w.RemoteAddr(), net.ErrClosed)
	}
	w.mu.Lock()
	w.writeShut = true
	w.mu.Unlock()
	w.out.closeWrite()
	return nil
}
