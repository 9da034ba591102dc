package braid

import "time"

// A lone stream's large frames. While one stream alone has data queued, no
// other stream's frame waits behind its frames, only control frames and a
// stream that starts to send meanwhile: on a fast conn its by-reference
// frames may then carry more than a batch, as many bytes as the conn
// takes in loneFrameWait. Each frame is a system call on both ends, a
// header to read and a reader to wake; a 256 KiB message in one frame
// instead of four measured +16 to +29 % on loopback TCP and +9 % over TLS
// (notifications, paired runs). On a slow conn the frames stay at one
// batch, so what waits behind one waits no longer than it did.

const (
	// loneFrameWait is the longest a frame that comes while a lone
	// stream's frame is written should wait for it, beyond one batch:
	// 100 µs, a few wake-ups of a busy goroutine. At 5 GB/s (loopback)
	// that is 500 KB, at 1.25 GB/s (10 Gbit/s) 125 KB.
	loneFrameWait = 100 * time.Microsecond
	// maxLoneBatches bounds a lone stream's frame, in batches: 4 x 64 KiB
	// is a 256 KiB message, the largest of the notifications field
	// report, in one frame; the send window and the codec's frame bound
	// apply too.
	maxLoneBatches = 4
	// minRateSample is the least a write must carry to be timed: a small
	// one's time is mostly the system call's, not the conn's rate.
	minRateSample = 32 * 1024
	// rateWeight is the weight of a new sample in the average.
	rateWeight = 0.25
)

// writeRate is how fast the conn takes large writes: a moving average of
// the time per byte (so that one slow write counts for more than one fast
// one). Guarded by writer.mu: run and inline writes sample it.
type writeRate struct {
	nsPerByte float64 // 0 until a write was timed
}

// sample records a write of n bytes (at least minRateSample) that took d.
func (r *writeRate) sample(n int, d time.Duration) {
	v := float64(d) / float64(n)
	if r.nsPerByte == 0 {
		r.nsPerByte = v
		return
	}
	r.nsPerByte += rateWeight * (v - r.nsPerByte)
}

// loneFrame returns the payload a lone stream's frame may carry: what the
// conn takes in loneFrameWait, within one and maxLoneBatches batches
// (frameMax each) and the codec's frame bound (limit; 0 is none).
func (r *writeRate) loneFrame(frameMax, limit int) int {
	n := frameMax
	if r.nsPerByte > 0 {
		n = max(n, min(maxLoneBatches*frameMax, int(float64(loneFrameWait)/r.nsPerByte)))
	}
	if limit > 0 {
		n = min(n, limit)
	}
	return n
}
