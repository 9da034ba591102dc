package slowconn

import (
	"net"
	"os"
)

// writer is the sending side shared by Pipe ends and wrapped conns: it
// queues Writes on a half, one at a time so concurrent Writes never
// interleave, and blocks while the send buffer is full.
type writer struct {
	out    *half
	sem    chan struct{} // one-slot semaphore: held by the Write in progress
	dl     deadline
	closed chan struct{} // the owning conn's Close channel
}

func newWriter(out *half, closed chan struct{}) writer {
	return writer{
		out:    out,
		sem:    make(chan struct{}, 1),
		dl:     makeDeadline(),
		closed: closed,
	}
}

// write queues all of p, in pieces if it is larger than the free buffer.
func (w *writer) write(p []byte) (int, error) {
	if err := acquire(w.sem, &w.dl, w.closed); err != nil {
		return 0, err
	}
	defer func() { <-w.sem }()
	written := 0
	for {
		if isClosed(w.closed) {
			return written, net.ErrClosed
		}
		if isClosed(w.dl.wait()) {
			return written, os.ErrDeadlineExceeded
		}
		n, err := w.out.write(p[written:])
		written += n
		if err != nil && isClosed(w.closed) {
			// Close ran since the check above and queued the FIN:
			// report our own Close, not a peer that went away.
			err = net.ErrClosed
		}
		if err != nil || written == len(p) {
			return written, err
		}
		if n > 0 {
			continue // the reader may have freed more room meanwhile
		}
		select {
		case <-w.out.writable:
		case <-w.dl.wait():
		case <-w.closed:
		}
	}
}
