package braid

import (
	"net"
	"sync/atomic"

	pool "github.com/libp2p/go-buffer-pool"
)

// Inline writes. A small frame written when the writer has nothing to
// write (writing is false: no batch in progress, no partial record kept),
// nothing is queued and the session received a frame since its last write
// (a request-response exchange: a ping's pong, an RPC's reply) is written
// by the stream's own goroutine, in the writer's stead: waking the writer
// would cost a goroutine hand-off per message on both ends, the most of an
// idle round trip at GOMAXPROCS 2. Frames that come meanwhile queue, and
// the writer writes them, coalesced, once the inline write is done; a
// burst of writes with nothing received between them (100 streams of
// small messages) has only its first frame inline, so coalescing is kept
// where it acts. A stream whose write deadline is sooner than the longest
// a conn write may block (the write timeout) writes nothing inline
// (blockingWriteAllowed): a peer that stopped reading could hold the write
// past the deadline. Large (by-reference) writes have rules of
// their own (inlineRefLocked, below).
//
// While inline is set, the writer does not write (waitLocked parks it), so
// the conn has one writer at a time; the inline writer wakes it at the end
// if anything was queued meanwhile. The writer's writing flag covers the
// partial record a conn without writev keeps between batches (writeFlat):
// it belongs before anything written next, so no inline write starts
// while it waits. The partial segment a TCP conn keeps (segment.go) stops
// none: an inline write, small or large, writes it first.

// maxHeaderLen bounds what codec.appendHeader writes for one frame: mplex's
// NewStream with its name and a Close, four uvarints of at most 10 bytes
// and a 20-digit name.
const maxHeaderLen = 64

// inlineLocked writes the frame h (data, or a window update with FIN) with
// payload (at most refThreshold bytes) to the conn at once if the rules
// above allow, and reports whether it did; err is the write's. mu held on
// entry and on return; released during the write.
func (w *writer) inlineLocked(h header, payload []byte) (done bool, err error) {
	if !w.connFreeLocked() || w.received.Load() == w.receivedAtWrite {
		return false, nil
	}
	w.sched.noteCopied(h.streamID) // a copied frame, as push counts one: the lone budgets' quiet (loneScale)
	seen := w.beginInlineLocked()
	buf := pool.Get(maxHeaderLen + len(payload))
	frame := append(w.codec.appendHeader(buf[:0], h), payload...)
	if len(w.seg.buf) > 0 {
		w.inlineVec = append(w.seg.prepend(w.inlineVec[:0]), frame)
		err = w.writeVecInto(&w.inlineBufs, w.inlineVec)
		clear(w.inlineVec)
		w.inlineVec = w.inlineVec[:0]
		w.seg.written(nil)
	} else {
		err = w.write(frame)
	}
	pool.Put(buf)
	w.endInlineLocked(seen, 1, err)
	return true, err
}

// connFreeLocked tells whether a stream's goroutine may take the conn for
// an inline write, small or by reference: inline writes are on (received
// set, coalescing on with no delay), the writer has nothing to write and
// nothing is queued for it, no other inline write runs, and the writer is
// neither draining nor failed. mu held.
func (w *writer) connFreeLocked() bool {
	return w.received != nil && w.coalesce && w.delay == 0 && !w.writing && !w.inline &&
		!w.draining && w.err == nil && len(w.ctrl) == 0 && !w.sched.busy()
}

// beginInlineLocked takes the conn for an inline write and releases mu; it
// returns the frames received so far (a frame read during the write is
// one after it). mu held on entry, not on return.
func (w *writer) beginInlineLocked() (seen uint64) {
	w.inline = true
	seen = w.received.Load()
	w.mu.Unlock()
	return seen
}

// endInlineLocked takes mu back after an inline write of frames that ended
// with err: it counts them, gives the conn back, makes a write error the
// writer's (closing the conn, which wakes the read loop: the session ends
// with it) and wakes the writer for what came meanwhile, or the end. mu
// not held on entry, held on return.
func (w *writer) endInlineLocked(seen uint64, frames int, err error) {
	w.stats.frames.Add(uint64(frames))
	w.stats.inline.Add(1)
	w.mu.Lock()
	w.inline = false
	w.receivedAtWrite = seen
	if err != nil && w.err == nil {
		w.err = err
		breakConn(w.conn)
	}
	if len(w.ctrl) > 0 || w.sched.busy() || w.draining || w.err != nil {
		w.signal()
	}
}

// inlineState is the writer's inline-write state, guarded by writer.mu
// but received, which is the session's own counter.
type inlineState struct {
	inline          bool           // a stream's goroutine is writing to the conn (inlineLocked)
	received        *atomic.Uint64 // the session's frames received; nil: no inline writes
	receivedAtWrite uint64         // received when the last write started
	// The inline by-reference write's buffers, fields so that nothing
	// allocates per frame; used only by the goroutine that set inline.
	inlineVec    net.Buffers      // the frame's vector: header, payload, marker
	inlineHdr    [headerSize]byte // the frame's header
	inlineMarker [headerSize]byte // the marker ping after it, when one is due
	inlineBufs   net.Buffers      // what writeVecInto consumes of inlineVec
}

// Inline by-reference writes. A large write made while the writer has
// nothing to write and nothing else is queued writes its frames from the
// caller's memory on the caller's goroutine, one frame per conn write, as
// long as that stays so: a stream that sends alone (a file, a
// notification stream) then pays what one raw conn write pays, with no
// hand-off to the writer and back per Write. Once anything else queues
// (another stream's frame, a window update, a pong), the rest of the
// write goes to the writer, which serves it in turn with the others; so a
// small frame waits behind at most the frame being written, as it would
// behind the writer's.
// Only on conns with writev: a frame is then one system call whatever its
// size (without it, a frame's header and its last partial record would be
// records, and system calls, of their own).
// Measured in paired runs over TCP (on top of the vector reads):
// notifications of 64 KiB x1.06 (7 of 8) at GOMAXPROCS 1 and x1.03 (7 of
// 8) at 2, 256 KiB x1.07 and x0.99, one-stream bulk x1.07 and x1.00, the
// ping beside bulk unchanged; the idle ping's p50 at GOMAXPROCS 2 x0.83
// (the writing flag lets a small frame go inline between batches, not
// only once the writer parked).

// inlineRefLocked writes frames of payload (h is the first one's header)
// while the rules above allow and returns what is left of it, with the
// header its next frame takes; err is a write's, or ErrStreamReset when
// the stream was reset meanwhile. mu held on entry and on return; released
// during each write.
func (w *writer) inlineRefLocked(s *streamSend, h header, payload []byte, cancel <-chan struct{}) (header, []byte, error) {
	kept := false // the last inline write kept a partial segment back (segment.go)
	defer func() {
		if kept {
			w.signal() // run writes it, if no write comes first
		}
	}()
	for len(payload) > 0 && w.inlineRefAllowedLocked(cancel) {
		w.refreshLoneFrameLocked()
		n := w.sched.refFrameLen(h.streamID, len(payload))
		w.sizeBudgetLocked(true)
		room := w.bound.refRoom()
		if room == 0 {
			break // the writer waits for the marker's pong
		}
		fh := h
		fh.length = uint32(n)
		var hn int
		w.inlineHdr, hn = w.codec.encodeData(fh)
		frames := 1
		vec := append(w.seg.prepend(w.inlineVec[:0]), w.inlineHdr[:hn], payload[:n])
		size := len(w.seg.buf) + hn + n
		var keep []byte
		if w.bound.took(hn + n) {
			vec = append(vec, w.codec.appendHeader(w.inlineMarker[:0], header{typ: typePing, flags: flagSYN, length: w.bound.mark()}))
			size += len(vec[len(vec)-1])
			frames++ // and written whole (segment.go)
		} else if len(payload) > n || w.parallel {
			if k := w.seg.cut(size, n); k > 0 {
				keep = payload[n-k : n]
				vec[len(vec)-1] = payload[:n-k]
				size -= k
			}
		}
		seen := w.beginInlineLocked()
		took, err := timedWrite(size, func() error { return w.writeVecInto(&w.inlineBufs, vec) })
		if err != nil {
			keep = nil
		}
		w.seg.written(keep)
		kept = len(keep) > 0
		w.endInlineLocked(seen, frames, err)
		if took > 0 {
			w.rate.sample(size, took)
		}
		w.inlineVec = vec[:0]
		clear(vec)
		if err != nil {
			return h, payload, err
		}
		payload = payload[n:]
		h.flags = 0 // flags (an ACK) ride on the first frame only
		if s.dropped && len(payload) > 0 {
			return h, payload, ErrStreamReset
		}
	}
	return h, payload, nil
}

// inlineRefAllowedLocked tells whether a by-reference frame may be written
// inline now: see above. mu held.
func (w *writer) inlineRefAllowedLocked(cancel <-chan struct{}) bool {
	if !w.writev || !w.connFreeLocked() {
		return false
	}
	select {
	case <-cancel:
		return false // the write deadline passed: sendRef copies the rest
	default:
		return true
	}
}
