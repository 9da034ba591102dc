package braid

import "time"

// Mid-size Writes of a stream that sends alone.
//
// A Write of refThreshold (16 KiB) or more goes by reference: the writer
// writes its frames from the caller's memory, and Write waits for that
// write. So a stream of such Writes is stop-and-wait: one conn write per
// Write (and, where the writer writes it, a hand-off there and back), and
// nothing coalesces. At 32 KiB and up a Write's own conn write is large
// enough that this costs less than a copy; below that, a stream that has
// the conn to itself (a file sent in 16 KiB pieces, notifications of 16
// KiB) paid it on every Write: measured in session 49 (AMD EPYC VM,
// loopback, three interleaved rounds, medians), 16 KiB Writes of one
// stream at 0.81-0.94x go-yamux and 0.53-0.64x one raw conn at two P,
// over TCP and TLS alike, where 4 KiB Writes (copied) ran at 1.8-3.5x
// go-yamux and 32 KiB Writes at 1.1-1.6x.
//
// So a Write of less than loneCopyMax is copied, as a smaller one is,
// while its stream is the only one that sends (soleStream): the writer
// then coalesces it with the Writes after it into batches. Beside other
// streams' frames it goes by reference as before. Copied there it would
// lose what the writer does for by-reference frames beside small ones
// (the in-flight floors, inflight.go, and the lone budgets' quiet,
// writerbudget.go): with every 16-32 KiB Write copied, a 64 B ping-pong
// beside 10 streams of 24 KiB Writes measured p50 x1.44-2.12 and beside
// one x1.62-2.30 (four rounds each, TCP and TLS at one and two P).

// loneCopyMax bounds the Writes a stream that sends alone copies: below
// it, a Write's stop-and-wait costs more than its copy. Measured (session
// 49, one stream alone, three interleaved rounds): copying Writes below
// 32 KiB took 16 KiB Writes from 0.82x to 1.10x go-yamux over TCP at two
// P and from 0.81x to 1.16x over TLS, 16 KiB notifications over TLS at two
// P from 0.76x to 1.37x; copying below 64 KiB made 48 KiB Writes and 32
// KiB notifications slower than by reference (0.81-0.91x go-yamux over
// TCP).
const loneCopyMax = 32 * 1024

// soleQuiet is how long a stream must have been the only one sending
// before its mid-size Writes are copied (a stream that sends first in its
// session is alone from its first frame). Copied, they queue up to two
// batches ahead of the next small frame of another stream, and the batch
// being written is a whole one, not a Write's frame: measured (session
// 49, a 64 B request every 10 ms beside one stream's 24 KiB Writes,
// BenchmarkPingPongAfterQuiet's shape) with the quiet at loneQuiet (5 ms),
// the request's p50 over TLS at two P x1.94 (10 of 10 pairs), at one P
// 306 against 408 µs. A protocol's small messages beside a transfer
// (requests, acks, heartbeats) come this often or more, so the quiet is
// severalQuiet's 50 ms: beside them a transfer's mid-size Writes keep
// going by reference, and a transfer with none for 50 ms is alone.
const soleQuiet = severalQuiet

// soleStream follows which stream has the conn to itself: the stream of
// the last data frame queued or written (noteData), and whether it has
// been the only one for long enough. A stream counts as alone from its
// first frame when no stream sent before it; otherwise once soleQuiet has
// passed since it first asked (alone) after another stream's frame, with
// no other stream's frame meanwhile: at least soleQuiet of sending alone.
// The quiet starts at the ask, not at the frame, so that the clock is
// read only by mid-size Writes, not per frame (a ping-pong beside a
// transfer changes the last stream every frame). Guarded by writer.mu (a
// field of the scheduler).
type soleStream struct {
	id    uint32    // the stream of the last data frame (0: none yet)
	quiet bool      // id has been the only stream sending for soleQuiet
	after time.Time // when id will have been alone for soleQuiet; zero until alone first asks
}

// noteData records a data frame of stream id, queued or written. mu held.
func (s *soleStream) noteData(id uint32) {
	if id == s.id {
		return
	}
	// The session's first stream is alone from its first frame: nothing
	// sent beside it.
	s.quiet = s.id == 0
	s.id = id
	s.after = time.Time{}
}

// alone tells whether stream id has the conn to itself: its frame was
// the last, and no other stream's came within soleQuiet. The clock (now)
// is read only while a stream's quiet runs, not once it has passed. mu
// held.
func (s *soleStream) alone(id uint32, now func() time.Time) bool {
	switch {
	case id != s.id:
		return false
	case s.quiet:
		return true
	}
	t := now()
	if s.after.IsZero() {
		s.after = t.Add(soleQuiet)
		return false
	}
	s.quiet = !t.Before(s.after)
	return s.quiet
}

// copiesMidWrite tells whether a Write of a mid-size payload (refThreshold
// up to loneCopyMax) on stream id is copied rather than sent by
// reference: with coalescing on (nothing else would coalesce it), while
// the stream sends alone.
func (w *writer) copiesMidWrite(id uint32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.coalesce && w.sched.sole.alone(id, time.Now)
}
