package braid

import (
	"errors"
	"net"
	"os"
	"time"
)

// The writer's writes to the conn. On a conn without writev (a security
// layer: TLS, noise) a batch goes as whole records (writeFlat), its last
// partial record kept for the next batch, the socket corked between
// batches (cork.go); with writev it is one vectored write (writeVec), and
// with coalescing off each frame is a write of its own (writeEach). Every
// write is bounded by Config.ConnectionWriteTimeout (armWriteTimeout) and
// counted (account). Only run and an inline write (inline.go) write, one
// at a time (writer.writing, under writer.mu).

// recordSize is the plaintext of a full TLS record (and of a noise
// message, near enough): the unit a conn without writev encrypts and
// writes.
const recordSize = 16 * 1024

// writeFlat writes a batch on a conn without writev: flat (the control and
// copied frames, after the last batch's partial record), then the
// by-reference frames, then tail (a marker; before the last by-reference
// frame when batch.early). The security layer encrypts each Write
// into records of recordSize and a last, shorter one, and each record is
// one system call, so writeFlat makes every Write but the last a whole
// number of records: a payload is copied only up to the next record
// boundary of what precedes it, its whole records are written from the
// caller's memory, and its last partial record is copied to go on with
// what follows. With keep, the batch's final partial record is not
// written but returned, moved to the front of flat's buffer: run writes it
// with the next batch if one is queued, or alone before it parks (so it
// never waits for anything but the write of what is already queued).
// Without keep (the batch brought nothing new) everything is written.
func (w *writer) writeFlat(flat, tail []byte, keep bool) ([]byte, error) {
	b := &w.b
	for i := range b.refs {
		f := &b.refs[i]
		if b.early && i == len(b.refs)-1 {
			flat = append(flat, tail...)
		}
		flat = append(flat, f.hdr[:f.hdrLen]...)
		p := f.payload
		head := (recordSize - len(flat)%recordSize) % recordSize
		if len(p)-head < recordSize {
			flat = append(flat, p...) // no whole record to spare
			continue
		}
		flat = append(flat, p[:head]...)
		p = p[head:]
		whole := len(p) - len(p)%recordSize
		if err := w.write(flat); err != nil {
			return flat[:0], err
		}
		if err := w.write(p[:whole]); err != nil {
			return flat[:0], err
		}
		flat = append(flat[:0], p[whole:]...)
	}
	if !b.early {
		flat = append(flat, tail...)
	}
	if !keep {
		return flat[:0], w.write(flat)
	}
	whole := len(flat) - len(flat)%recordSize
	if whole == 0 {
		return flat, nil
	}
	if err := w.write(flat[:whole]); err != nil {
		return flat[:0], err
	}
	return flat[:copy(flat, flat[whole:])], nil
}

// uncork takes off the cork run left on (corked), sending the partial
// segment it holds. Run's; called without mu.
func (w *writer) uncork() {
	if w.corked {
		w.cork.set(false)
		w.corked = false
	}
}

// keptLocked tells whether the last write kept bytes back for the next:
// a partial record in flat (writeFlat) or a partial segment (segment.go).
// Called by run, with no inline write running; mu held.
func (w *writer) keptLocked() bool { return len(w.flat) > 0 || len(w.seg.buf) > 0 }

// flushKeptLocked writes what the last write kept back, when no write
// follows to carry it; a failed write ends the session as a failed batch
// does. mu held; released during the write.
func (w *writer) flushKeptLocked() {
	w.writing = true
	w.mu.Unlock()
	var err error
	if len(w.flat) > 0 {
		err = w.write(w.flat)
		w.flat = w.flat[:0]
	} else {
		err = w.write(w.seg.buf)
		w.seg.written(nil)
	}
	w.mu.Lock()
	w.writing = w.corked
	if err != nil && w.err == nil {
		w.err = err
		breakConn(w.conn)
	}
}

// writeEach writes every frame with its own Write: Config.DisableCoalescing.
func (w *writer) writeEach(b *batch) error {
	start := 0
	for _, end := range b.ctrlEnds {
		if err := w.write(b.ctrl[start:end]); err != nil {
			return err
		}
		start = end
	}
	start = 0
	for _, end := range b.ends {
		if err := w.write(b.data[start:end]); err != nil {
			return err
		}
		start = end
	}
	for i := range b.refs {
		f := &b.refs[i]
		if w.writev {
			b.vec = append(b.vec[:0], f.hdr[:f.hdrLen], f.payload)
			if err := w.writeVec(b.vec); err != nil {
				return err
			}
			continue
		}
		if err := w.write(f.hdr[:f.hdrLen]); err != nil {
			return err
		}
		if err := w.write(f.payload); err != nil {
			return err
		}
	}
	return nil
}

// write writes b to the conn under the connection write timeout, which
// only a Write that accepted no byte in time exhausts.
func (w *writer) write(b []byte) error {
	for {
		w.beginConnWrite()
		n, err := w.conn.Write(b)
		if n < 0 || n > len(b) {
			return errInvalidWrite // a broken conn; slicing b would panic
		}
		b = b[n:]
		// A conn that accepted bytes before the timeout is slow, not
		// stalled: only a whole timeout without a byte ends the session.
		if err = w.account(int64(n), err); err != ErrConnectionWriteTimeout || n == 0 || len(b) == 0 {
			return err
		}
	}
}

// writeVec writes vec with writev under the connection write timeout, as
// write does. vec's backing array stays the caller's.
func (w *writer) writeVec(vec net.Buffers) error { return w.writeVecInto(&w.vec, vec) }

// writeVecInto is writeVec with bufs (consumed as the write goes) its
// caller's: run's or an inline write's.
func (w *writer) writeVecInto(bufs *net.Buffers, vec net.Buffers) error {
	*bufs = vec
	for {
		w.beginConnWrite()
		n, err := bufs.WriteTo(w.conn) // consumes what was written
		// As in write: retry while the conn accepts bytes.
		if err = w.account(n, err); err != ErrConnectionWriteTimeout || n == 0 || len(*bufs) == 0 {
			*bufs = nil
			return err
		}
	}
}

// beginConnWrite precedes every conn call of write and writeVecInto: it
// arms the connection write timeout and counts the call (Stats.Writes),
// before it is made, since the peer can read a loopback write's bytes
// before the call returns; account counts its bytes after.
func (w *writer) beginConnWrite() {
	w.armWriteTimeout()
	w.stats.writes.Add(1)
}

// armWriteTimeout makes sure the conn's write deadline is at least the
// connection write timeout away. Setting a deadline updates a runtime
// timer (a lock and a heap fix, and one more clock read), so one deadline
// serves every write for writeTimeout/writeDeadlineSlack: it is armed
// that much later than needed, and renewed once it would leave a write
// less than the whole timeout. A stalled write fails after between 1 and
// 1+1/writeDeadlineSlack timeouts.
func (w *writer) armWriteTimeout() {
	now := time.Now()
	if now.Before(w.deadlineRenew) {
		return
	}
	slack := w.writeTimeout / writeDeadlineSlack
	w.deadlineRenew = now.Add(slack)
	// A conn without deadlines reports an error here; it still works, and
	// a closed conn fails the write itself, so the error is not needed.
	// Two Adds, not one of the sum: Time.Add saturates, and a timeout
	// near math.MaxInt64 (a user's "never") plus its slack would wrap to
	// a deadline in the past.
	_ = w.conn.SetWriteDeadline(now.Add(w.writeTimeout).Add(slack))
}

// account counts the n bytes a conn call wrote (the call itself was
// counted as it started) and makes a stalled write's deadline error
// ErrConnectionWriteTimeout.
func (w *writer) account(n int64, err error) error {
	w.stats.bytes.Add(uint64(n))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrConnectionWriteTimeout
	}
	return err
}
