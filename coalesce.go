package braid

import (
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pool "github.com/libp2p/go-buffer-pool"
)

// Writer bounds. Each is a memory bound on what peers and local streams can
// make the writer hold.
const (
	// maxQueuedCtrlBytes bounds queued control frames (window updates,
	// resets, pongs). The read loop waits when it is reached, as a socket
	// would push back, rather than buffer a flood without bound.
	maxQueuedCtrlBytes = 256 * 1024
	// maxQueuedCallCtrlBytes bounds the control queue for the frames an
	// application call queues (queueCallCtrl): a Read's window update,
	// AcceptStream's ACK, a Reset's RST. They wait only beyond it, not at
	// maxQueuedCtrlBytes, so that a peer flooding the read loop's frames
	// (which wait there) while not reading can't hold those calls up.
	// What they queue is bounded without it (one ACK and one RST per
	// stream, an update per part of a window consumed).
	maxQueuedCallCtrlBytes = 2 * maxQueuedCtrlBytes
	// maxQueuedPongs bounds pongs waiting to be written; pings beyond it
	// are not answered (a ping flood can't grow the queue).
	maxQueuedPongs = 64
	// refThreshold is the payload size from which a data frame is handed
	// to the writer by reference (written with writev, not copied).
	// Smaller payloads are copied into the batch: a copy of a few KiB
	// costs less than the wake-up a by-reference write needs.
	refThreshold = 16 * 1024
	// notSentLowat is the TCP_NOTSENT_LOWAT the writer sets on a TCP conn
	// (or the one under TLS): unsent bytes the kernel holds before a write
	// waits. Half a batch keeps the socket fed between two writes; a small
	// frame waits behind at most that plus what is in flight.
	notSentLowat = 32 * 1024
	// writeDeadlineSlack is how many times a write deadline is reused
	// within one connection write timeout (armWriteTimeout): 8 keeps a
	// stalled write's limit within 12.5 % of the timeout and renews the
	// deadline at most once per 1.25 s at the default 10 s.
	writeDeadlineSlack = 8
)

// refFrame is a data frame whose payload is the caller's memory. Its stream
// waits until it is written (or has it copied, see scheduler.detach).
type refFrame struct {
	hdr     [headerSize]byte // the codec's header, hdr[:hdrLen]
	hdrLen  uint8
	payload []byte
	owner   *streamSend // the stream's send state, finished with refWritten
}

// Stats counts what a session sent and received. The counters are read one
// at a time while the session runs, and a write is counted as it is made
// but its frames once the whole write is done, so Writes can be ahead of
// FramesSent by one batch; both are final once the session is closed.
type Stats struct {
	FramesSent     uint64 // every frame sent, control frames too
	Writes         uint64 // calls made to the conn, counted as each starts (the peer may read a write's bytes before it returns); one writev is one
	BytesSent      uint64 // bytes written to the conn, headers included
	FramesReceived uint64 // frames read from the conn
	BytesReceived  uint64 // bytes read from the conn, headers included
	BytesLent      uint64 // of those, payload read straight into a waiting Read's buffer (see Stream.Read)
	InlineWrites   uint64 // of Writes, those a stream made itself, the writer having nothing to write (see Stream.Write)
}

// writerStats are updated by the writer goroutine and read by Stats.
type writerStats struct {
	frames, writes, bytes, inline atomic.Uint64
}

// writer is the only code that writes to the connection. The read loop and
// streams queue control frames in one queue, and streams their data in
// their own queues (sendqueue.go); one goroutine (run, owned by the
// Session, started by newSession and ended by close) drains all control
// frames and, in the scheduler's order (scheduler.go), the streams' frames
// into one write. A stream's goroutine may write in run's stead while run
// has nothing to write (inline.go): writing and inline, both under mu,
// keep the conn to one writer at a time.
// No timer is armed unless CoalesceDelay is set, so a lone frame is written
// as soon as the goroutine wakes, and batches grow only while the conn is
// busy with the previous write.
//
// Locks and owners: mu guards the control queue, the scheduler (and
// through it every stream's streamSend and sendQueue) and the in-flight
// bound. It is taken with no other braid lock held but a Stream.mu (a
// stream changes its write side's state and its send state together:
// lock order Stream.mu, then writer.mu), and none is taken under it (a
// failed write closes the conn under it). The batch (b) and flat belong to
// run: takeLocked fills b under mu, writeBatch reads it without mu (the
// by-reference payloads stay valid: their streams wait in sendRef until
// complete), complete empties it under mu.
type writer struct {
	conn         net.Conn
	codec        codec
	writev       bool // conn turns net.Buffers into one writev system call
	parallel     bool // more than one P when the session started: see busyReadLoop and loneParallelScale
	coalesce     bool
	delay        time.Duration
	maxBatch     int
	smallMax     int // the largest Write that sendSmall takes: copied (below refThreshold), one frame (maxBatch); 0 without flow control
	writeTimeout time.Duration
	stats        writerStats
	done         chan struct{}        // closed by run when it returns
	vec          net.Buffers          // writeVec's vector; a field so that WriteTo doesn't allocate
	peerRTT      func() time.Duration // the session's round trip, its last ping's: the marker timeout's; nil without pings (set before run starts)
	// path is the session's path knowledge (nil without pings, set before
	// run starts): its least round trip sizes the in-flight budget, and
	// markers' round trips go into it (markerAnswered).
	path *pathState
	// waker wakes the session's read loop out of the poller as a goroutine
	// of braid's parks (readwake.go); nil where it does not apply. Set
	// before run starts, never changed.
	waker *readWaker
	turn  *connTurn // the session's conn turn, told when the writer waits for pongs (turn.go); set before run starts
	// deadlineRenew is when the conn's write deadline must be renewed
	// (armWriteTimeout). It belongs to whoever writes the conn: run, or an
	// inline write, one at a time (writing and inline, under mu, hand the
	// conn over).
	deadlineRenew time.Time
	// seg is the partial segment kept from the last write on a TCP conn
	// (segment.go); it belongs to whoever writes the conn, as
	// deadlineRenew does.
	seg segmentTail
	// cork is the TCP socket under a conn without writev, corked for
	// run's batches of by-reference frames (cork.go); run's.
	cork recordCork
	// corked: run left the cork on after a batch of by-reference frames,
	// for the next batch to fill the segment it holds; run takes it off
	// before it parks, waits for CoalesceDelay or stops (uncork), and after
	// a batch that is not worth a cork. Run's.
	corked bool

	mu sync.Mutex
	// Fields below are guarded by mu.
	ctrl       []byte        // control frames; written first
	ctrlEnds   []int         // end offset of each frame in ctrl
	pongs      int           // pongs in ctrl
	pongWaiter chan struct{} // the read loop waits on it for its pong's write (answerMarkerAndWait); nil if it doesn't
	sched      scheduler     // the streams with queued frames, and who writes next
	idle       bool          // run is parked waiting for wake
	writing    bool          // run has frames to write: a batch (takeLocked to complete), the partial record kept from one (flat) or the segment its cork holds (corked); no inline write starts
	room       chan struct{} // closed when ctrl space frees up; nil if nobody waits
	err        error         // sticky; set once, by close or a failed write
	draining   bool          // close asked run to flush what is queued and stop
	spareCtrl  []byte        // buffer swapped with ctrl per batch
	bound      inflight      // the connection-level in-flight bound
	// The lone budgets' quiet (loneScale): shared is set while the budget
	// is sized with more than one stream in the ring and a copied (small)
	// frame among them; the next sizing without one clears it and sets
	// loneAfter, when the quiet ends (zero: no quiet). several: the last
	// sizing had more than one stream sending (the ring, or another
	// stream's by-reference frames since the sizing before): with a
	// copied frame it sets shared, and it picks the quiet's length
	// (quietLocked).
	shared    bool
	loneAfter time.Time
	several   bool
	// bulkOnly: the budget last sized is for bulk alone (bulkOnlyLocked),
	// and with more than one P only the batches taken while it holds are
	// corked (batch.bulkOnly, corkWorth). corkAfter is when the quiet
	// after another stream's small frame ends (zero: none runs).
	bulkOnly  bool
	corkAfter time.Time
	// smallUntil is when the quiet after a small message beside bulk
	// sent by copy ends (zero: none runs): until then such bulk leaves
	// copySlack to small frames and, with more than one P, gets
	// sharedCopyInflight (copyBulkBeside).
	smallUntil time.Time
	// sharedLook: the last sizing found several streams sending by
	// reference where the writer looks after its bulk batches
	// (sizeBudgetLocked): their batches are bound to sharedLookBatch
	// (takeLocked), and a Write waiting for its by-reference frame does
	// not look at the socket (sendRef, readWaker.beforeRefWait). Kept
	// rather than derived again in takeLocked, which would scan the ring
	// a second time per batch; it is exactly as fresh as the budget sized
	// with it.
	sharedLook  bool
	inlineState           // a stream's own write of a frame (inline.go)
	rate        writeRate // how fast the conn takes large writes (writerate.go)

	wake chan struct{} // one slot: something was queued, or close

	// Fields below belong to run (see above).
	b batch
	// flat is the batch on a conn without writev; between batches it
	// holds the last batch's final partial record (see writeFlat),
	// written with the next batch, or alone before run parks or stops.
	flat       []byte
	delayTimer *time.Timer // CoalesceDelay's, made on first use
}

// batch is one write: every control frame queued, then what the scheduler
// took, then at most one marker. Its buffers are kept across batches.
type batch struct {
	ctrl     []byte      // control frames (swapped with writer.ctrl)
	ctrlEnds []int       // end offset of each frame in ctrl
	data     []byte      // copied stream frames
	ends     []int       // end offset of each frame in data
	refs     []refFrame  // by-reference frames, after data
	tail     []byte      // a marker ping after the batch's data (inflight.go), or before its last by-reference frame (markEarly)
	early    bool        // tail goes before the last of refs (markEarly)
	awaited  bool        // ctrl holds a pong the read loop waits for (handoff.go): written whole
	bulkOnly bool        // taken while writer.bulkOnly held: corkWorth may cork it with more than one P
	size     int         // bytes of ctrl, data and refs
	vec      net.Buffers // backing array of the writev vector
}

func newWriter(conn net.Conn, c codec, cfg *Config) *writer {
	w := &writer{
		conn:         conn,
		codec:        c,
		writev:       supportsWritev(conn),
		parallel:     runtime.GOMAXPROCS(0) > 1,
		coalesce:     !cfg.DisableCoalescing,
		delay:        cfg.CoalesceDelay,
		maxBatch:     cfg.MaxBatchBytes,
		writeTimeout: cfg.ConnectionWriteTimeout,
		sched:        newScheduler(c, cfg.MaxBatchBytes),
		done:         make(chan struct{}),
		wake:         make(chan struct{}, 1),
	}
	if !w.coalesce {
		w.delay = 0
	}
	if c.caps().flowControl {
		// mplex has no send credit to keep beside the queue: its small
		// Writes take the full path, without a first look at sendSmall.
		w.smallMax = min(refThreshold-1, cfg.MaxBatchBytes)
	}
	w.sched.merge = w.coalesce // see mergeSmallFrames
	if w.coalesce && !w.writev {
		w.cork = newRecordCork(conn, w.parallel)
	}
	if !w.cork.active() || w.parallel {
		// At one P a corked socket has no low-water mark; at more, the
		// cork clears it while on (cork.go).
		setNotSentLowat(conn, notSentLowat)
	}
	if w.coalesce && w.writev {
		w.seg = newSegmentTail(conn)
	}
	return w
}

// supportsWritev tells whether net.Buffers.WriteTo on c is one system call.
// Elsewhere (TLS, noise, pipes) it would be one Write per buffer, so the
// writer copies the batch into one buffer instead.
func supportsWritev(c net.Conn) bool {
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
		return true
	}
	return false
}

// signal wakes run if it is parked. Called with mu held.
func (w *writer) signal() {
	if w.idle {
		w.idle = false
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// waitRoom returns a channel closed when queue space frees up. mu held.
func (w *writer) waitRoom() <-chan struct{} {
	if w.room == nil {
		w.room = make(chan struct{})
	}
	return w.room
}

// queueCtrl queues a control frame ahead of all stream data. It waits while
// the control queue is full, until cancel is closed.
func (w *writer) queueCtrl(h header, cancel <-chan struct{}) error {
	return w.queueCtrlWithin(h, cancel, maxQueuedCtrlBytes)
}

// queueCallCtrl is queueCtrl for an application call's frame, which waits
// only once the queue holds maxQueuedCallCtrlBytes.
func (w *writer) queueCallCtrl(h header) error {
	return w.queueCtrlWithin(h, nil, maxQueuedCallCtrlBytes)
}

// queueCtrlWithin is queueCtrl with the bound it waits at.
func (w *writer) queueCtrlWithin(h header, cancel <-chan struct{}, bound int) error {
	w.mu.Lock()
	for len(w.ctrl) >= bound && w.err == nil {
		room := w.waitRoom()
		w.mu.Unlock()
		select {
		case <-room:
		case <-cancel:
			return os.ErrDeadlineExceeded
		case <-w.done:
		}
		w.mu.Lock()
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	w.appendCtrlLocked(h)
	w.signal()
	w.mu.Unlock()
	return nil
}

// appendCtrlLocked appends the control frame h to the control queue,
// without waking run. mu held.
func (w *writer) appendCtrlLocked(h header) {
	w.ctrl = w.codec.appendHeader(w.ctrl, h)
	w.ctrlEnds = append(w.ctrlEnds, len(w.ctrl))
}

// busyReadLoop tells whether the read loop keeps its P busy (handoff.go):
// a conn without writev (TLS, noise: its reads decrypt, so the read loop
// seldom parks) with more than one P when the session started (fixed
// then: runtime.GOMAXPROCS takes the scheduler's global lock, too much for
// every marker).
// A goroutine woken by a channel send runs on the waker's P once the
// waker blocks; a trace of TLS bulk at GOMAXPROCS 2 put ~18 µs of
// scheduling delay on every pong, most of the marker's round trip that
// bounds one stream's throughput. So while several streams send bulk
// the read loop waits for its pong's write (handoff.go); a yield after
// queuing a pong while one stream sends (TLS bulk +12 % at cd5d566)
// is gone since session 18 (handoff.go). Over plain TCP, whose read loop
// parks between reads, the same yield cost bulk 11 %, and at GOMAXPROCS 1
// it puts the read loop behind every runnable goroutine (p50 4x worse,
// session 3).
func (w *writer) busyReadLoop() bool { return !w.writev && w.parallel }

// queuePong queues a ping reply unless too many are queued already.
func (w *writer) queuePong(id uint32) {
	w.mu.Lock()
	w.queuePongLocked(id)
	w.mu.Unlock()
}

// queuePongWith queues the window updates ups, then the pong of ping id,
// under one hold of mu, so that the batch that takes the pong takes them
// too (updateride.go). The updates are not held to maxQueuedCtrlBytes:
// there is at most one per stream, each for an eighth of its window
// consumed, and each replaces an update that would have been queued on
// its own.
func (w *writer) queuePongWith(id uint32, ups []header) {
	w.mu.Lock()
	if w.err == nil {
		for _, h := range ups {
			w.appendCtrlLocked(h)
		}
	}
	w.queuePongLocked(id)
	w.mu.Unlock()
}

// queuePongLocked is queuePong with mu held; it reports whether the pong
// was queued.
func (w *writer) queuePongLocked(id uint32) bool {
	if w.err != nil || w.pongs >= maxQueuedPongs {
		return false
	}
	w.pongs++
	w.appendCtrlLocked(header{typ: typePing, flags: flagACK, length: id})
	w.signal()
	return true
}

// run is the writer goroutine: wait for work, take a batch under mu, write
// it without mu (streams keep queueing meanwhile; what they queue is the
// next batch), complete it under mu.
func (w *writer) run() {
	defer close(w.done)
	defer w.uncork()
	for {
		w.mu.Lock()
		if !w.waitLocked() {
			w.mu.Unlock()
			return
		}
		w.takeLocked()
		w.mu.Unlock()
		w.complete(w.timedWriteBatch())
	}
}

// waitLocked waits until there is something to write: it parks while
// nothing is queued (writing the partial record kept from the last batch
// first, see writeFlat), and with CoalesceDelay waits once more for a
// fuller batch. It returns false when the writer stops, on an error or
// once a drain has written everything, after failLocked. mu held; released
// while it waits or writes.
func (w *writer) waitLocked() bool {
	for w.inline || !w.hasWorkLocked() {
		if !w.inline && w.keptLocked() {
			w.flushKeptLocked()
			continue
		}
		if w.corked {
			// Nothing follows to fill the held segment: send it
			// before parking, and let inline writes start again.
			w.mu.Unlock()
			w.uncork()
			w.mu.Lock()
			w.writing = false
			continue
		}
		w.idle = true
		boundBlocked := w.bound.blocked
		w.trimCtrlLocked()
		w.mu.Unlock()
		w.releaseBuffers()
		w.waker.beforePark(boundBlocked)
		if boundBlocked {
			w.turn.needFrames() // the budget's pongs come as frames (turn.go)
		}
		<-w.wake
		if boundBlocked {
			w.turn.needDone()
		}
		w.mu.Lock()
	}
	if w.err == nil && w.draining && len(w.ctrl) == 0 && !w.sched.busy() && w.keptLocked() {
		w.flushKeptLocked()
	}
	if w.err != nil || (w.draining && len(w.ctrl) == 0 && !w.sched.busy()) {
		w.failLocked(w.err)
		return false
	}
	if w.delay > 0 && w.sched.queued+len(w.ctrl) < w.maxBatch && !w.draining {
		// Nagle-like: one timer per batch, never per frame.
		w.mu.Unlock()
		w.uncork()
		armTimer(&w.delayTimer, w.delay)
		<-w.delayTimer.C
		w.mu.Lock()
		if w.err != nil {
			w.failLocked(w.err)
			return false
		}
	}
	return true
}

// releaseBuffers returns the batch buffers to the pool while the writer
// parks, so that a session idle after bulk traffic holds none of what its
// batches grew to; takeLocked and writeBatch take them again from the pool
// (no allocation) when frames come. Only run calls it, without mu: the
// buffers are run's.
func (w *writer) releaseBuffers() {
	if w.b.data != nil {
		pool.Put(w.b.data[:cap(w.b.data)])
		w.b.data = nil
	}
	if w.flat != nil && len(w.flat) == 0 {
		pool.Put(w.flat[:cap(w.flat)])
		w.flat = nil
	}
	clear(w.b.vec[:cap(w.b.vec)]) // no reference into the buffers given back
}

// maxIdleCtrl is the most a control buffer keeps of its room while the
// writer parks (trimCtrlLocked): 341 frames of 12 bytes, more than a
// batch of window updates and pongs for 100 busy streams needs, so that a
// steady flow does not make its buffers anew at every park; a burst of
// thousands of streams' SYNs and FINs grows them past it (10,000 streams
// opened and closed left 20 KB in an idle session, session 29).
const maxIdleCtrl = 4 * 1024

// trimCtrlLocked lets go of the control buffers that grew past
// maxIdleCtrl, all of them empty as the writer parks: the queue's (ctrl,
// ctrlEnds, spareCtrl, under mu) and the batch's (run's own: b.ctrl aliases
// spareCtrl after complete). The next control frame makes them anew.
// mu held, by run only.
func (w *writer) trimCtrlLocked() {
	if len(w.ctrl) == 0 && cap(w.ctrl) > maxIdleCtrl {
		w.ctrl, w.ctrlEnds = nil, nil
	}
	if cap(w.spareCtrl) > maxIdleCtrl {
		w.spareCtrl, w.b.ctrl = nil, nil
	}
	if cap(w.b.ctrlEnds)*headerSize > maxIdleCtrl {
		w.b.ctrlEnds = nil
	}
}

// batchBufSize bounds the pooled buffer a batch's copied frames start in:
// the batch bound and one more frame of copied payload.
func batchBufSize(maxBatch int) int { return maxBatch + refThreshold + headerSize }

// flatBufSize is what writeFlat may append for b after an empty flat: its
// control and copied frames, for each by-reference frame its header and at
// most two records of payload (to the next boundary, and the last
// partial record), and the marker. Sized to the batch, a lone ping takes
// a small buffer, not a batch's.
func flatBufSize(b *batch) int {
	return len(b.ctrl) + len(b.data) + len(b.refs)*(headerSize+2*recordSize) + len(b.tail)
}

// takeLocked takes the batch into w.b: every control frame, then the
// streams' frames in the scheduler's order up to the batch bound (lower
// while the in-flight bound holds data back), then a marker if one is
// due. mu held.
func (w *writer) takeLocked() {
	b := &w.b
	w.writing = true // until complete
	b.ctrl, w.ctrl = w.ctrl, w.spareCtrl[:0]
	b.ctrlEnds, w.ctrlEnds = w.ctrlEnds, b.ctrlEnds[:0]
	w.pongs = 0
	b.awaited = w.pongWaiter != nil // the read loop's pong is in ctrl (answerMarkerAndWait)
	b.bulkOnly = w.bulkOnly
	if w.received != nil {
		w.receivedAtWrite = w.received.Load() // inline.go
	}
	w.refreshLoneFrameLocked()
	limit, bulkLimit, refLimit := w.maxBatch, w.maxBatch, w.maxBatch
	if r := w.bound.refRoom(); r >= 0 && !w.draining {
		refLimit = min(limit, len(b.ctrl)+r)
		bulkLimit = min(limit, len(b.ctrl)+w.bound.roomFor(w.sched.bulkCopyRoom()))
		limit = min(limit, len(b.ctrl)+w.bound.roomFor(w.sched.copyRoom()))
	}
	if w.sharedLook {
		refLimit = min(refLimit, sharedLookBatch)
	}
	if b.data == nil && w.sched.queued > 0 {
		// take copies at most what is queued: the buffer never grows.
		b.data = pool.Get(min(w.sched.queued, batchBufSize(w.maxBatch)))
	}
	b.data, b.ends, b.size = b.data[:0], b.ends[:0], len(b.ctrl)
	w.sched.take(b, refLimit, bulkLimit, limit)
	b.tail, b.early = b.tail[:0], false
	if w.bound.took(b.size - len(b.ctrl)) {
		at := w.bound.sent
		if b.early = w.markEarly(); b.early {
			last := &b.refs[len(b.refs)-1]
			at -= uint64(int(last.hdrLen) + len(last.payload))
		}
		b.tail = w.codec.appendHeader(b.tail, header{typ: typePing, flags: flagSYN, length: w.bound.markAt(at)})
	}
	if w.room != nil {
		close(w.room)
		w.room = nil
	}
}

// markEarly tells whether the marker due after the batch just taken goes
// before its last by-reference frame instead, marking the bytes before
// that frame. On a conn without writev, with more than one P, a marker at
// the end of a batch makes it end with a short record of its own (it is
// written whole, see writeBatch): a seal and a write(2) more per marker,
// on the side that bounds one-stream TLS bulk. Before the last frame it
// rides in a whole record, and its pong comes back sooner, for a frame
// less. Only while budget is left after the batch: a marker that the
// bound waits for (refRoom 0) must mark every byte, or its pong would
// free too little to go on, and no new byte would carry the next marker.
// mu held.
func (w *writer) markEarly() bool {
	b := &w.b
	return !w.writev && w.parallel && w.coalesce && len(b.refs) > 0 && !b.awaited && w.bound.refRoom() > 0
}

// timedWriteBatch is writeBatch, timed for the write rate (timedWrite);
// complete records the time.
func (w *writer) timedWriteBatch() (time.Duration, error) { return timedWrite(w.b.size, w.writeBatch) }

// timedWrite makes write, a conn write of n bytes, and times it for the
// write rate when n is large enough to tell it (two clock reads per large
// write, none per small one); 0 means not timed.
func timedWrite(n int, write func() error) (time.Duration, error) {
	if n < minRateSample {
		return 0, write()
	}
	start := time.Now()
	err := write()
	return time.Since(start), err
}

// writeBatch writes w.b to the conn, without mu: one writev, or on a conn
// without writev whole records (writeFlat), or with DisableCoalescing
// every frame on its own (writeEach). It counts the batch's frames.
func (w *writer) writeBatch() error {
	b := &w.b
	var err error
	frames := uint64(len(b.ctrlEnds) + len(b.ends) + len(b.refs))
	if len(b.tail) > 0 {
		frames++
	}
	if w.coalesce {
		if w.writev {
			vec := w.seg.prepend(b.vec[:0])
			if len(b.ctrl) > 0 {
				vec = append(vec, b.ctrl)
			}
			if len(b.data) > 0 {
				vec = append(vec, b.data)
			}
			for i := range b.refs {
				f := &b.refs[i]
				vec = append(vec, f.hdr[:f.hdrLen], f.payload)
			}
			var kept []byte
			if len(b.tail) > 0 {
				vec = append(vec, b.tail) // a marker: written whole
			} else if len(b.refs) > 0 {
				last := b.refs[len(b.refs)-1].payload
				if k := w.seg.cut(buffersLen(vec), len(last)); k > 0 {
					kept = last[len(last)-k:]
					vec[len(vec)-1] = last[:len(last)-k]
				}
			}
			b.vec = vec
			if err = w.writeVec(vec); err != nil {
				kept = nil
			}
			w.seg.written(kept)
		} else {
			// flat starts with the last batch's partial record. With
			// more than one P a batch that ends with a marker is
			// written whole: the marker's pong frees the in-flight
			// budget, and kept for the next batch it would wait for
			// that batch's write (over TLS the budget's marker round
			// trip then grew by a batch; one-stream bulk at P=2
			// measured 10 % less). At one P the peer reads only once
			// this side blocks, and run writes the kept record
			// before it parks, so keeping the marker delays its pong
			// by nothing and saves a short record (a seal and a
			// write(2)) per marker: 3.00 writes a 64 KiB message
			// down to 2.37; paired runs x1.06 bulk, x1.20 256 KiB
			// notifications, the ping beside one bulk stream p99
			// x0.84. A batch whose pong the read loop waits for is
			// always written whole.
			took := len(b.ctrl)+len(b.data)+len(b.refs)+len(b.tail) > 0
			if w.flat == nil {
				w.flat = pool.Get(flatBufSize(b))[:0]
			}
			worth := w.corkWorth(b)
			if worth && !w.corked {
				w.corked = w.cork.set(true)
			}
			keep := took && (len(b.tail) == 0 || b.early || !w.parallel) && !b.awaited
			w.flat, err = w.writeFlat(append(append(w.flat, b.ctrl...), b.data...), b.tail, keep)
			if !worth {
				w.uncork() // control or copied frames leave at once
			}
		}
	} else {
		err = w.writeEach(b)
		if err == nil && len(b.tail) > 0 {
			err = w.write(b.tail)
		}
	}
	w.stats.frames.Add(frames)
	return err
}

// corkWorth tells whether run corks the socket for batch b (cork.go):
// by-reference frames spanning two records or more; with more than one P
// only while bulk goes alone (batch.bulkOnly), and with nothing small in
// the batch. Run's, without mu.
func (w *writer) corkWorth(b *batch) bool {
	if !w.cork.worth(len(w.flat)+b.size+len(b.tail), len(b.refs)) {
		return false
	}
	return !w.parallel || b.bulkOnly && len(b.ctrl) == 0 && len(b.data) == 0
}

// complete finishes the batch written with err in d (0: not timed): its
// by-reference frames' streams are done with them (refWritten), and a
// write error becomes the writer's, closing the conn. Then, after a batch
// with by-reference frames and nothing small queued behind it, the read
// waker looks at the socket for a waiting Read (readWaker.afterBulkBatch),
// and after a full batch with nothing left queued, it yields. It takes
// mu.
func (w *writer) complete(d time.Duration, err error) {
	b := &w.b
	bulk := len(b.refs) > 0
	w.mu.Lock()
	// A frame's last partial record waits in flat, or the cork holds a
	// partial segment (corked): nothing may go before it, and no inline
	// write under the cork.
	w.writing = len(w.flat) > 0 || w.corked
	if d > 0 {
		w.rate.sample(b.size, d)
	}
	w.spareCtrl = b.ctrl[:0]
	for i := range b.refs {
		if s := b.refs[i].owner; s != nil {
			s.refWritten(err)
		}
	}
	clear(b.refs)
	b.refs = b.refs[:0]
	if err != nil && w.err == nil {
		w.err = err
		// Wake the read loop: the session ends with this error.
		breakConn(w.conn)
	}
	if b.awaited && w.pongWaiter != nil { // nil: the read loop's wait ended first
		notify(w.pongWaiter) // the read loop goes on (handoff.go)
		w.pongWaiter = nil
	}
	nothingSmall := len(w.ctrl) == 0 && w.sched.queued == 0 // by-reference frames may wait
	idle := nothingSmall && !w.sched.busy()                 // nothing at all waits
	w.mu.Unlock()
	// A look that yielded to the read loop let the goroutines just woken
	// run as well.
	yielded := bulk && err == nil && nothingSmall && w.waker.afterBulkBatch()
	if !yielded && idle && b.size >= w.maxBatch/fullBatchDivisor {
		// A full batch and nothing queued behind it: the writer would
		// park now, and the goroutines it just woke (a Write whose
		// frame it finished, a reader waiting for a window update)
		// are about to queue the next frames. Let them run first, so
		// that the writer finds those frames instead of parking and
		// being woken for each. With more queued it goes straight on:
		// a yield there only delays frames already waiting (measured,
		// session 4, docs/design.md, "The writer", rule 8).
		runtime.Gosched()
	}
	if cap(w.flat) > keptBatchBufs*w.maxBatch {
		w.flat = slices.Clone(w.flat) // don't keep a rare huge batch's buffer
	}
	if cap(b.data) > keptBatchBufs*w.maxBatch {
		b.data = nil
	}
}

const (
	// fullBatchDivisor: a batch of at least maxBatch/fullBatchDivisor
	// bytes counts as full for complete's yield: a bulk Write's frame
	// fills one even when a window or the bound cut it short, and a
	// lone small message, whose writer has nothing to gain by yielding,
	// does not.
	fullBatchDivisor = 2
	// keptBatchBufs bounds, in batches, the buffers complete keeps for
	// the next batch: a lone stream's frames reach loneParallelScale
	// (four) batches, and a buffer grown past that by a rare huge batch
	// is dropped rather than held for the session's life.
	keptBatchBufs = loneParallelScale
)

// hasWorkLocked tells whether run has something to do: control frames,
// stream frames the in-flight bound lets through, an error or a drain. When
// only the bound holds frames back, it arms the marker timer. mu held.
func (w *writer) hasWorkLocked() bool {
	if len(w.ctrl) > 0 || w.err != nil || w.draining {
		return true
	}
	if !w.sched.busy() {
		w.bound.peerRate.idle()
		return false
	}
	w.sizeBudgetLocked(!w.sched.cutsAtRoom())
	sc := &w.sched
	if sc.refFits(w.bound.refRoom()) || sc.smallQueued() && w.bound.roomFor(sc.copyRoom()) > 0 || sc.bulkQueued > 0 && w.bound.roomFor(sc.bulkCopyRoom()) > 0 || w.bound.needMarker() {
		return true
	}
	w.bound.blocked = true
	w.bound.peerRate.held()
	w.armMarkerTimer()
	return false
}

// failLocked makes err sticky and releases every stream waiting on the
// writer. mu held.
func (w *writer) failLocked(err error) {
	if w.err == nil {
		w.err = err
	}
	if w.err == nil {
		w.err = ErrSessionClosed
	}
	for i := range w.b.refs {
		if s := w.b.refs[i].owner; s != nil {
			s.refWritten(w.err)
		}
	}
	w.b.refs = nil
	w.stopMarkerTimer()
	w.sched.failAll(w.err)
	if w.room != nil {
		close(w.room)
		w.room = nil
	}
}

// close stops the writer. With flush, run first writes what is queued,
// within the connection write timeout; without, it stops after the current
// write. It does not wait: the session waits on done.
func (w *writer) close(flush bool, err error) {
	w.mu.Lock()
	if flush {
		w.draining = true
	} else if w.err == nil {
		w.err = err
	}
	w.idle = false
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// failure returns the error that stopped the writer, nil if it was closed
// or is running.
func (w *writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.draining {
		return nil
	}
	return w.err
}

// snapshot returns the writer's counters.
func (w *writer) snapshot() (frames, writes, bytes, inline uint64) {
	return w.stats.frames.Load(), w.stats.writes.Load(), w.stats.bytes.Load(), w.stats.inline.Load()
}
