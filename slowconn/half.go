package slowconn

import (
	"io"
	"sync"
	"time"
)

// packet is a run of queued bytes that arrive at the same time. Consecutive
// packets with the same arrival time are merged into one.
type packet struct {
	size   int
	arrive time.Duration
}

// noWake is returned by half.take when nothing is scheduled to arrive.
const noWake time.Duration = -1

// half is one direction of a link: a bounded byte queue whose packets
// become readable at their computed arrival times. One writer and one
// reader use it at a time (the conns serialize their calls).
type half struct {
	epoch   time.Time // time zero of the scheduler's durations
	limit   int       // send-buffer bound in bytes
	payload int       // largest payload of one packet

	// readable holds a token when the reader should look again: the head
	// of an empty queue arrived, the FIN was queued or the writer failed.
	readable chan struct{}
	// writable holds a token when the writer should look again: room was
	// freed or the reader went away.
	writable chan struct{}

	mu     sync.Mutex // guards every field below
	sched  scheduler
	ring   []byte // queued bytes, ring[start:] then ring[:...]; grows up to limit
	start  int    // ring index of the first queued byte
	queued int    // bytes in ring
	held   int    // bytes counting against limit: queued plus taken but not released
	pkts   []packet
	head   int           // pkts[head:] are queued
	fin    bool          // the writer closed; EOF follows the queued bytes
	finAt  time.Duration // arrival time of the FIN
	gone   error         // non-nil once the reading side went away; writes fail with it
}

func newHalf(l Link, stream uint64) *half {
	return &half{
		epoch:    time.Now(),
		limit:    l.sendBuffer(),
		payload:  l.PayloadPerPacket(),
		readable: make(chan struct{}, 1),
		writable: make(chan struct{}, 1),
		sched:    newScheduler(l, stream),
	}
}

// signal leaves a token in a one-slot notify channel without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// now returns the current time on the scheduler's clock.
func (h *half) now() time.Duration { return time.Since(h.epoch) }

// write queues as much of p as the send buffer has room for and returns the
// number of bytes queued. When p does not fit whole, it queues only whole
// packets, so a Write split by a full buffer leaves as the same packets as
// an unsplit one. It fails once the reader is gone or the FIN is queued.
func (h *half) write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone != nil {
		return 0, h.gone
	}
	if h.fin {
		return 0, io.ErrClosedPipe
	}
	n := len(p)
	if free := h.limit - h.held; n > free {
		n = free - free%h.payload
	}
	if n <= 0 {
		return 0, nil
	}
	wasEmpty := h.head == len(h.pkts)
	h.put(p[:n])
	now := h.now()
	for off := 0; off < n; off += h.payload {
		size := min(h.payload, n-off)
		h.push(packet{size, h.sched.next(now, size)})
	}
	if wasEmpty {
		signal(h.readable)
	}
	return n, nil
}

// put copies p into the ring, growing it (up to limit) if needed.
func (h *half) put(p []byte) {
	if h.queued+len(p) > len(h.ring) {
		grown := make([]byte, min(h.limit, max(2*len(h.ring), h.queued+len(p))))
		h.copyOut(grown[:h.queued])
		h.ring, h.start = grown, 0
	}
	end := (h.start + h.queued) % len(h.ring)
	k := copy(h.ring[end:], p)
	copy(h.ring, p[k:])
	h.queued += len(p)
	h.held += len(p)
}

// copyOut copies the first len(p) queued bytes into p without dequeuing.
func (h *half) copyOut(p []byte) {
	k := copy(p, h.ring[h.start:min(len(h.ring), h.start+len(p))])
	copy(p[k:], h.ring)
}

// push appends pk to the packet queue, merging it into the last packet if
// both arrive at the same time.
func (h *half) push(pk packet) {
	if last := len(h.pkts) - 1; last >= h.head && h.pkts[last].arrive == pk.arrive {
		h.pkts[last].size += pk.size
		return
	}
	if h.head == len(h.pkts) {
		h.pkts, h.head = h.pkts[:0], 0
	} else if h.head >= compactAfter && 2*h.head >= len(h.pkts) {
		h.pkts = h.pkts[:copy(h.pkts, h.pkts[h.head:])]
		h.head = 0
	}
	h.pkts = append(h.pkts, pk)
}

// compactAfter is how many consumed packet records the queue tolerates at
// its front before it moves the live ones down; copying then costs no more
// than the appends that created the garbage.
const compactAfter = 1024

// take copies into p the bytes that have arrived by now and dequeues them.
// If release is set they also leave the send buffer at once; otherwise the
// caller must call release when it is done with them. With nothing due it
// returns how long to wait for the next arrival (noWake if none is
// scheduled), or io.EOF once every byte and the FIN have arrived.
func (h *half) take(p []byte, release bool) (n int, wait time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	for i := h.head; i < len(h.pkts) && n < len(p); i++ {
		pk := h.pkts[i]
		if pk.arrive > now {
			break
		}
		n += min(pk.size, len(p)-n)
	}
	if n > 0 {
		h.copyOut(p[:n])
		h.start = (h.start + n) % len(h.ring)
		h.queued -= n
		for left := n; left > 0; {
			pk := &h.pkts[h.head]
			k := min(pk.size, left)
			pk.size -= k
			left -= k
			if pk.size == 0 {
				h.head++
			}
		}
		if release {
			h.releaseLocked(n)
		}
		return n, 0, nil
	}
	switch {
	case h.head < len(h.pkts):
		return 0, h.pkts[h.head].arrive - now, nil
	case h.fin && h.finAt <= now:
		return 0, 0, io.EOF
	case h.fin:
		return 0, h.finAt - now, nil
	}
	return 0, noWake, nil
}

// release returns n taken bytes to the send buffer.
func (h *half) release(n int) {
	h.mu.Lock()
	h.releaseLocked(n)
	h.mu.Unlock()
}

func (h *half) releaseLocked(n int) {
	h.held -= n
	signal(h.writable)
}

// closeWrite queues the FIN behind the queued bytes, as a packet of
// overhead only, and returns how long until it arrives. A Write blocked on
// a full buffer wakes and fails, as a send blocked on a socket does when
// the socket is shut down for writing.
func (h *half) closeWrite() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if !h.fin {
		h.fin = true
		h.finAt = h.sched.next(now, 0)
		signal(h.readable)
		signal(h.writable)
	}
	return max(h.finAt-now, 0)
}

// closeRead records that nothing will read this direction again: queued
// bytes are dropped and the writer fails with err from now on.
func (h *half) closeRead(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone == nil {
		h.gone = err
	}
	h.start, h.queued, h.held = 0, 0, 0
	h.pkts, h.head = h.pkts[:0], 0
	signal(h.writable)
	signal(h.readable)
}
