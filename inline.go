package braid

import (
	"sync/atomic"

	pool "github.com/libp2p/go-buffer-pool"
)

// Inline writes. A small frame written when the writer is parked, nothing
// is queued and the session received a frame since its last write (a
// request-response exchange: a ping's pong, an RPC's reply) is written by
// the stream's own goroutine, in the writer's stead: waking the writer
// would cost a goroutine hand-off per message on both ends, the most of an
// idle round trip at GOMAXPROCS 2. Frames that come meanwhile queue, and
// the writer writes them, coalesced, once the inline write is done; a
// burst of writes with nothing received between them (100 streams of
// small messages) has only its first frame inline, so coalescing is kept
// where it acts. Large (by-reference) writes always go to the writer.
//
// While inline is set, the writer does not write (waitLocked parks it), so
// the conn has one writer at a time; the inline writer wakes it at the end
// if anything was queued meanwhile.

// maxHeaderLen bounds what codec.appendHeader writes for one frame: mplex's
// NewStream with its name and a Close, four uvarints of at most 10 bytes
// and a 20-digit name.
const maxHeaderLen = 64

// inlineLocked writes the frame h (data, or a window update with FIN) with
// payload (at most refThreshold bytes) to the conn at once if the rules above allow, and reports whether
// it did; err is the write's. mu held on entry and on return; released
// during the write.
func (w *writer) inlineLocked(h header, payload []byte) (done bool, err error) {
	if !w.idle || w.inline || !w.coalesce || w.delay > 0 || w.draining || w.err != nil ||
		len(w.ctrl) > 0 || w.sched.busy() || w.received == nil || w.received.Load() == w.receivedAtWrite {
		return false, nil
	}
	w.inline = true
	seen := w.received.Load() // a frame read during the write is one after it
	w.mu.Unlock()
	buf := pool.Get(maxHeaderLen + len(payload))
	frame := append(w.codec.appendHeader(buf[:0], h), payload...)
	err = w.write(frame)
	pool.Put(buf)
	w.stats.frames.Add(1)
	w.stats.inline.Add(1)
	w.mu.Lock()
	w.inline = false
	w.receivedAtWrite = seen
	if err != nil && w.err == nil {
		w.err = err
		_ = w.conn.Close() // wake the read loop: the session ends with this error
	}
	if len(w.ctrl) > 0 || w.sched.busy() || w.draining || w.err != nil {
		w.signal() // what came meanwhile, or the end
	}
	return true, err
}

// inlineState is the writer's inline-write state, guarded by writer.mu
// but received, which is the session's own counter.
type inlineState struct {
	inline          bool           // a stream's goroutine is writing to the conn (inlineLocked)
	received        *atomic.Uint64 // the session's frames received; nil: no inline writes
	receivedAtWrite uint64         // received when the last write started
}
