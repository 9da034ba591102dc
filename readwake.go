package braid

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
)

// Waking the read loop out of the network poller (readWaker).
//
// On a conn without writev (TLS, noise) with more than one P, a read loop
// that waits in a conn read is parked in Go's network poller, and the
// scheduler polls the network only once a P runs out of work (or from
// sysmon, after 10 ms). While both Ps run bulk traffic that is tens of
// microseconds after the bytes came: a probe of the 64 B ping beside one
// bulk stream over TLS at GOMAXPROCS 2 (session 27) had the reply on the
// client's socket 22-119 µs before the client's read loop returned from
// its read. So a goroutine of braid's that is about to park while a Read
// waits for data looks at the socket under the conn, and if bytes wait
// there and the read loop is parked in its read, cuts that read (the
// lend's cut, lend.go): the runtime makes the read loop runnable on this
// goroutine's P, which runs it next, as this goroutine parks. The read
// loop takes the cut's timeout as nothing (readBuffer.connRead) and reads
// what waits.
//
// Only where it paid (session 27, alternating runs against the code
// without it, TLS, GOMAXPROCS 2, 5-6 rounds; docs/measurements.md):
//
//   - Not while the writer waits for the in-flight budget (inflight.go):
//     then the bytes waiting are mostly the pongs that free it, and
//     reading them sooner kept the budget full and the ping behind more
//     bytes (beside 10 bulk streams, woken at every park: the ping's mean
//     x1.39; with this rule x1.007, bulk x0.997).
//   - Not without a Read that waits: only a Read's data is worth a
//     wake-up; pongs and window updates can wait for the poller.
//   - Not on a conn with writev (TCP): there the read loop rarely waits
//     long, and the wake-ups cost the bulk beside a ping 17 % (x0.831,
//     0 of 5 rounds above) for a p50 x1.04.
//   - Not at one P (not measured): there the two ends take turns on the
//     P, which runs out of work, and polls the network, at every turn.
//
// Paired runs of the built change against the code without it
// (benchpairs, TLS, GOMAXPROCS 2): the ping beside one bulk stream p50
// x0.554, mean x0.642, p99 x0.712, bulk x1.002 (6 pairs); a request every
// 10 ms beside a transfer (BenchmarkPingPongAfterQuiet) p50 x0.599, mean
// x0.751, the transfer x1.040 (6 pairs); beside 10 bulk streams p50
// x1.004, mean x0.991, bulk x1.007 (10 pairs); one-stream bulk x0.987 (4
// of 8 pairs above), notifications x1.031 and x1.002, the idle ping p50
// x1.006.
//
// A look at the socket is one ioctl (FIONREAD); a goroutine that finds
// another looking goes on without (TryLock).
//
// The writer's look after a bulk batch (afterBulkBatch). Parks are rare
// where it matters most: beside 10 bulk streams over TLS at two P the
// writer goes from one batch to the next, and a 64 B reply waited 67.6 µs
// (median; 15.1 at the 10th percentile, 133.8 at the 90th) from the
// peer's write of it to the read loop made runnable, by a trace of
// session 34: half the ping's round trip, and none of it behind bulk
// bytes (the bulk went the other way). So the writer also looks after
// each batch that carried by-reference frames, when nothing small is
// queued behind it, and where a Read waits and the read loop is parked,
// cuts the read loop's read and yields to it when more bytes wait than a
// record of control frames holds (controlRecordBytes): a reply is likely
// among them. Pongs and window updates alone wait for the poller, as at
// a park while the budget binds (reading them sooner keeps the budget
// fuller and the next request behind more bytes). The yield puts the
// writer behind the read loop, which the cut made runnable on this P;
// only with nothing small queued, so that no frame waits for the writer's
// turn to come back.
// Measured (session 34, paired runs, TLS, GOMAXPROCS 2, the budget of
// sharedDecryptInflight with the look against without it): the ping
// beside 10 bulk streams p50 x0.735, bulk x0.948 (10 pairs); looking at
// every batch, pongs included, p50 x0.82, bulk x0.93 (8 pairs); the
// reply's wait for the read loop 26 against 73 µs (median). (Those runs
// looked at most every 10 µs and above 90 bytes; every batch and 46
// bytes measured the same against them, 8 pairs each.) The look is
// paired with a larger budget there (sharedLookInflight, inflight.go),
// which turns the reply's time into bulk.
//
// Not at a Write's wait for its by-reference frame while the writer looks
// after the bulk batches of several streams (writer.sharedLook; session
// 38). There the writer's batches are short (sharedLookBatch) and it
// looks after each, so a reply is read within a batch either way, and
// ten bulk Writes each looking as they waited added about 1.7 looks (an
// ioctl each, ~3 µs under the PVM hypervisor) to every round trip of the
// ping beside them (perf stat: 24,087 against 15,503 ioctls over 5,000
// round trips), with cuts that made the read loop runnable on a bulk
// writer's P. Paired runs (TLS, GOMAXPROCS 2, against every Write
// looking): the ping beside 10 bulk streams p50 x0.894 (0 of 10 pairs
// above), mean x0.915, p99 x0.899, bulk x1.031 (10 of 10 above); at
// random moments beside them (BenchmarkPingPongSpaced) p50 x1.000, p99
// x1.062, bulk x1.000 (8 pairs); now and then (Sparse) p50 x1.044,
// mean x0.936 (6 pairs); beside one bulk stream, where the rule leaves
// the look, p50 x1.006, bulk x1.001 (10 pairs); the built change against
// the code before it, in a slower hour, beside 10: p50 x0.912 (2 of 10
// above), bulk x1.001. No Write looking at all cost that one: p50
// x1.209, bulk x0.974 (7 and 2 of 8 pairs above): its full 64 KiB batches
// leave the writer's looks far apart.

// readWaker wakes the read loop out of the poller; nil where it does not
// apply (see the top of the file). Its methods are safe for concurrent
// use and do nothing on nil.
type readWaker struct {
	peek    *socketPeek  // the socket under the conn
	cutter  *readCutter  // cuts the read loop's read
	parked  atomic.Bool  // the read loop waits in a conn read: the read loop stores it through readBuffer.parked
	readers atomic.Int32 // Reads waiting for data
	mu      sync.Mutex   // one look at the socket at a time; guards peek
}

// newReadWaker returns the waker of a session over conn, or nil: only on
// a conn without writev, at more than one P, whose reads can be cut
// (cutter) and whose TCP socket is reached.
func newReadWaker(conn net.Conn, cutter *readCutter, writev, parallel bool) *readWaker {
	if cutter == nil || writev || !parallel {
		return nil
	}
	peek := socketUnder(conn).peeker()
	if peek == nil {
		return nil
	}
	return &readWaker{peek: peek, cutter: cutter}
}

// readerWaits and readerDone bracket a Read's wait for data.
func (r *readWaker) readerWaits() {
	if r != nil {
		r.readers.Add(1)
	}
}

func (r *readWaker) readerDone() {
	if r != nil {
		r.readers.Add(-1)
	}
}

// beforePark is called by a goroutine of braid's about to park (the
// writer waiting for work, a Write waiting for its by-reference frame
// through beforeRefWait),
// with no lock held; boundBlocked tells that the writer waits for the
// in-flight budget. It cuts the read loop's read when a Read waits, the
// read loop is parked in its read, and bytes wait on the socket.
func (r *readWaker) beforePark(boundBlocked bool) {
	if !boundBlocked {
		r.cutIfMoreThan(0) // the read loop runs as this goroutine parks
	}
}

// beforeRefWait is beforePark for a Write about to wait for its
// by-reference frame; writerLooks tells that several streams send by
// reference and the writer looks after each of their batches
// (writer.sharedLook): then the Write does not look (see the top of the
// file).
func (r *readWaker) beforeRefWait(boundBlocked, writerLooks bool) {
	if !writerLooks {
		r.beforePark(boundBlocked)
	}
}

// cutIfMoreThan is the waker's one look, for beforePark and
// afterBulkBatch: when a Read waits, the read loop is parked in its read
// and more than n bytes wait on the socket, it cuts the read loop's read
// (the runtime makes the read loop runnable on this goroutine's P) and
// reports true. One goroutine looks at a time; one that finds another
// looking goes on without (TryLock). Safe on nil.
func (r *readWaker) cutIfMoreThan(n int) bool {
	if r == nil || r.readers.Load() == 0 || !r.parked.Load() {
		return false
	}
	if !r.mu.TryLock() {
		return false // another goroutine is looking
	}
	queued := r.peek.bytesQueued()
	r.mu.Unlock()
	if queued <= n {
		return false
	}
	r.cutter.cut()
	return true
}

// controlRecordBytes is the most bytes a record of control frames holds
// in the common case: a pong and a window update (two headers) in a TLS
// 1.3 record (tlsRecordOverhead). More bytes waiting on the socket than
// this likely hold stream data (a 64 B message is a 98-byte record);
// fewer are a pong or an update the read loop can read when the poller
// wakes it. Paired runs with 90 measured the same (session 34).
const controlRecordBytes = tlsRecordOverhead + 2*headerSize

// tlsRecordOverhead is what a TLS 1.3 record adds to its plaintext: a
// 5-byte header, the inner content type and a 16-byte AEAD tag.
const tlsRecordOverhead = 5 + 1 + 16

// afterBulkBatch is the writer's look after a batch that carried
// by-reference frames, with nothing small queued behind it (see the top
// of the file): it cuts the read loop's read and yields to it when a Read
// waits, the read loop is parked in its read and more than
// controlRecordBytes wait on the socket; it reports whether it yielded.
// Called by run, with no lock held.
func (r *readWaker) afterBulkBatch() bool {
	if !r.cutIfMoreThan(controlRecordBytes) {
		return false
	}
	runtime.Gosched() // the read loop, made runnable on this P, runs first
	return true
}
