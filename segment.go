package braid

import (
	"net"

	pool "github.com/libp2p/go-buffer-pool"
)

// Whole segments. The kernel cuts a TCP conn write into segments of the
// connection's MSS and sends what is left at the end as a shorter segment
// of its own. Over loopback (MTU 64 KiB, MSS 65483 with timestamps) a 64
// KiB frame is one full segment and one of 65 bytes, and each segment is
// a trip through the stack that wakes the reader; on the 2-core VMs braid
// is measured on, a raw TCP conn written 64 KiB at a time moves 1.7-2.3
// GB/s at GOMAXPROCS 2 and one written 65483 bytes at a time 7.3-8.7 GB/s
// (a 16 KiB or a 32 KiB remainder costs nearly as much: the count of
// segments matters, not their size).
//
// So on a TCP conn a large write sends whole segments: when its last
// partial segment lies within its last by-reference payload, that part is
// copied and kept (segmentTail), and goes first in the conn's next write,
// whoever makes it (run's next batch, the next inline write, small or
// large), or alone when run finds nothing else to write before it parks
// (waitLocked), as the partial record of a conn without writev does
// (writeFlat). A kept part is a frame's last bytes, never a frame of its
// own: nothing small waits behind it, it waits for nothing but a write
// already due. A write that ends with a marker is written whole: the
// marker's pong frees the in-flight budget, and kept it would wait too.
//
// Between the frames of one inline Write the tail is always kept (the same
// goroutine writes next). At the end of an inline Write it is kept only
// with more than one P, and run is woken to write it if no write comes
// first: run then runs beside the caller, while at one P it would wait
// for the caller to block (and there the two ends take turns, so the
// kernel's queue merges the short segment anyway: no gain measured).
//
// The kept bytes belong to whoever holds the conn: run while writing is
// set, an inline writer while inline is set (handed over under
// writer.mu, see inline.go). They live in a pooled buffer given back once
// written, so an idle session holds none.

// segmentTail is the part of a write kept back to complete the next
// write's first segment.
type segmentTail struct {
	size int    // the conn's MSS when the session started; 0: nothing is kept
	buf  []byte // the kept bytes, at most size-1; nil when none
}

// newSegmentTail returns the segment state of conn: on a TCP conn whose
// MSS can be read, whole segments; otherwise never a kept byte.
func newSegmentTail(conn net.Conn) segmentTail {
	return segmentTail{size: tcpSegmentSize(conn)}
}

// cut returns how many bytes at the end of a write of total bytes to keep
// back, so that it sends whole segments: its last partial segment, if the
// write is more than a segment and that part lies within its last buffer,
// of last bytes (a by-reference payload). 0 means write it all.
func (t *segmentTail) cut(total, last int) int {
	if t.size == 0 || total <= t.size {
		return 0
	}
	if k := total % t.size; k <= last {
		return k
	}
	return 0
}

// written is called by the conn's holder after a write that began with
// the kept bytes, if any: it keeps p (a copy; p is at most a segment) for
// the next write, or with p empty gives the buffer back.
func (t *segmentTail) written(p []byte) {
	if len(p) == 0 {
		if t.buf != nil {
			pool.Put(t.buf[:cap(t.buf)])
			t.buf = nil
		}
		return
	}
	if t.buf == nil {
		t.buf = pool.Get(t.size)[:0]
	}
	t.buf = append(t.buf[:0], p...)
}

// prepend puts the kept bytes, if any, first in vec.
func (t *segmentTail) prepend(vec net.Buffers) net.Buffers {
	if len(t.buf) > 0 {
		vec = append(vec, t.buf)
	}
	return vec
}

// buffersLen is the bytes of vec.
func buffersLen(vec net.Buffers) int {
	n := 0
	for _, b := range vec {
		n += len(b)
	}
	return n
}
