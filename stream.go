package braid

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// halfState is the state of one direction of a stream.
type halfState uint8

const (
	halfOpen   halfState = iota
	halfClosed           // write: CloseWrite began (its FIN is queued once Stream.finQueued); read: FIN received
	halfLocal            // read only: CloseRead called, incoming bytes are dropped
	halfReset            // reset by either side, or the session ended
)

// windowPriority is the priority of window growth reservations: a larger
// window is nice to have, not needed (go-yamux uses the same).
const windowPriority = 128

// streamPriority is the priority of a new stream's initial window: without
// it the stream can't work at all.
const streamPriority = 255

// Stream is one ordered, flow-controlled byte stream of a Session. It is a
// net.Conn (its addresses are the session connection's), with half-close
// (CloseRead, CloseWrite) and resets carrying an error code. Read and Write
// may be called concurrently with each other and with every other method;
// concurrent Writes are serialized, so their frames never interleave.
type Stream struct {
	id      uint32
	session *Session
	writeMu sync.Mutex // serializes Write and CloseWrite

	mu sync.Mutex // guards every field below up to the deadlines
	// Directions.
	readState  halfState
	writeState halfState
	readBusy   bool // a Read is in progress: other Reads wait for their turn (readTurn)
	closedRead bool // CloseRead (or Close) was called: Read returns ErrStreamClosed, even after the peer's FIN
	needACK    bool // accepted stream whose ACK is not sent yet
	unacked    bool // opened by us, the peer has not ACKed yet
	removed    bool // no longer in the session's stream table
	finQueued  bool // CloseWrite queued the FIN (or failed to): the write side is done, and the stream may leave the table (maybeRemove)
	// (The bools sit together so that a Stream keeps its 416-byte size class.)
	readErr  error // why reads fail once readState is halfReset
	writeErr error // why writes fail once writeState is halfReset; also set by a reset after CloseWrite began (resetLocked), for writeFailure
	// Receiving side of flow control.
	recv       recvBuffer
	rw         recvWindow // the receive window (recvwindow.go)
	reserved   int        // bytes reserved from Config.Memory
	memGone    bool       // removal released reserved; later growth releases its own
	grownIn    bool       // in the session's set of grown streams
	rideQueued bool       // in the session's ride list: a due update waits for a pong (updateride.go)
	reading    bool       // a Read waits for data (handoff.go)
	rideMark   uint32     // the session's markers when the stream's last update was made (updateride.go); in the bools' padding, so a Stream keeps its size class
	lend       *lendSlot  // a waiting Read's buffer, lent to the read loop (lend.go); nil until the first lend
	// mplex push-back (no flow control): the read loop waits for room.
	roomWait chan struct{} // one slot: Read consumed bytes; nil while nobody waits
	lastRead time.Time     // the stream's opening, then its last Read that consumed bytes; without flow control only
	// One-slot notifications, made on first wait (an idle stream has none).
	readWait  chan struct{} // the Read in progress: data, an end, a lent buffer back
	writeWait chan struct{}
	readTurn  chan struct{} // a Read waiting while another is in progress; made on first contention

	readDeadline  deadline
	writeDeadline deadline

	// The send state, owned by the session's writer and guarded by its mu
	// (sendqueue.go), the send credit included: touched only through the
	// writer's calls.
	send streamSend
}

// newStream makes a stream whose receive window is window, of which
// charged bytes are held from the session budget, and reserved bytes from
// Config.Memory. Its updates may wait for a pong only once a marker comes
// after its opening (rideMark, updateride.go).
func newStream(sess *Session, id uint32, window, charged uint32, reserved int) *Stream {
	return &Stream{
		id:       id,
		session:  sess,
		rw:       newRecvWindow(window, charged),
		reserved: reserved,
		rideMark: sess.markers.Load(),
		send:     streamSend{window: InitialStreamWindow},
	}
}

// ID returns the stream id: odd for streams the client opened, even for the
// server's.
func (s *Stream) ID() uint32 { return s.id }

// Session returns the session the stream belongs to.
func (s *Stream) Session() *Session { return s.session }

// LocalAddr returns the local address of the session's connection.
func (s *Stream) LocalAddr() net.Addr { return s.session.conn.LocalAddr() }

// RemoteAddr returns the remote address of the session's connection.
func (s *Stream) RemoteAddr() net.Addr { return s.session.conn.RemoteAddr() }

// notify wakes one waiter on c, if it was made. mu held.
func notify(c chan struct{}) {
	if c != nil {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func waitChan(c *chan struct{}) chan struct{} {
	if *c == nil {
		*c = make(chan struct{}, 1)
	}
	return *c
}

// Read reads what the peer sent. It returns io.EOF after the peer's
// CloseWrite and the last byte; a *StreamError after a reset; an error
// matching ErrStreamReset (never io.EOF) when the session died first;
// ErrStreamClosed after CloseRead or Close; os.ErrDeadlineExceeded when the
// read deadline passes.
//
// On a TCP or Unix conn (also under crypto/tls), a Read that waits with a
// buffer of 16 KiB or more lends it to the session: the next data frame's
// payload is read from the conn straight into b, saving a copy
// (Stats.BytesLent counts those bytes). The Read still returns at its
// deadline, reset or close, with the bytes that came.
//
// Concurrent Reads take turns: one waits for data while the others wait
// for it to return (each still ends at its deadline), so every Read sees
// the stream's end and no wake-up meant for one is lost to another.
func (s *Stream) Read(b []byte) (int, error) {
	s.mu.Lock()
	turn := len(b) > 0 // a zero-length Read waits for nothing: it takes no turn
	if turn {
		if s.readBusy && !s.awaitReadTurnLocked() {
			s.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		s.readBusy = true
	}
	n, buffered, err := s.readLocked(b)
	if turn {
		s.endReadLocked()
	}
	if buffered {
		s.consumedAndUnlock(uint32(n))
	} else {
		s.mu.Unlock()
	}
	return n, err
}

// readLocked is Read's turn: it waits until it has bytes or an end to
// return. buffered tells that the n bytes came out of the stream's
// buffer, to be consumed (lent bytes were consumed as the read loop gave
// them back, giveBack). mu held on entry and on return; released while
// waiting.
func (s *Stream) readLocked(b []byte) (n int, buffered bool, err error) {
	gaveBack := false // this look follows a turn given back to the read loop: park
	for {
		if s.lend.holds(b) {
			if s.lend.active {
				s.awaitLentLocked()
				continue
			}
			if n := s.lend.take(); n > 0 {
				return n, false, nil
			}
		}
		switch {
		case s.readState == halfLocal || s.closedRead:
			return 0, false, ErrStreamClosed
		case s.readDeadline.expired():
			// Before buffered bytes, as SetDeadline promises and TCP
			// does: they stay for the next Read. (A lent buffer's bytes,
			// above, are the caller's already.)
			return 0, false, os.ErrDeadlineExceeded
		case s.recv.size > 0:
			return s.recv.read(b), true, nil
		case s.readState == halfClosed:
			return 0, false, io.EOF
		case s.readState == halfReset:
			return 0, false, s.readErr
		case len(b) == 0:
			return 0, false, nil
		}
		s.offerLocked(b)
		sess := s.session
		try := turnNotTaken
		if sess.turn.on && !gaveBack {
			switch try = sess.tryReadTurn(s, b); try {
			case turnRead:
				continue // it read the conn itself (turn.go)
			case turnGaveBack:
				// mu was released: look again (a wake-up
				// meanwhile found no waiter), then park.
				gaveBack = true
				continue
			}
		}
		gaveBack = false
		wait := waitChan(&s.readWait)
		s.reading = true
		s.mu.Unlock()
		var free chan struct{}
		if try == turnBusy {
			free = sess.turn.wantTurn(sess.cutter)
		} else {
			sess.turn.needFrames() // a Read that won't read the conn waits for the read loop to
		}
		sess.w.waker.readerWaits()
		tookFree := false
		select {
		case <-wait:
		case <-s.readDeadline.wait():
		case <-free: // the turn is free: look again, and take it
			tookFree = true
		}
		sess.w.waker.readerDone()
		if free != nil {
			sess.turn.wantDone(tookFree)
		} else {
			sess.turn.needDone()
		}
		s.mu.Lock()
		s.reading = false
	}
}

// awaitReadTurnLocked waits until no other Read is in progress; it
// reports false if the read deadline passed first. mu held on entry and
// on return; released while waiting.
func (s *Stream) awaitReadTurnLocked() bool {
	turn := waitChan(&s.readTurn)
	for s.readBusy {
		if s.readDeadline.expired() {
			return false
		}
		s.mu.Unlock()
		select {
		case <-turn:
		case <-s.readDeadline.wait():
		}
		s.mu.Lock()
	}
	return true
}

// endReadLocked ends the Read in progress and wakes a Read waiting for
// its turn, if any ever waited (a token nobody takes costs the next
// waiter one more look). mu held.
func (s *Stream) endReadLocked() {
	s.readBusy = false
	notify(s.readTurn)
}

// consumedAndUnlock accounts n bytes the application consumed (or the
// stream dropped), unlocks mu, and gives the peer its credit back when
// the window says so, with any growth: memory and session budget are
// reserved after mu is released. mu held on entry, released on return.
func (s *Stream) consumedAndUnlock(n uint32) {
	sess := s.session
	if !sess.caps.flowControl {
		// The read loop may wait for room (mplex push-back); the clock
		// read tells it the reader is still reading.
		s.lastRead = time.Now()
		notify(s.roomWait)
		s.mu.Unlock()
		return
	}
	final := s.readFinalLocked()
	rule := s.updateRuleLocked()
	update, release := s.rw.consumed(n, final, rule)
	var want, cost uint32
	if !final && s.readState == halfOpen {
		if want = s.rw.wantGrowth(&sess.env); want > 0 {
			cost = s.rw.budgetCost(want)
		}
	}
	if want == 0 {
		h := s.updateLocked(update)
		queue := s.queueRideLocked(rule == updateRide, h.length)
		s.mu.Unlock()
		sess.releaseBudget(release)
		if queue {
			s.joinRides()
		}
		s.sendWindowUpdate(h)
		return
	}
	s.mu.Unlock()
	sess.releaseBudget(release)
	g, charged := sess.reserveGrowth(want, cost)
	s.mu.Lock()
	update += s.rw.grew(g, charged, s.readFinalLocked(), rule)
	mem, budget := s.keepReservedLocked(g)
	track := s.joinGrownLocked(s.rw.grown())
	h := s.updateLocked(update)
	queue := s.queueRideLocked(rule == updateRide, h.length)
	s.mu.Unlock()
	sess.releaseMemory(int(mem)) // the stream was removed meanwhile
	sess.releaseBudget(budget)
	if track {
		sess.trackGrown(s)
	}
	if queue {
		s.joinRides()
	}
	s.sendWindowUpdate(h)
}

// joinGrownLocked marks the stream as in the session's set of grown
// streams when its window grew (grown) and it is neither there already
// nor removed (a removed stream's releaseStream has run, and would not
// take it out again); the caller, with mu released, adds it
// (trackGrown) when this returns true. mu held.
func (s *Stream) joinGrownLocked(grown bool) bool {
	join := grown && !s.grownIn && !s.removed
	s.grownIn = s.grownIn || join
	return join
}

// readFinalLocked reports whether the peer will send nothing more that
// needs credit. mu held.
func (s *Stream) readFinalLocked() bool {
	return s.readState == halfReset || s.readState == halfClosed
}

// updateLocked returns the window update frame for delta; a zero header
// for none. mu held.
func (s *Stream) updateLocked(delta uint32) header {
	if delta == 0 {
		return header{}
	}
	return header{typ: typeWindowUpdate, flags: s.takeFlagsLocked(), streamID: s.id, length: delta}
}

// keepReservedLocked adds a growth of g bytes, reserved from the memory
// manager, to the stream; once removal released the stream's memory and
// budget, it returns them (g, and the budget the growth charged) for the
// caller to release instead. mu held.
func (s *Stream) keepReservedLocked(g uint32) (mem, budget uint32) {
	if !s.memGone {
		s.reserved += int(g)
		return 0, 0
	}
	budget, s.rw.charged = s.rw.charged, 0
	return g, budget
}

// takeReservedLocked hands over everything the stream holds from the
// memory manager and the session budget, once, at removal. mu held.
func (s *Stream) takeReservedLocked() (mem int, budget uint32) {
	s.memGone = true
	mem, s.reserved = s.reserved, 0
	budget, s.rw.charged = s.rw.charged, 0
	return mem, budget
}

// takeFlagsLocked returns the flags the next frame we send must carry: ACK
// on the first frame of an accepted stream. mu held.
func (s *Stream) takeFlagsLocked() frameFlags {
	if s.needACK {
		s.needACK = false
		return flagACK
	}
	return 0
}

// sendWindowUpdate queues a window update (control frames jump the
// queue); a zero header is no update.
func (s *Stream) sendWindowUpdate(h header) {
	if h.length == 0 {
		return
	}
	// An error means the session is closing; the stream learns it there.
	_ = s.session.w.queueCallCtrl(h)
}

// Write writes b to the stream and returns once braid no longer needs b:
// the caller may reuse it at once. It blocks while the peer's receive
// window is exhausted. A zero-length b writes nothing; it returns the
// error a Write would fail with at once (a closed or reset stream, an
// ended session, a past write deadline), else nil.
//
// b is sent in frames of at most Config.MaxBatchBytes and what the window
// allows (up to four times MaxBatchBytes while this stream alone sends on
// a fast conn). A frame of 16 KiB or more is written to the connection
// from b itself (with writev where the connection supports it), not
// copied, and Write waits for that write; on a TCP or Unix conn with no
// other frame queued, Write makes that write itself. A smaller frame is
// copied, and so is a Write of less than 32 KiB while its stream is the
// only one sending (from the session's start, or for 50 ms), so that the
// Writes after it coalesce with it; Write then waits only for room in the
// stream's send queue, and when
// the session's writer has nothing to write and the session received a
// frame since its last write (a request-response exchange), Write writes
// the frame itself. Stats.InlineWrites counts the writes a Write made
// itself. While the write deadline comes before the connection's write
// timeout would end a blocked conn write, Write makes no write itself and
// copies every frame, large ones too: a peer that stopped reading then
// cannot hold it past its deadline.
//
// Write returns ErrStreamClosed after CloseWrite or Close, a *StreamError
// after a reset, an error matching ErrStreamReset when the session died,
// and os.ErrDeadlineExceeded when the write deadline passes. The n bytes it
// reports with an error are queued and will still be sent, unless the
// stream is reset or the session dies.
func (s *Stream) Write(b []byte) (int, error) {
	if len(b) == 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return 0, s.writeCheckLocked()
	}
	w := s.session.w
	if n := len(b); n > 0 && n <= w.smallMax && !s.writeDeadline.expired() {
		if ok, err := w.sendSmall(&s.send, s.id, b); ok {
			if err != nil {
				return 0, s.writeFailure(err)
			}
			return n, nil
		}
	}
	return s.writeFull(b)
}

// writeFull is Write's full path: it holds writeMu for all of b's frames,
// waits for credit and for room, and knows why a write fails. Once it is
// done, small Writes may take sendSmall again if the stream allows it.
func (s *Stream) writeFull(b []byte) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	defer s.endWrite()
	w := s.session.w
	written, write := 0, len(b)
	// A mid-size Write is copied whole while its stream sends alone
	// (alone.go); the rest of a larger Write that its credit cut is not.
	copyMid := len(b) >= refThreshold && len(b) < loneCopyMax && w.copiesMidWrite(s.id)
	for len(b) > 0 {
		byRef := len(b) >= refThreshold && w.blockingWriteAllowed(&s.send) && !copyMid
		n, flags, err := s.awaitCredit(len(b), byRef)
		if err != nil {
			return written, err
		}
		h := header{typ: typeData, flags: flags, streamID: s.id, length: uint32(n)}
		if !byRef || n < refThreshold {
			if err := w.send(&s.send, h, b[:n], write, s.writeDeadline.wait()); err != nil {
				s.giveBackCredit(n)
				return written, s.writeFailure(err)
			}
		} else {
			// The whole credit at once: the writer takes it a frame at
			// a time, and Write waits once.
			if queued, err := w.sendRef(&s.send, h, b[:n], s.writeDeadline.wait()); err != nil {
				if !queued {
					s.giveBackCredit(n)
				}
				return written, s.writeFailure(err)
			}
		}
		written += n
		b = b[n:]
	}
	return written, nil
}

// awaitCredit waits until the stream may send, and takes up to want bytes
// of send window: at most one batch for a copied write, so that streams
// take turns; all of it for a write by reference (whole), which the writer
// splits into frames and serves in turns itself.
func (s *Stream) awaitCredit(want int, whole bool) (int, frameFlags, error) {
	quantum := s.session.cfg.MaxBatchBytes
	flowControl := s.session.caps.flowControl
	if m := s.session.caps.maxDataFrame; m > 0 {
		quantum = min(quantum, m)
	}
	if whole {
		quantum = maxRefWrite
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if err := s.writeCheckLocked(); err != nil {
			return 0, 0, err
		}
		if !flowControl {
			return min(want, quantum), s.takeFlagsLocked(), nil
		}
		if n := s.session.w.takeCredit(&s.send, min(want, quantum)); n > 0 {
			return n, s.takeFlagsLocked(), nil
		}
		// Made only now that the Write must wait (a stream whose
		// credit suffices never makes it): a window update adds credit
		// and notifies with mu held (addSendWindow), so none can come
		// between the look at the credit above and the wait below.
		wait := waitChan(&s.writeWait)
		s.mu.Unlock()
		s.session.turn.needFrames() // credit comes as window updates (turn.go)
		select {
		case <-wait:
		case <-s.writeDeadline.wait():
		}
		s.session.turn.needDone()
		s.mu.Lock()
	}
}

// writeCheckLocked returns the error a Write fails with at once: the
// write side closed, reset (by either side, or the session's end), or the
// write deadline past; nil while the stream may send. mu held.
func (s *Stream) writeCheckLocked() error {
	switch {
	case s.writeState == halfClosed || s.writeState == halfLocal:
		return ErrStreamClosed
	case s.writeState == halfReset:
		return s.writeErr
	case s.writeDeadline.expired():
		return os.ErrDeadlineExceeded
	}
	return nil
}

// maxRefWrite bounds the bytes one by-reference write hands the writer
// where no window does (mplex): the caller's memory, held until written.
const maxRefWrite = 16 << 20

// giveBackCredit returns send window taken for bytes that were not queued.
func (s *Stream) giveBackCredit(n int) {
	if s.session.caps.flowControl {
		s.session.w.addCredit(&s.send, uint32(n))
	}
}

// endWrite ends writeFull: small Writes may take sendSmall again
// (writer.setDirect) when the stream's state allows it: its write side
// open, its first frame's flags sent, flow control on.
func (s *Stream) endWrite() {
	if !s.session.caps.flowControl {
		return
	}
	s.mu.Lock()
	if s.writeState == halfOpen && !s.needACK {
		s.session.w.setDirect(&s.send, true)
	}
	s.mu.Unlock()
}

// writeFailure maps an error of the writer to what Write and CloseWrite
// return: the stream's reset if one dropped its queue, else the session's end.
func (s *Stream) writeFailure(err error) error {
	if err == os.ErrDeadlineExceeded {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writeState == halfReset || err == ErrStreamReset && s.writeErr != nil {
		return s.writeErr
	}
	return streamCutError(s.session.closeError(err))
}

// CloseWrite half-closes the stream: the peer reads io.EOF after the bytes
// written so far. Reads keep working. On a stream already half-closed,
// or reset by this side, it does nothing; on one the peer reset, or whose
// session ended, it returns the error Write returns there: what was
// written may not have arrived.
func (s *Stream) CloseWrite() error {
	// Close the write side first, so that a Write blocked on the peer's
	// window wakes with ErrStreamClosed and lets go of writeMu; then the
	// FIN queues after the last frame that Write queued.
	s.mu.Lock()
	if s.writeState != halfOpen {
		var err error
		se, isReset := s.writeErr.(*StreamError)
		if s.writeState == halfReset && !(isReset && !se.Remote) {
			// The peer's reset or the session's end, as Write reports it
			// (go-yamux's CloseWrite does too): the data written may not
			// have arrived. After our own Reset, nothing to report.
			err = s.writeErr
		}
		s.mu.Unlock()
		return err
	}
	s.writeState = halfClosed
	s.session.w.setDirect(&s.send, false)
	notify(s.writeWait)
	s.mu.Unlock()
	s.session.turn.payOwed(s)
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	flags := s.takeFlagsLocked() | flagFIN
	s.mu.Unlock()
	s.writeDeadline.stop()
	// The FIN travels with the data frames, so it never overtakes them.
	err := s.session.w.send(&s.send, header{typ: typeWindowUpdate, flags: flags, streamID: s.id}, nil, 0, nil)
	s.mu.Lock()
	s.finQueued = true
	s.mu.Unlock()
	s.maybeRemove()
	if err != nil {
		return s.writeFailure(err) // a reset meanwhile (resetLocked) or the session's end
	}
	return nil
}

// CloseRead stops reading: buffered and later incoming bytes are dropped
// (and credited back, so the peer never stalls on them), and Read returns
// ErrStreamClosed. Writes keep working.
func (s *Stream) CloseRead() error {
	s.mu.Lock()
	if s.readState == halfReset || s.closedRead {
		s.mu.Unlock()
		return nil
	}
	s.closedRead = true
	if s.readState == halfOpen {
		s.readState = halfLocal
	} // else the peer's FIN came: nothing more to credit, the rest is dropped too
	dropped := s.recv.reset()
	notify(s.readWait)
	notify(s.roomWait)
	s.consumedAndUnlock(uint32(dropped))
	s.session.cutFor(s) // a Read reading the conn returns (turn.go)
	s.session.turn.payOwed(s)
	s.readDeadline.stop()
	s.maybeRemove()
	return nil
}

// Close closes both directions: CloseRead, then CloseWrite. A Read in
// progress returns ErrStreamClosed at once, as net.Conn's Close promises,
// while CloseWrite may wait for a Write of the stream the connection has
// not taken yet. To abort a stream instead, use Reset.
func (s *Stream) Close() error {
	_ = s.CloseRead() // never fails
	return s.CloseWrite()
}

// Reset aborts the stream in both directions with error code 0.
func (s *Stream) Reset() error { return s.ResetWithError(0) }

// ResetWithError aborts the stream in both directions and tells the peer
// code (yamux carries it in the RST frame; mplex can't carry a code, so
// there the peer sees 0). Pending and later calls return a *StreamError
// with Remote false; the peer's return one with Remote true. Resetting a
// stream that is already reset, or whose both directions have ended (the
// peer's FIN received, and CloseWrite's FIN queued), does nothing; a
// Reset while CloseWrite waits behind a Write fails both.
func (s *Stream) ResetWithError(code uint32) error {
	s.mu.Lock()
	if s.readState != halfOpen && s.readState != halfLocal && s.writeDoneLocked() {
		s.mu.Unlock()
		return nil
	}
	err := &StreamError{ErrorCode: code}
	s.resetLocked(err)
	s.mu.Unlock()
	s.session.cutFor(s) // a Read reading the conn returns (turn.go)
	s.session.turn.payOwed(s)
	// Drop before queuing the RST: a batch taken between the two would
	// put the RST (control first) ahead of the data still queued.
	s.session.w.drop(&s.send)
	_ = s.session.w.queueCallCtrl(header{typ: typeWindowUpdate, flags: flagRST, streamID: s.id, length: code})
	s.maybeRemove()
	return nil
}

// resetLocked moves every direction still open to halfReset with err and
// drops buffered bytes. mu held.
func (s *Stream) resetLocked(err error) {
	if s.readState == halfOpen || s.readState == halfLocal {
		s.readState = halfReset
		s.readErr = err
		s.recv.reset()
	}
	if s.writeState == halfOpen {
		s.writeState = halfReset
		s.writeErr = err
		s.session.w.setDirect(&s.send, false)
	} else if s.writeErr == nil {
		// A CloseWrite (or its Write) may still be queuing its last
		// frames, which the reset drops: they fail with this error
		// (writeFailure), not a session's.
		s.writeErr = err
	}
	notify(s.readWait)
	notify(s.writeWait)
	notify(s.roomWait)
}

// writeDoneLocked tells whether the write direction is done: reset or
// failed (writeErr, which only a reset or the session's end sets, also
// after CloseWrite began: resetLocked), or its FIN queued. Not merely
// CloseWrite begun (halfClosed): its FIN may still wait behind a Write's
// frames, and until it is queued the peer's RST must find the stream, to
// fail them (a stream taken out of the table then, by the read loop's
// look after the peer's FIN, dropped the RST, and CloseWrite returned nil
// on a stream the peer had reset); and once either side reset it, a
// Reset of ours has nothing more to send. mu held.
func (s *Stream) writeDoneLocked() bool {
	return s.writeState == halfReset || s.writeErr != nil || s.finQueued
}

// maybeRemove takes the stream out of the session once both directions are
// done.
func (s *Stream) maybeRemove() {
	s.mu.Lock()
	done := !s.removed && s.readState != halfOpen && s.writeDoneLocked()
	if done {
		s.removed = true
	}
	reset := s.writeState == halfReset
	s.mu.Unlock()
	if done {
		s.session.removeStream(s)
		// Both directions are done, so the deadlines' timers would
		// only keep the stream reachable. The write deadline's is
		// CloseWrite's to stop once it holds writeMu: a Write that
		// began before it may still wait in the writer's queue, and
		// its deadline must still fire. A reset failed every Write.
		s.readDeadline.stop()
		if reset {
			s.writeDeadline.stop()
		}
	}
}

// SetDeadline sets the read and write deadlines, as SetReadDeadline and
// SetWriteDeadline do. The zero time means no deadline; a time in the past
// makes pending and later calls fail with os.ErrDeadlineExceeded.
func (s *Stream) SetDeadline(t time.Time) error {
	s.readDeadline.setRead(t, s)
	s.session.cutFor(s) // a Read reading the conn looks at its new deadline (turn.go)
	return s.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for Read calls, pending ones included.
func (s *Stream) SetReadDeadline(t time.Time) error {
	s.readDeadline.setRead(t, s)
	s.session.cutFor(s) // a Read reading the conn looks at its new deadline (turn.go)
	return nil
}

// SetWriteDeadline sets the deadline for Write calls, pending ones included.
func (s *Stream) SetWriteDeadline(t time.Time) error {
	s.session.w.setWriteDeadline(&s.send, t)
	s.writeDeadline.set(t)
	return nil
}

// The handlers below run on the session's read loop.

// admission is what the read loop may do with a data frame's payload.
type admission uint8

const (
	admitOK             admission = iota
	admitForReader                // admitted, and a Read waits for it (admitSmall)
	admitWindowExceeded           // more than the credit granted: protocol error
	admitAfterFIN                 // the peer already closed its side: protocol error (mplex: dropped)
	admitOverflow                 // no flow control and the buffer bound is reached: reset
)

// admit checks, under one lock, whether the peer may send n more bytes on
// s. A stream whose read side is gone still counts credit: the peer was
// granted it. Without flow control, the receive buffer's bound stands in
// for the credit: a buffer holding bytes may take n more only within
// Config.MaxReceiveBuffer (an empty one takes any frame).
func (s *Stream) admit(n uint32) admission {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admitLocked(n)
}

// admitLocked is admit with mu held.
func (s *Stream) admitLocked(n uint32) admission {
	switch {
	case s.readState == halfClosed:
		return admitAfterFIN
	case !s.session.caps.flowControl:
		if s.readState == halfOpen && s.recv.size > 0 && s.recv.size+int(n) > s.session.cfg.MaxReceiveBuffer {
			return admitOverflow
		}
	case !s.rw.admit(n):
		return admitWindowExceeded
	}
	return admitOK
}

// awaitRoom is the mplex push-back (no flow control): the read loop,
// holding a frame of n bytes that doesn't fit in s's receive buffer,
// stops reading the connection (so TCP pushes back on the sender) and
// waits for s's reader to make room. It waits while the reader keeps
// reading: until Config.MaxReceiveStall has passed since its last Read
// (or since the stream was opened, if it never read). It returns false
// when that time ran out and s is to be reset, true when the frame may be
// taken (room was made, or the read side is gone and the frame will be
// dropped).
func (s *Stream) awaitRoom(n uint32) bool {
	stall := s.session.cfg.MaxReceiveStall
	t := stallTimer{stalls: &s.session.stalls}
	defer t.stop()
	s.mu.Lock()
	for {
		if s.readState != halfOpen || s.recv.size == 0 || s.recv.size+int(n) <= s.session.cfg.MaxReceiveBuffer {
			s.mu.Unlock()
			return true
		}
		left := stall - time.Since(s.lastRead)
		if left <= 0 {
			s.mu.Unlock()
			return false
		}
		wait := waitChan(&s.roomWait)
		s.mu.Unlock()
		if t.wait(left, wait, s.session.closedCh) {
			return true // the frame is dropped with the session
		}
		s.mu.Lock()
	}
}

// overflow resets a stream whose unread bytes would exceed the receive
// buffer bound (protocols without flow control).
func (s *Stream) overflow() {
	s.mu.Lock()
	s.resetLocked(ErrReceiveBufferOverflow)
	s.mu.Unlock()
	s.session.w.drop(&s.send) // before the RST, as in ResetWithError
	_ = s.session.w.queueCtrl(header{typ: typeWindowUpdate, flags: flagRST, streamID: s.id}, nil)
	s.maybeRemove()
}

// receive takes a data frame's payload, the chunks of f in order (a read
// buffer handed over and the rest read into pooled buffers; any may be
// empty). The stream owns their buffers now.
func (s *Stream) receive(f *frameChunks) {
	n := f.size()
	s.mu.Lock()
	if s.receivedLocked(n) {
		s.readerWokenLocked()
		for _, c := range f {
			s.recv.push(c)
		}
		notify(s.readWait)
		s.mu.Unlock()
		return
	}
	f.release()
	s.consumedAndUnlock(uint32(n))
}

// admitSmall is admit and receiveSmall under one lock, for a small frame
// under flow control (Session.receiveBufferedSmall): the payload p is
// buffered when the frame is admitted, and admitForReader says a Read
// waits for it.
func (s *Stream) admitSmall(p []byte) admission {
	s.mu.Lock()
	if a := s.admitLocked(uint32(len(p))); a != admitOK {
		s.mu.Unlock()
		return a
	}
	if s.receiveSmallAndUnlock(p) {
		return admitForReader
	}
	return admitOK
}

// receiveSmall is receive for a payload of at most maxSmallPayload bytes
// that stays the caller's: it is copied into the stream's buffer. It
// reports whether a Read waits for it.
func (s *Stream) receiveSmall(p []byte) bool {
	s.mu.Lock()
	return s.receiveSmallAndUnlock(p)
}

// receiveSmallAndUnlock is receiveSmall with mu held on entry; it releases
// it.
func (s *Stream) receiveSmallAndUnlock(p []byte) (reader bool) {
	if s.receivedLocked(len(p)) {
		reader = s.reading
		s.readerWokenLocked()
		s.recv.pushSmall(p)
		notify(s.readWait)
		s.mu.Unlock()
		return reader
	}
	s.consumedAndUnlock(uint32(len(p)))
	return false
}

// readerWokenLocked restarts the mplex push-back's clock (lastRead) when
// the bytes about to be buffered wake a Read that waits for them: that
// reader is reading, and a burst that fills the buffer before it runs
// must not count the time it waited for data as a stall (awaitRoom). Only
// without flow control; called before the bytes are buffered. mu held.
func (s *Stream) readerWokenLocked() {
	if !s.session.caps.flowControl && s.reading && s.recv.size == 0 {
		s.lastRead = time.Now()
	}
}

// receivedLocked accounts n bytes received and tells whether someone will
// read them; if not, the caller drops them and gives the credit back with
// consumedAndUnlock. mu held.
func (s *Stream) receivedLocked(n int) bool {
	if s.session.caps.flowControl {
		s.rw.received(uint32(n), &s.session.env)
	}
	return s.readState == halfOpen
}

// addSendWindow adds a window update's delta; false if it would overflow
// the 32-bit window, which is a protocol error.
func (s *Stream) addSendWindow(delta uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.session.w.addCredit(&s.send, delta) {
		return false
	}
	if delta > 0 {
		notify(s.writeWait)
	}
	return true
}

// acked handles the peer's ACK; it reports whether the stream was waiting
// for one (and so leaves the ACK backlog).
func (s *Stream) acked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.unacked
	s.unacked = false
	return was
}

// remoteFIN handles the peer's FIN.
func (s *Stream) remoteFIN() {
	s.mu.Lock()
	switch s.readState {
	case halfOpen:
		s.readState = halfClosed
		notify(s.readWait)
	case halfLocal:
		s.readState = halfClosed
	}
	s.mu.Unlock()
	s.maybeRemove()
}

// remoteReset handles the peer's RST with its error code.
func (s *Stream) remoteReset(code uint32) {
	s.mu.Lock()
	s.resetLocked(&StreamError{ErrorCode: code, Remote: true})
	s.mu.Unlock()
	s.session.w.drop(&s.send) // the peer discards them anyway
	s.maybeRemove()
}

// sessionEnding fails what is still open of the stream with err as the
// session starts to close, before its flush and linger (Session.shutdown):
// a waiting Read returns at once, as a net.Conn's does at Close, and a
// Read whose buffer the read loop is filling asks for a cut
// (awaitLentLocked); buffered bytes stay readable, then Read returns err
// (ErrStreamClosed where the application closed the read side). Writes
// from now on fail with err too, and so does a Write waiting for credit;
// frames already queued are still flushed (a Write waiting for them
// returns once they are written).
func (s *Stream) sessionEnding(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.readState {
	case halfOpen:
		s.readState = halfReset
		s.readErr = err
	case halfLocal:
		s.readState = halfReset
		s.readErr = ErrStreamClosed
	}
	if s.writeState == halfOpen {
		s.writeState = halfReset
		s.writeErr = err
		s.session.w.setDirect(&s.send, false)
	}
	notify(s.readWait)
	notify(s.writeWait)
}

// sessionEnded marks the stream removed once the session has ended (its
// frames flushed, its goroutines gone; sessionEnding failed it before)
// and stops its deadline timers.
func (s *Stream) sessionEnded() {
	s.mu.Lock()
	s.removed = true
	s.mu.Unlock()
	s.readDeadline.stop()
	s.writeDeadline.stop()
}
