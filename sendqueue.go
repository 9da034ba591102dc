package braid

import (
	"os"
	"sync/atomic"
	"time"

	pool "github.com/libp2p/go-buffer-pool"
)

// A stream's send state and its queue. Each stream queues its frames in its
// own sendQueue; the scheduler (scheduler.go) serves the streams with
// queued frames round-robin, a quantum from each in turn, so one stream's
// burst can't take a whole batch while others wait (docs/design.md, "The
// writer", rule 5). Nothing here blocks the writer: a stream waits only for
// its own queue.
//
// Ownership: a Stream holds its send state as one streamSend field, and
// touches it only through the writer calls below (send, sendSmall,
// sendRef, drop, and the credit and direct calls). The writer owns it from
// there: every field is guarded by writer.mu. The writer never takes a
// stream's mu; a stream may call the writer with its mu held (lock order
// Stream.mu, then writer.mu), so that what it decides under its mu (the
// write side's state) and the send state change together.

const (
	// minStreamQueue is the least a stream may have queued (copied) before
	// its writes wait for the writer. With few busy streams a stream may
	// queue up to two batches; with many, two equal shares of one, but
	// never less than this: small writes must still coalesce.
	minStreamQueue = 4 * 1024
	// queueBufStart is the size of a stream queue's first pooled buffer:
	// minStreamQueue, the least a stream may queue, so that a stream of
	// small writes fills it without regrowing (each regrowth copies what
	// is queued; from 1 KiB they were a third of the copying of 100
	// streams of 64 B messages). The buffer goes back to the pool once
	// the queue is empty.
	queueBufStart = minStreamQueue
)

// streamSend is one stream's send state. A small Write queues through
// writer.sendSmall while the stream is direct; the rest of Write and
// CloseWrite (serialized by Stream.writeMu) queue through writer.send and
// writer.sendRef, its resets through writer.drop; the scheduler takes its
// frames, and writer.complete finishes its by-reference frames through
// refWritten. Guarded by writer.mu, but deadline (atomic: Stream.Write
// reads it with no lock, writer.blockingWriteAllowed).
type streamSend struct {
	q           *sendQueue    // frames waiting for the writer; non-nil exactly while in the scheduler's ring
	pendingRefs int           // by-reference frames not yet written, +1 while q holds an untaken by-reference write
	refErr      error         // the write error that ended one of them; taken by sendRef
	flushed     chan struct{} // one slot: the writer took from q, or finished a by-reference frame; made on first wait
	dropped     bool          // reset: the writer takes no more of its frames
	window      uint32        // send credit: the bytes the peer's window still lets us send (yamux)
	direct      bool          // a small Write may go by sendSmall, under writer.mu alone (see setDirect)
	bulk        bool          // sends bulk by copy: a copied Write of more than maxSmallPayload waited for room (send, scheduler.markBulk); never cleared. Its copied frames count in bulkQueued and stop at the budget beside small messages (take, bulkCopyRoom); its small Writes are no small messages (noteWrite)
	deadline    atomic.Int64  // the stream's write deadline in Unix nanoseconds, 0 for none (setWriteDeadline, blockingWriteAllowed)
}

// wait returns the flushed channel, made on first use. mu held.
func (s *streamSend) wait() <-chan struct{} {
	if s.flushed == nil {
		s.flushed = make(chan struct{}, 1)
	}
	return s.flushed
}

// notify wakes the stream's writer if it waits. mu held.
func (s *streamSend) notify() {
	select {
	case s.flushed <- struct{}{}:
	default:
	}
}

// refWritten finishes one by-reference frame the writer took: written, or
// failed with err (the first error is kept for sendRef). The stream wakes
// once none is left. mu held.
func (s *streamSend) refWritten(err error) {
	s.pendingRefs--
	if err != nil && s.refErr == nil {
		s.refErr = err
	}
	if s.pendingRefs == 0 {
		s.notify()
	}
}

// abandonRef discards the part of a by-reference write the writer has not
// taken (a reset, or the writer failed): sendRef returns err unless an
// earlier error ended it. mu held.
func (s *streamSend) abandonRef(err error) {
	q := s.q
	if q == nil || !q.hasRef {
		return
	}
	q.ref, q.hasRef = pendingRef{}, false
	s.pendingRefs--
	if s.refErr == nil {
		s.refErr = err
	}
}

// sendQueue is one stream's frames waiting for the writer, in order:
// copied frames (header and payload) first, then at most one frame by
// reference (Write queues it and waits, so nothing of the stream follows
// it). A stream holds a sendQueue exactly while it is in the scheduler's
// ring. Guarded by writer.mu.
type sendQueue struct {
	buf     []byte   // copied frames; buf[head:] not taken yet; from the pool
	ends    []uint32 // end offset in buf of each frame; ends[endHead:] not taken
	head    int
	endHead int
	ref     pendingRef // valid while hasRef
	hasRef  bool
	deficit int  // deficit round robin credit, in bytes
	resume  bool // its turn was cut by the end of a batch: it goes on in the next (scheduler.take)
	waiting bool // the stream waits for the queue to shrink
}

// pending returns the copied bytes not taken yet.
func (q *sendQueue) pending() int { return len(q.buf) - q.head }

// empty reports whether nothing is queued.
func (q *sendQueue) empty() bool { return q.pending() == 0 && !q.hasRef }

// push appends one copied frame: the codec's header for h, then payload.
// It returns the frame's size: the header's is the codec's (mplex's
// uvarints are shorter than headerSize), and scheduler.queued must count
// what take will subtract.
func (q *sendQueue) push(c codec, h header, payload []byte) int {
	q.grow(headerSize + len(payload))
	start := len(q.buf)
	q.buf = c.appendHeader(q.buf, h)
	q.buf = append(q.buf, payload...)
	q.ends = append(q.ends, uint32(len(q.buf)))
	return len(q.buf) - start
}

// extend appends payload to the last queued frame instead of queueing a
// frame of its own, if the writer has not taken that frame, h (the
// frame payload would have had) carries no flags, and the codec can grow
// the last frame's payload to at most max (codec.extendData); it reports
// whether it did. One frame instead of several is one header to write and,
// at the peer, one frame to admit and buffer under one lock: the most of
// the per-message cost of many small writes. The bytes on the stream are
// the same.
func (q *sendQueue) extend(c codec, h header, payload []byte, max int) bool {
	if h.flags != 0 || q.endHead == len(q.ends) {
		return false // nothing queued that the writer has not taken
	}
	q.grow(headerSize + len(payload)) // enough for either: grow may move the frames
	start := q.head
	if last := len(q.ends) - 1; last > q.endHead {
		start = int(q.ends[last-1])
	}
	if !c.extendData(q.buf[start:], len(payload), max) {
		return false
	}
	q.buf = append(q.buf, payload...)
	q.ends[len(q.ends)-1] = uint32(len(q.buf))
	return true
}

// pushEncoded appends one copied frame whose header is already encoded.
func (q *sendQueue) pushEncoded(hdr, payload []byte) {
	q.grow(len(hdr) + len(payload))
	q.buf = append(append(q.buf, hdr...), payload...)
	q.ends = append(q.ends, uint32(len(q.buf)))
}

// grow makes room for n more bytes: first in place, by moving the frames
// not taken yet to the front (the writer takes from the front while the
// stream appends), else in a larger pooled buffer, to which only those
// frames are copied.
func (q *sendQueue) grow(n int) {
	if len(q.buf)+n <= cap(q.buf) {
		return
	}
	pending := q.pending()
	if q.head > 0 {
		for i := q.endHead; i < len(q.ends); i++ {
			q.ends[i] -= uint32(q.head)
		}
		q.ends = q.ends[:copy(q.ends, q.ends[q.endHead:])]
		q.endHead = 0
	}
	if pending+n <= cap(q.buf) {
		copy(q.buf, q.buf[q.head:])
		q.buf, q.head = q.buf[:pending], 0
		return
	}
	nb := pool.Get(max(pending+n, 2*cap(q.buf), queueBufStart))[:pending]
	copy(nb, q.buf[q.head:])
	if q.buf != nil {
		pool.Put(q.buf[:cap(q.buf)])
	}
	q.buf, q.head = nb, 0
}

// discard forgets the copied frames not taken yet.
func (q *sendQueue) discard() {
	q.head, q.endHead = len(q.buf), len(q.ends)
	q.release()
}

// release returns the buffer once everything queued was taken, so that an
// idle stream holds no queue memory.
func (q *sendQueue) release() {
	if q.pending() > 0 {
		return
	}
	if q.buf != nil {
		pool.Put(q.buf[:cap(q.buf)])
	}
	q.buf, q.head = nil, 0
	q.ends, q.endHead = q.ends[:0], 0
	if cap(q.ends) > maxKeptEnds {
		q.ends = nil
	}
}

// pendingRef is a by-reference write not yet taken in full: the writer
// takes it a frame of at most one batch at a time (scheduler.takeRef), so
// that a large Write waits once, not once per frame.
type pendingRef struct {
	h    header // the next frame's header; its length is set per frame
	rest []byte // the caller's bytes not yet taken
}

// maxKeptEnds bounds the frame-offset slice an idle stream keeps.
const maxKeptEnds = 16

// The three calls a stream makes (stream.go): send, sendRef, drop.

// send queues a stream frame with its payload copied, in order with the
// stream's other frames, or writes it at once in the writer's stead
// (inline.go). It waits while the stream has its share queued, until
// cancel is closed. write is the length of the Write the frame is of (0
// for none: a FIN): a copied Write of more than maxSmallPayload (under
// refThreshold) that waits makes the stream bulk (streamSend.bulk), and
// one of at most that is a small message (scheduler.noteWrite). The rest
// of a larger Write that its credit cut to a copied frame does neither:
// the stream sends by reference (one stream of 32 KiB Writes beside a
// ping, marked bulk by such frames, measured bulk x0.79 at two P over
// TCP and x0.83 at one P over TLS).
func (w *writer) send(s *streamSend, h header, payload []byte, write int, cancel <-chan struct{}) error {
	w.mu.Lock()
	for {
		if w.err != nil || s.dropped {
			err := w.err
			if s.dropped {
				err = ErrStreamReset
			}
			w.mu.Unlock()
			return err
		}
		if w.blockingWriteAllowed(s) {
			if done, err := w.inlineLocked(h, payload); done {
				w.mu.Unlock()
				return err
			}
		}
		w.sched.add(s)
		if w.sched.hasRoom(s) {
			break
		}
		s.q.waiting = true
		if write > maxSmallPayload && write < refThreshold {
			w.sched.markBulk(s)
		}
		flushed := s.wait()
		w.mu.Unlock()
		select {
		case <-flushed:
		case <-cancel:
			w.mu.Lock()
			if s.q != nil {
				s.q.waiting = false
			}
			w.mu.Unlock()
			return os.ErrDeadlineExceeded
		case <-w.done:
		}
		w.mu.Lock()
	}
	w.sched.push(s, h, payload)
	w.sched.noteWrite(s, write)
	w.signal()
	w.mu.Unlock()
	return nil
}

// sendRef sends the data frames of payload from the caller's memory: the
// writer takes it a frame at a time, and sendRef returns once it is done
// with all of it. h is the first frame's header. queued is false when
// nothing was queued (the session failed or the stream was reset first).
//
// When cancel fires first and part of payload is still queued, that part
// is copied so the caller's memory is free; the bytes are still sent (they
// were accepted, as a socket's send buffer accepts them). A frame already
// in a write is waited for: that write ends within the connection write
// timeout.
func (w *writer) sendRef(s *streamSend, h header, payload []byte, cancel <-chan struct{}) (queued bool, err error) {
	w.mu.Lock()
	if w.err != nil || s.dropped {
		err := w.err
		if err == nil {
			err = ErrStreamReset
		}
		w.mu.Unlock()
		return false, err
	}
	h, payload, err = w.inlineRefLocked(s, h, payload, cancel)
	if err != nil || len(payload) == 0 {
		w.mu.Unlock()
		return true, err
	}
	flushed := s.wait()
	w.sched.pushRef(s, h, payload)
	w.signal()
	for s.pendingRefs > 0 {
		boundBlocked, writerLooks := w.bound.blocked, w.sharedLook
		w.mu.Unlock()
		w.waker.beforeRefWait(boundBlocked, writerLooks)
		select {
		case <-flushed:
		case <-cancel:
			w.mu.Lock()
			w.sched.detach(s)
			w.mu.Unlock()
			cancel = nil
		}
		w.mu.Lock()
	}
	err = s.refErr
	s.refErr = nil
	w.mu.Unlock()
	return true, err
}

// sendSmall queues a small data frame of payload, copied, or writes it at
// once in the writer's stead, as send does, when nothing needs the
// stream's own locks: s is direct, its credit covers payload, and its
// queue has room. It takes the credit. ok is false when it did nothing,
// and the caller then takes Write's full path (which waits, and knows why
// a write fails); err is an inline write's failure, with the credit given
// back. This is the path of most small Writes: one lock pair, not three.
func (w *writer) sendSmall(s *streamSend, id uint32, payload []byte) (ok bool, err error) {
	n := uint32(len(payload))
	w.mu.Lock()
	defer w.mu.Unlock()
	if !s.direct || w.err != nil || s.window < n || !w.sched.hasRoom(s) {
		return false, nil
	}
	s.window -= n
	h := header{typ: typeData, streamID: id, length: n}
	if w.blockingWriteAllowed(s) {
		if done, err := w.inlineLocked(h, payload); done {
			if err != nil {
				s.window += n
			}
			return true, err
		}
	}
	w.sched.push(s, h, payload)
	w.sched.noteWrite(s, len(payload))
	w.signal()
	return true, nil
}

// takeCredit takes up to want bytes of s's credit and returns how many
// (0: none left). A Write that takes credit this way holds the stream's
// writeMu for the whole of its frames, so s stops being direct until the
// Write ends (setDirect): no small Write may queue between its frames.
func (w *writer) takeCredit(s *streamSend, want int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.direct = false
	n := min(want, int(s.window))
	s.window -= uint32(n)
	return n
}

// addCredit adds delta bytes of credit: a window update of the peer, or
// credit a Write took and did not use. It is false, adding nothing, when
// the window would pass 2^32-1 (from the peer: a protocol error).
func (w *writer) addCredit(s *streamSend, delta uint32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.window+delta < s.window {
		return false
	}
	s.window += delta
	return true
}

// setDirect says whether small Writes may go by sendSmall. A stream sets
// it with its mu held, to what its state allows: true only while its
// write side is open, its first frame's flags have gone, the protocol has
// flow control and no Write holds writeMu; false, before its mu is
// released, when the write side closes or resets. So a Write sees a
// CloseWrite or a reset that happened before it, as on the full path.
func (w *writer) setDirect(s *streamSend, direct bool) {
	w.mu.Lock()
	s.direct = direct && !s.dropped
	w.mu.Unlock()
}

// setWriteDeadline records s's stream's write deadline, t (zero for none),
// for blockingWriteAllowed.
func (w *writer) setWriteDeadline(s *streamSend, t time.Time) {
	var at int64
	if !t.IsZero() {
		at = t.UnixNano()
	}
	s.deadline.Store(at)
}

// blockingWriteAllowed tells whether a Write of s may make a conn write
// that blocks it, as far as its write deadline goes: write a small frame
// itself (inline.go), or hand the writer its frames by reference
// (sendRef), whose Write waits until the conn write that carries them
// ends. A peer that stopped reading holds a conn write until the write
// timeout ends the session, at most writeTimeout+writeTimeout/
// writeDeadlineSlack after the write began (beginConnWrite); a deadline
// sooner than that could pass meanwhile, so such a Write queues copies
// instead and returns by its deadline, as a net.Conn's Write does
// (TestWriteDeadlineWithStalledPeer, TestLargeWriteMeetsItsDeadline).
// It takes no lock: the deadline is atomic, writeTimeout fixed.
func (w *writer) blockingWriteAllowed(s *streamSend) bool {
	at := s.deadline.Load()
	if at == 0 {
		return true
	}
	longest := w.writeTimeout + w.writeTimeout/writeDeadlineSlack
	if longest < w.writeTimeout { // a timeout near math.MaxInt64 ("never")
		return false
	}
	return time.Until(time.Unix(0, at)) > longest
}

// drop discards what s has queued and the writer has not taken: its
// frames must not follow its RST (quic-go drops them too). A frame already
// in a write still goes out. A by-reference write waiting in sendRef
// returns ErrStreamReset, and so do later send and sendRef calls (a Write
// past its credit check when the reset came).
func (w *writer) drop(s *streamSend) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.dropped = true
	s.direct = false
	w.sched.drop(s)
}
