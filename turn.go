package braid

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// The conn turn: a Read that waits at a quiet moment reads the conn itself.
//
// A frame the read loop reads for a waiting Read is handed over: the read
// loop makes the Read runnable, and with more than one P the runtime wakes
// an idle P's thread for it (wakep: a futex wake, under a hypervisor an
// interrupt to the other vCPU), while the read loop makes one more conn
// read that finds nothing and parks. A raw conn has no such hand-off: the
// goroutine that waits for the bytes is the one the network poller wakes.
// Measured on the 64 B ping-pong of an idle session at GOMAXPROCS 2
// (session 31, `strace -c`): 3 futex calls a round trip for braid and
// go-yamux alike, almost none for raw TCP and TLS; a half round trip's
// trace: 4.7 µs from the read loop's wake of the Read to its next conn
// read, and in the slow rounds the Read run by the other thread.
//
// So while the session is quiet (no bulk data frame among the last
// recentFrames read, no pong of a marker of ours: nothing is streaming
// either way), a Read about to park takes the turn instead, if it is
// free: it reads the conn and handles the frames it brings as the read
// loop would (for any stream) until its own stream has something for it
// (readerDue); it keeps the turn meanwhile, so that frames for others
// wake nobody but their Reads (paired runs of keeping it against giving
// it back after each conn read: 100 x 64 B at two P x1.038 over TCP, 5 of
// 6 pairs above, x1.013 over TLS; the idle ping's p99 x0.93 and x0.87). The read
// loop lends the turn when a Read wants it (turnWant) and the session is
// quiet, and takes it back when the Read returns it while somebody else
// waits for frames (a Write for credit, the writer for the in-flight
// budget's pongs, an OpenStream for its ACK, a Ping, a Read that may not
// take the turn: needs), or after turnLoan in any case. A Read that
// returns what it waited for leaves the turn free while nobody else
// waits: its next Read, a request later, takes it again, and no goroutine
// was woken.
//
// An AcceptStream waiting for the peer's SYN does not make the release
// wake the read loop either: in a go-libp2p host one always waits, and
// the wake at every release cost the host's request-response what the
// turn saves (below). The releasing stream owes the read loop a call
// instead (owed): the next Read to take the turn cancels it, the
// stream's end or half-end (CloseRead, CloseWrite, Reset) pays it, since
// its Read may not be back, and the loan's end (turnLoan) bounds it. A SYN can
// so wait up to turnLoan while a stream's user, between its Reads, does
// something other than reading or ending the stream. Measured (session
// 32, 6 pairs of the idle 64 B ping-pong at GOMAXPROCS 2 with an Accept
// waiting on both sessions, BenchmarkPingPong load=accepting): p50 x0.935
// over TCP and x0.948 over TLS, p99 x0.66 and x0.72, every pair faster;
// the idle ping without Accepts unchanged; request-response streams
// (BenchmarkStreamRPC, a new stream per call to an AcceptStream) x0.98-
// 1.07, within their spread.
//
// Measured (session 31, 5 alternating rounds of the idle 64 B ping-pong
// at GOMAXPROCS 2, the turn off and on): p50 34.4 against 21.8 µs over
// TCP, 50.9 against 24.3 over TLS, p99 x0.60 and x0.67 (raw TCP and TLS:
// 19-26 and 22-28 µs). Beside bulk traffic the session is not quiet and
// nothing changes (the loaded pings' p50 x1.003 and x0.988, their bulk
// x0.94 and x0.99, within the rounds' spread); request-response streams
// x0.995-1.18.
//
// A taker reads whole frames only, of at most takerMaxFrame bytes: it
// never blocks in the middle of a frame, so that it can return at any of
// its conn reads. Its Read must return for its own stream's events (a
// deadline set or passing, CloseRead, Close, Reset, the session's end):
// they cut its conn read (the lend's cut, lend.go; a read deadline's
// timer cuts as it fires, deadline.setRead), it leaves the frame it was
// waiting for in the buffer, and looks again. Until session 32 a Read
// with a read deadline pending did not take the turn, and go-libp2p's
// protocols set one around their reads (hostbench's ping did: the
// client's Reads never took it, and two hosts' TLS ping at two P was
// stock yamux's). A larger
// frame, an error of the conn or a protocol error goes back to the read
// loop, which reads and reports it as ever.
//
// Only where a hand-off wakes a thread (more than one P), where a read can
// be cut and resumed (lendable), and on yamux: mplex has no flow control,
// its read loop pushes back on the conn (mplex_pushback), and no taker may
// block so.
//
// Lock order: Stream.mu, then connTurn.mu (taken with TryLock only, never
// waited for under Stream.mu), then what the read loop takes for a frame.
// A taker holds no Stream.mu while it holds the turn.

const (
	// turnLoan bounds how long the read loop lends the turn: frames that
	// nobody waits for (a peer's ping, a stream's end that no Read
	// waits for) wait at most this long while the turn is free.
	turnLoan = time.Millisecond
	// takerMaxFrame is the largest frame a taker reads: a frame the
	// read buffer holds whole. Larger ones are bulk data, the read
	// loop's (and a Read's lent buffer's, lend.go).
	takerMaxFrame = readBufferSize
)

// errTurnYield ends a header read that a cut interrupted for the turn:
// the reader lends or returns the turn. It never leaves the session.
var errTurnYield = errors.New("braid: conn turn wanted")

// connTurn is the right to read frames off the conn. The read loop holds
// mu whenever the turn is not lent; a taker holds it while it reads.
// Nothing here is closed: the two channels are one-slot notifications
// that live as long as the session. free is sent by whoever gives the
// turn up (lendTurn, releaseTurn) and taken by a Read that wants it;
// back is sent by whoever needs the read loop to read (a taker giving
// back, needFrames, acceptWaits, wantDone, payOwed) and taken by the
// read loop alone, in lendTurn. No goroutine of its own.
type connTurn struct {
	mu      sync.Mutex             // the turn
	on      bool                   // fixed at the session's start
	want    atomic.Int32           // Reads parked wanting the turn (wantTurn, wantDone)
	needs   atomic.Int32           // goroutines parked waiting for frames that won't read (needFrames, needDone)
	accepts atomic.Int32           // AcceptStream calls parked waiting for the peer's SYN (acceptWaits, acceptDone); Session.acceptCalls counts them too, under Session.mu, which a taker's release must not take
	owed    atomic.Pointer[Stream] // the stream whose Read left the turn free while an AcceptStream waits: its end calls the read loop back (payOwed); cleared by whoever takes the turn next
	lent    atomic.Bool            // the read loop has lent the turn and waits in lendTurn; the read loop stores
	holder  atomic.Pointer[Stream] // the stream whose Read holds the turn (every taker is a Read); nil while the read loop holds it or it is free; the holder stores
	idle    atomic.Bool            // the read loop waits for a header at a quiet moment: a Read that wants the turn cuts its read; the read loop stores, and clears it under readCutter.mu with a cut asked as the header came (readCutter.endIdle)
	free    chan struct{}          // one slot: the turn is free for a Read that wants it
	back    chan struct{}          // one slot: the read loop should take the turn back
	err     error                  // a frame error a taker met; mu held; the read loop returns it
	taken   atomic.Uint64          // frames takers read, for tests
	loans   atomic.Uint64          // lendTurn's loans, for tests
	timer   *time.Timer            // lendTurn's bound; the read loop's
}

// init switches the turn on for a session over a conn whose reads can be
// cut, on yamux, at more than one P.
func (t *connTurn) init(cutter *readCutter, flowControl, parallel bool) {
	if cutter == nil || !flowControl || !parallel {
		return
	}
	t.on = true
	t.free = make(chan struct{}, 1)
	t.back = make(chan struct{}, 1)
}

// quietForTurn tells whether nothing streams either way: no large data
// frame and no pong of a marker (a sign of our own bulk) among the last
// recentFrames read, and no burst read (readBuffer.bulkFlowing) within
// bulkGrace. The read loop asks when its buffer is empty, once a conn
// read, not once a frame; the clock is read only after a burst read, and
// only when the frame counts say quiet. (The last read's size alone, with
// no clock, measured 100 x 64 B at two P x0.944 over TCP, 1 of 6 pairs
// above: the turn then changed hands between bursts.) Read loop or taker.
func (s *Session) quietForTurn() bool {
	n := s.recvFrames.Load()
	return !s.bulk.flowing(n) && (s.bulk.lastMarkerPong == 0 || n-s.bulk.lastMarkerPong > recentFrames) && !s.br.bulkFlowing()
}

// lendTurn lends the turn to the Reads that want it and waits to take it
// back: when a taker returns it to us (back), after turnLoan, or once the
// session closes. The read loop's, turn held on entry and on return.
func (s *Session) lendTurn() error {
	t := &s.turn
	select {
	case <-t.back: // a token left from the last loan
	default:
	}
	t.lent.Store(true)
	t.loans.Add(1)
	t.mu.Unlock()
	notify(t.free)
	armTimer(&t.timer, turnLoan)
	select {
	case <-t.back:
	case <-t.timer.C:
	case <-s.closedCh:
	}
	t.timer.Stop()
	t.mu.Lock() // waits while a taker reads
	t.lent.Store(false)
	t.owed.Store(nil)
	return t.err
}

// turnTry is what tryReadTurn did.
type turnTry uint8

const (
	turnNotTaken turnTry = iota // the Read may not take the turn: it parks as ever
	turnBusy                    // somebody else holds the turn: the Read parks wanting it
	turnRead                    // the Read read the conn: it looks at its stream again
	turnGaveBack                // the Read took the turn and gave it back to the read loop: it looks again, then parks as ever
)

// tryReadTurn takes the turn for st's Read (of buffer b), if it is free,
// and reads until the Read has something to do (readerDue) or gives the
// turn back. st.mu held on entry and on return; released while
// it reads (turnRead, turnGaveBack), so that the Read must look at its
// stream again before it parks: a wake-up that came meanwhile found no
// waiter.
func (s *Session) tryReadTurn(st *Stream, b []byte) turnTry {
	t := &s.turn
	if st.readDeadline.expired() || isClosed(s.closedCh) {
		return turnNotTaken
	}
	if !t.mu.TryLock() {
		return turnBusy
	}
	t.holder.Store(st) // under st.mu: an event of st's after its unlock finds it and cuts
	t.owed.Store(nil)  // the turn is taken: nobody owes the read loop a call
	if st.readDeadline.expired() || isClosed(s.closedCh) {
		// Passed or closed since the look above, maybe before the cut
		// (the deadline's fire, cutHolder) could find the holder.
		s.releaseTurn(st)
		return turnNotTaken
	}
	st.mu.Unlock()
	read := s.readAsTaker()
	for read && !st.readerDue(b) {
		// Frames for others, or nothing: the turn stays the Read's,
		// and nobody else is woken for it.
		read = s.readAsTaker()
	}
	s.releaseTurn(st)
	st.mu.Lock()
	if read {
		return turnRead
	}
	return turnGaveBack
}

// readerDue tells whether st's Read, whose buffer is b and which holds
// the conn turn, has something to do other than read on: bytes or an
// end to return, its lent buffer filled, its deadline passed, the
// session's end (what readLocked looks at). Takes st.mu.
func (st *Stream) readerDue(b []byte) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.recv.size > 0 || st.readState != halfOpen || st.closedRead ||
		(st.lend.holds(b) && (st.lend.active || st.lend.filled > 0)) ||
		st.readDeadline.expired() || isClosed(st.session.closedCh)
}

// readAsTaker reads whole frames for a taker: what the buffer holds, or
// one conn read's worth. It reports false when the read loop must go on
// instead (a large frame, the session no longer quiet, an error).
// Turn held.
func (s *Session) readAsTaker() bool {
	t := &s.turn
	if t.err != nil || s.br.err != nil || !s.quietForTurn() {
		notify(t.back)
		return false
	}
	handled := false
	for {
		need := s.nextFrameNeed()
		if need > takerMaxFrame {
			notify(t.back)
			return handled
		}
		if s.br.buffered() < need {
			if handled {
				return true
			}
			s.br.yieldCut = yieldAlways // any cut: the Read looks at its stream
			err := s.br.fill(need)
			s.br.yieldCut = yieldNever
			if err == errTurnYield {
				return true // a cut: the Read looks at its stream
			}
			if err != nil {
				notify(t.back) // the read loop reads the error and ends the session
				return false
			}
			continue
		}
		if err := s.readFrame(false); err != nil {
			t.err = err
			notify(t.back)
			return false
		}
		t.taken.Add(1)
		handled = true
	}
}

// nextFrameNeed returns how many buffered bytes the next yamux frame
// needs to be whole: a header's, or a data frame's header and payload.
func (s *Session) nextFrameNeed() int {
	b := s.br
	if b.buffered() < headerSize {
		return headerSize
	}
	p := b.buf[b.r:b.w]
	if frameType(p[1]) != typeData {
		return headerSize
	}
	return headerSize + int(binary.BigEndian.Uint32(p[8:12]))
}

// releaseTurn returns the turn st's Read held: to a Read that wants it,
// to the read loop while somebody else waits for frames, or leaves it
// free. While only an AcceptStream waits, it leaves the turn free too,
// and st owes the read loop a call (owed): st's end pays it (payOwed),
// the next Read to take the turn cancels it, and turnLoan bounds it.
func (s *Session) releaseTurn(st *Stream) {
	t := &s.turn
	t.holder.Store(nil)
	if t.accepts.Load() > 0 {
		t.owed.Store(st) // before the unlock: the next taker clears it
	}
	t.mu.Unlock()
	switch {
	case t.want.Load() > 0:
		t.owed.CompareAndSwap(st, nil)
		notify(t.free)
	case t.needs.Load() > 0:
		t.owed.CompareAndSwap(st, nil)
		notify(t.back)
	}
}

// payOwed calls the read loop back if st's Read left the turn free while
// an AcceptStream waited (releaseTurn) and nobody took it since: st ends
// (CloseRead, CloseWrite, Reset), and its Read will not come back for
// the turn. Safe on a session with the turn off.
func (t *connTurn) payOwed(st *Stream) {
	if t.on && t.owed.CompareAndSwap(st, nil) {
		notify(t.back)
	}
}

// acceptWaits records an AcceptStream that parks waiting for the peer's
// SYN, and calls the turn back if it is lent and free, as needFrames
// does. Unlike the other waits for frames, it does not make a taker's
// release wake the read loop (releaseTurn; see the top of the file).
func (t *connTurn) acceptWaits() {
	if !t.on {
		return
	}
	t.accepts.Add(1)
	if t.lent.Load() && t.holder.Load() == nil {
		notify(t.back)
	}
}

// acceptDone ends acceptWaits's record.
func (t *connTurn) acceptDone() {
	if t.on {
		t.accepts.Add(-1)
	}
}

// wantTurn records a Read that parks wanting the turn, and cuts the read
// loop's header read if it waits at a quiet moment. It returns the
// channel that tells the Read the turn is free.
func (t *connTurn) wantTurn(cutter *readCutter) chan struct{} {
	t.want.Add(1)
	if t.idle.Load() { // checked again under the cutter's lock
		cutter.cutIdle(&t.idle)
	}
	return t.free
}

// wantDone ends wantTurn's record; tookFree tells that the Read was told
// the turn is free (and goes to take it). A Read that leaves for another
// reason (its data came, its deadline) while the read loop has lent the
// turn for it, and no other Read wants it, calls the turn back: else
// nobody would read until turnLoan.
func (t *connTurn) wantDone(tookFree bool) {
	if t.want.Add(-1) == 0 && !tookFree && t.lent.Load() && t.holder.Load() == nil {
		notify(t.back)
	}
}

// needFrames records a goroutine that waits for frames and won't read
// the conn itself (a Read that may not take the turn, a Write waiting for
// credit, the writer, AcceptStream, OpenStream, Ping), and calls the turn
// back if it is lent and free. Safe on a nil connTurn and on a session
// with the turn off.
func (t *connTurn) needFrames() {
	if t == nil || !t.on {
		return
	}
	t.needs.Add(1)
	if t.lent.Load() && t.holder.Load() == nil {
		notify(t.back)
	}
}

// needDone ends needFrames's record.
func (t *connTurn) needDone() {
	if t == nil || !t.on {
		return
	}
	t.needs.Add(-1)
}

// cutFor cuts the conn read of st's Read if it holds the turn: an event
// of st's own (a deadline set, CloseRead, Reset) must reach it.
func (s *Session) cutFor(st *Stream) {
	if s.turn.on && s.turn.holder.Load() == st {
		s.cutter.cut()
	}
}

// cutHolder cuts a taker's conn read, whoever it is: the session ends.
func (s *Session) cutHolder() {
	if s.turn.on && s.turn.holder.Load() != nil {
		s.cutter.cut()
	}
}
