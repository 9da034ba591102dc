package braid

import (
	"os"

	pool "github.com/libp2p/go-buffer-pool"
)

// Per-stream send queues. Each stream queues its frames in its own
// sendQueue; the writer serves the streams with queued frames round-robin,
// a quantum from each in turn, so one stream's burst can't take a whole
// batch while others wait (docs/design.md, "The writer", rule 5). Nothing here
// blocks the writer: a stream waits only for its own queue.

const (
	// minStreamQueue is the least a stream may have queued (copied) before
	// its writes wait for the writer. With few busy streams a stream may
	// queue up to two batches; with many, two equal shares of one, but
	// never less than this: small writes must still coalesce.
	minStreamQueue = 4 * 1024
	// queueBufStart is the size of a stream queue's first pooled buffer.
	queueBufStart = 1024
)

// sendQueue is one stream's frames waiting for the writer, in order:
// copied frames (header and payload) first, then at most one frame by
// reference (Write queues it and waits, so nothing of the stream follows
// it). A stream holds a sendQueue exactly while it is in writer.ring.
// Guarded by writer.mu.
type sendQueue struct {
	buf     []byte   // copied frames; buf[head:] not taken yet; from the pool
	ends    []uint32 // end offset in buf of each frame; ends[endHead:] not taken
	head    int
	endHead int
	ref     pendingRef // valid while hasRef
	hasRef  bool
	deficit int  // deficit round robin credit, in bytes
	waiting bool // the stream waits for the queue to shrink
}

// pending returns the copied bytes not taken yet.
func (q *sendQueue) pending() int { return len(q.buf) - q.head }

// empty reports whether nothing is queued.
func (q *sendQueue) empty() bool { return q.pending() == 0 && !q.hasRef }

// push appends one copied frame: the codec's header for h, then payload.
func (q *sendQueue) push(c codec, h header, payload []byte) {
	q.grow(headerSize + len(payload))
	q.buf = c.appendHeader(q.buf, h)
	q.buf = append(q.buf, payload...)
	q.ends = append(q.ends, uint32(len(q.buf)))
}

// pushEncoded appends one copied frame whose header is already encoded.
func (q *sendQueue) pushEncoded(hdr, payload []byte) {
	q.grow(len(hdr) + len(payload))
	q.buf = append(append(q.buf, hdr...), payload...)
	q.ends = append(q.ends, uint32(len(q.buf)))
}

// grow makes room for n more bytes, moving buf to a larger pooled buffer.
func (q *sendQueue) grow(n int) {
	need := len(q.buf) + n
	if need <= cap(q.buf) {
		return
	}
	nb := pool.Get(max(need, 2*cap(q.buf), queueBufStart))[:len(q.buf)]
	copy(nb, q.buf)
	if q.buf != nil {
		pool.Put(q.buf[:cap(q.buf)])
	}
	q.buf = nb
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
// takes it a frame of at most one batch at a time (takeRef), so that a
// large Write waits once, not once per frame.
type pendingRef struct {
	h    header // the next frame's header; its length is set per frame
	rest []byte // the caller's bytes not yet taken
}

// maxKeptEnds bounds the frame-offset slice an idle stream keeps.
const maxKeptEnds = 16

// streamLimit is how many copied bytes one stream may have queued: two
// equal shares of a batch, so that a stream of small writes has its share
// ready for this batch and the next while it waits to run again. mu held.
func (w *writer) streamLimit() int {
	return max(minStreamQueue, 2*w.maxBatch/max(1, len(w.ring)))
}

// maxFreeQueues bounds the send queues a session keeps for reuse.
const maxFreeQueues = 64

// queueOf gives s a send queue and a place in the ring if it has none:
// streams hold one only while they have frames queued, so an idle stream
// costs a pointer. The caller queues a frame before it lets go of mu. mu
// held.
func (w *writer) queueOf(s *Stream) {
	if s.sq != nil {
		return
	}
	if n := len(w.freeQueues); n > 0 {
		s.sq = w.freeQueues[n-1]
		w.freeQueues[n-1] = nil
		w.freeQueues = w.freeQueues[:n-1]
	} else {
		s.sq = new(sendQueue)
	}
	w.ring = append(w.ring, s)
}

// freeQueue takes the empty send queue from s, which leaves the ring (the
// caller drops it from w.ring). mu held.
func (w *writer) freeQueue(s *Stream) {
	q := s.sq
	s.sq = nil
	*q = sendQueue{ends: q.ends[:0]}
	if len(w.freeQueues) < maxFreeQueues {
		w.freeQueues = append(w.freeQueues, q)
	}
}

// queueData queues a stream frame with its payload copied, in order with the
// stream's other frames. It waits while the stream has its share queued.
func (w *writer) queueData(s *Stream, h header, payload []byte, cancel <-chan struct{}) error {
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
		w.queueOf(s)
		if s.sq.pending() < w.streamLimit() {
			break
		}
		s.sq.waiting = true
		if s.flushed == nil {
			s.flushed = make(chan struct{}, 1)
		}
		w.mu.Unlock()
		select {
		case <-s.flushed:
		case <-cancel:
			w.mu.Lock()
			if s.sq != nil {
				s.sq.waiting = false
			}
			w.mu.Unlock()
			return os.ErrDeadlineExceeded
		case <-w.done:
		}
		w.mu.Lock()
	}
	s.sq.push(w.codec, h, payload)
	w.queued += headerSize + len(payload)
	w.signal()
	w.mu.Unlock()
	return nil
}

// queueRef queues the data frames of payload, which stays the caller's
// memory: the writer takes it a frame at a time. The stream must then call
// awaitRefs before it touches or returns it. h is the first frame's header.
func (w *writer) queueRef(s *Stream, h header, payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if s.dropped {
		return ErrStreamReset
	}
	if s.flushed == nil {
		s.flushed = make(chan struct{}, 1)
	}
	w.queueOf(s)
	s.sq.ref, s.sq.hasRef = pendingRef{h: h, rest: payload}, true
	s.pendingRefs++
	w.signal()
	return nil
}

// awaitRefs waits until the writer is done with s's by-reference frame.
// When cancel fires first and the frame is still queued, its payload is
// copied so the caller's memory is free; the bytes are still sent (they
// were accepted, as a socket's send buffer accepts them). A frame already
// in a write is waited for: that write ends within the connection write
// timeout.
func (w *writer) awaitRefs(s *Stream, cancel <-chan struct{}) error {
	for {
		w.mu.Lock()
		if s.pendingRefs == 0 {
			err := s.refErr
			s.refErr = nil
			w.mu.Unlock()
			return err
		}
		w.mu.Unlock()
		select {
		case <-s.flushed:
		case <-cancel:
			w.detach(s)
			cancel = nil
		}
	}
}

// detach turns what the writer has not taken of s's by-reference write
// into copied frames of at most one batch each.
func (w *writer) detach(s *Stream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.sq == nil || !s.sq.hasRef {
		return
	}
	r := &s.sq.ref
	for len(r.rest) > 0 {
		n := min(len(r.rest), w.frameMax())
		h := r.h
		h.length = uint32(n)
		hdr, hn := w.codec.encodeData(h)
		s.sq.pushEncoded(hdr[:hn], r.rest[:n])
		w.queued += hn + n
		r.rest = r.rest[n:]
		r.h.flags = 0
	}
	s.sq.ref, s.sq.hasRef = pendingRef{}, false
	s.pendingRefs--
}

// frameMax is the largest data frame payload the writer makes of a
// by-reference write: one batch, within the codec's bound.
func (w *writer) frameMax() int {
	if m := w.codec.caps().maxDataFrame; m > 0 {
		return min(w.maxBatch, m)
	}
	return w.maxBatch
}

// takeRef takes the next frame of q's by-reference write, of n payload
// bytes, into w.inflight. mu held.
func (w *writer) takeRef(s *Stream, n int) {
	q := s.sq
	h := q.ref.h
	h.length = uint32(n)
	hdr, hn := w.codec.encodeData(h)
	w.inflight = append(w.inflight, refFrame{hdr: hdr, hdrLen: uint8(hn), payload: q.ref.rest[:n], owner: s})
	s.pendingRefs++ // this frame; the write's own count goes once it is all taken
	q.ref.rest = q.ref.rest[n:]
	q.ref.h.flags = 0 // flags (an ACK) ride on the first frame only
	if len(q.ref.rest) == 0 {
		q.ref, q.hasRef = pendingRef{}, false
		s.pendingRefs--
	}
}

// takeBatch moves queued stream frames into the batch by deficit round
// robin: a pass gives every stream in the ring a quantum (an equal share of
// the batch) of credit, and a stream sends frames while its credit covers
// them, so that over a few batches every busy stream sends the same bytes
// whatever its write sizes; a stream whose queue empties loses its credit.
// One pass per batch, more only while nobody could send yet (large frames
// wait for credit), so that a large frame waits for its share instead of
// filling the batch. Streams not reached go first next time.
// Copied frames are appended to data (their ends to ends); by-reference
// frames go to w.inflight, at most one beyond the batch bound. size is what
// the batch holds already; limit (at most the batch bound) is where it
// stops, lower while the in-flight bound holds data back, and refLimit
// (at most limit) where by-reference frames stop: small copied frames get
// a little more room than bulk (copySlack). mu held.
func (w *writer) takeBatch(data []byte, ends []int, size, refLimit, limit int) ([]byte, []int, int) {
	for len(w.ring) > 0 && size < limit {
		quantum := max(w.maxBatch/len(w.ring), 1)
		progress, short := false, false
		served := 0
		for _, s := range w.ring {
			if size >= limit {
				break
			}
			served++
			q := s.sq
			q.deficit += quantum
			for q.endHead < len(q.ends) {
				end := int(q.ends[q.endHead])
				n := end - q.head
				if n > q.deficit {
					short = true
					break
				}
				if size > 0 && size+n > limit {
					break
				}
				data = append(data, q.buf[q.head:end]...)
				ends = append(ends, len(data))
				q.head, q.endHead = end, q.endHead+1
				q.deficit -= n
				size += n
				w.queued -= n
				progress = true
			}
			for q.endHead == len(q.ends) && q.hasRef {
				p := min(len(q.ref.rest), w.frameMax())
				n := headerSize + p
				if n > q.deficit {
					short = true
					break
				}
				if !(len(w.inflight) == 0 && size < refLimit || size+n <= refLimit) {
					break
				}
				w.takeRef(s, p)
				q.deficit -= n
				size += n
				progress = true
			}
			if q.empty() {
				q.deficit = 0
			}
			q.release()
			if q.waiting && q.pending() < w.streamLimit() {
				q.waiting = false
				notifyFlushed(s)
			}
		}
		// Streams not reached keep their turn; served ones go behind
		// them, and empty ones leave the ring.
		next := w.ringSpare[:0]
		next = append(next, w.ring[served:]...)
		for _, s := range w.ring[:served] {
			if s.sq.empty() && !s.sq.waiting {
				w.freeQueue(s)
			} else {
				next = append(next, s)
			}
		}
		clear(w.ring)
		w.ring, w.ringSpare = next, w.ring[:0]
		if progress || !short {
			break // one pass taken, or what is left doesn't fit
		}
	}
	return data, ends, size
}

// drop discards what s has queued and the writer has not taken: its
// frames must not follow its RST (quic-go drops them too). A frame already
// in a write still goes out. A by-reference write waiting in awaitRefs
// returns ErrStreamReset, and so do later queueData and queueRef calls (a
// Write past its credit check when the reset came).
func (w *writer) drop(s *Stream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s.dropped = true
	q := s.sq
	if q == nil {
		return
	}
	w.queued -= q.pending()
	q.head, q.endHead = len(q.buf), len(q.ends)
	q.release()
	if q.hasRef {
		q.ref, q.hasRef = pendingRef{}, false
		s.pendingRefs--
		if s.refErr == nil {
			s.refErr = ErrStreamReset
		}
	}
	notifyFlushed(s)
}

// notifyFlushed wakes s's writer if it waits. mu held.
func notifyFlushed(s *Stream) {
	select {
	case s.flushed <- struct{}{}:
	default:
	}
}

// failQueuesLocked releases every stream waiting on its queue with w.err
// and empties the ring. mu held.
func (w *writer) failQueuesLocked() {
	for _, s := range w.ring {
		q := s.sq
		if q.hasRef {
			q.ref, q.hasRef = pendingRef{}, false
			s.pendingRefs--
			if s.refErr == nil {
				s.refErr = w.err
			}
		}
		q.head = len(q.buf)
		q.endHead = len(q.ends)
		q.release()
		q.waiting = false
		w.freeQueue(s)
		notifyFlushed(s)
	}
	clear(w.ring)
	w.ring = nil
	w.queued = 0
}
