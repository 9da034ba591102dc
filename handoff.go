package braid

import (
	"runtime"
	"time"
)

// Hand-offs from a busy read loop.
//
// On a conn without writev (TLS, noise) with more than one P, the read
// loop seldom parks: its reads decrypt, and while bulk data comes there is
// always more to decrypt. A goroutine it wakes with a channel send goes to
// its P's run queue and runs only once the read loop blocks, or when the
// other P runs out of work and steals it. So whatever the read loop hands
// on waits behind the bulk bytes it reads: a marker's pong the peer's
// writer waits for (the in-flight bound, inflight.go), a small message a
// Read waits for. Three hand-offs keep them from waiting:
//
//   - A small frame for a waiting Read while bulk frames come: the read
//     loop yields (yieldToReader), so the Read runs now. Measured beside
//     10 bulk streams over TLS at GOMAXPROCS 2 (20 interleaved runs): the
//     ping's p50 76 against 103 µs, bulk equal; a trace had put ~20 µs
//     between the frame's arrival and the Read's return. Only while bulk
//     frames come (a large one among the last recentFrames): 100 streams
//     of small messages, each frame for a waiting Read, measured 17 %
//     fewer messages when every such frame yielded.
//   - A marker's pong while one stream sends bulk: the read loop queues
//     it and reads on; the writer it woke writes it from the other P.
//     Until session 18 it yielded too, so that the writer ran at once
//     (busyReadLoop: TLS bulk +12 % when measured at cd5d566); with
//     the markers of session 18 (a whole budget's worth of frames between
//     two, a marker riding in a whole record) the yield cost more than
//     it bought: without it, in paired runs over TLS at GOMAXPROCS 2 (16
//     pairs), one-stream bulk x1.04 and x1.12, notifications of 64 KiB
//     x1.01-1.05 and of 256 KiB x1.04-1.07, the ping beside one or ten
//     bulk streams within the spread; the go-libp2p hosts over noise
//     (5 rounds each) +4 % and +8 %. The yield sent the read loop, the
//     receiver's bottleneck, to the back of the global run queue once
//     per marker.
//   - A marker's pong while several streams send bulk: the read loop waits
//     until the writer has written it (answerMarkerAndWait), at most
//     pongWaitMax. A yield puts the read loop at the back of the global run
//     queue, behind every reader its last frames woke, ten here; the wait
//     has it back first, once the pong is out. Measured with the budget
//     of sharedDecryptInflight beside 10 bulk streams over TLS (16
//     interleaved runs): bulk 1,893 against 1,785 MB/s, p50 equal; with one
//     stream (notifications) the same wait cost 15 %, as its one reader
//     then waits behind the read loop.
//
// All three are the read loop's (owner of bulkTracker and pongWaiter).
// The writer's side of the wait is writer.pongWaiter, under writer.mu,
// and batch.awaited, run's own: set as the batch is taken, read as it is
// written and completed.

const (
	// recentFrames is the read loop's window on the frames it read: bulk
	// frames come while a large one was among the last recentFrames, and
	// from several streams while two of them were for different streams.
	// 10 bulk streams' frames interleave with a frame or two of control
	// and small data between them.
	recentFrames = 16
	// pongWaitMax bounds the read loop's wait for the writer to write a
	// pong. The write is of a few bytes and takes microseconds; the bound
	// is for a write that blocks (a peer that stopped reading), which must
	// not stop the read loop.
	pongWaitMax = 200 * time.Microsecond
)

// bulkTracker records the large data frames the read loop reads. Owned by
// the read loop.
type bulkTracker struct {
	lastLarge  uint64 // frame number of the last large data frame
	lastSwitch uint64 // frame number of the last large frame whose stream was not the one before's
	lastStream uint32 // the stream of the last large frame
	// lastMarkerPong is the frame number of the last pong of a marker
	// of ours: our bulk is under way (the conn turn's quiet, turn.go).
	lastMarkerPong uint64
}

// large records that frame number n is a large data frame for stream id.
func (b *bulkTracker) large(n uint64, id uint32) {
	b.lastLarge = n
	if b.lastStream != 0 && id != b.lastStream { // 0: no large frame before (stream 0 is the session's)
		b.lastSwitch = n
	}
	b.lastStream = id
}

// flowing tells whether a large frame was among the last recentFrames
// before frame number n.
func (b *bulkTracker) flowing(n uint64) bool {
	return b.lastLarge != 0 && n-b.lastLarge <= recentFrames
}

// shared tells whether the large frames among the last recentFrames
// before frame number n were for more than one stream.
func (b *bulkTracker) shared(n uint64) bool {
	return b.lastSwitch != 0 && n-b.lastSwitch <= recentFrames && b.flowing(n)
}

// pongWaiter is the read loop's means to wait for a pong's write. Owned by
// the read loop; made at its first wait, so that a session that never
// waits holds no timer.
type pongWaiter struct {
	written chan struct{} // the writer's signal (one slot)
	timer   *time.Timer   // the bound
	max     time.Duration // the bound, if not pongWaitMax (tests)
}

// wait waits for written, at most pongWaitMax.
func (p *pongWaiter) wait() {
	d := pongWaitMax
	if p.max > 0 {
		d = p.max
	}
	armTimer(&p.timer, d)
	select {
	case <-p.written:
	case <-p.timer.C:
	}
	p.timer.Stop()
}

// yieldToReader is called by the read loop after it gave a small frame to
// a stream whose Read waits for it.
func (s *Session) yieldToReader() {
	if s.w.busyReadLoop() && s.bulk.flowing(s.recvFrames.Load()) {
		runtime.Gosched()
	}
}

// answerMarker answers the peer's marker id (a ping the peer's writer
// waits for, inflight.go): a busy read loop while several streams send
// bulk waits for the pong's write (or yields); otherwise it queues the
// pong and reads on (see the top of the file).
func (s *Session) answerMarker(id uint32) {
	if s.updates == updateRide {
		s.markers.Add(1) // updates may wait for the next one (updateride.go)
	}
	if s.w.busyReadLoop() && s.bulk.shared(s.recvFrames.Load()) {
		if !s.w.answerMarkerAndWait(id, &s.pongWait) {
			runtime.Gosched()
		}
		return
	}
	s.queuePong(id)
}

// answerMarkerAndWait queues the pong of marker id and, if the writer is
// not writing (so that the pong goes out in its next write), waits until
// it has written it or pongWaitMax passed; it reports whether it waited. The
// writer writes the batch that took the pong whole and then signals
// pw.written (complete). A new wait starts only while the writer is not
// writing, so the batch that complete finishes is the one that took the
// pong of the wait it signals. Called by the read loop.
func (w *writer) answerMarkerAndWait(id uint32, pw *pongWaiter) bool {
	w.mu.Lock()
	queued := w.queuePongLocked(id)
	wait := queued && !w.writing && !w.inline && w.pongWaiter == nil
	if wait {
		if pw.written == nil {
			pw.written = make(chan struct{}, 1)
		}
		w.pongWaiter = pw.written
	}
	w.mu.Unlock()
	if !wait {
		return false
	}
	pw.wait()
	w.mu.Lock()
	if w.pongWaiter == pw.written { // not written within the bound
		w.pongWaiter = nil
	}
	w.mu.Unlock()
	select { // a signal that came after the timer
	case <-pw.written:
	default:
	}
	return true
}
