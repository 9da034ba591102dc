package braid

import "sync"

// Window updates that ride with pongs.
//
// A receiver that returns a large window in eighths (updateThreshold)
// writes an update every eighth of it, and the update is a write, a
// record over TLS, and a read on the sender's side, of its own: the
// consumption that makes it due comes from the application's Read, after
// the read loop has read the data and the writer has already written the
// pong of the marker that followed it (inflight.go). At one P a trace of
// one-stream bulk with 8 KiB reads showed two such writes a turn, the
// pong's and then the update's, over TCP as over TLS (session 19).
//
// So where updates ride (Session.updates is updateRide), an update due at
// updateThreshold waits for the next pong the session writes, a marker's
// or a ping's, and goes in the same write (writer.queuePongWith); it is
// written on its own only from aloneThreshold on (half the window,
// go-yamux's rule). It waits only while pongs are coming: when a marker
// came since the stream's opening or its last update (Session.markers,
// Stream.rideMark).
// A braid peer whose data brings markers more often than an eighth of the
// window (a fast link, where its in-flight budget binds: loopback, a LAN)
// gets every update with a pong; a peer that sends no markers (go-yamux,
// or braid with its in-flight bound off, or on a link too slow for the
// budget to bind, where markers come megabytes apart) gets its updates in
// eighths as before, at most one of them late per marker. A sender
// stalled for credit sends nothing, so no marker, but then the receiver's
// application reads what it holds and the update goes at half the window
// at the latest: no stall outlasts what the reader holds.
//
// Not where the read loop is busy (TLS or noise at more than one P,
// writer.busyReadLoop): there the sender's four-budget lone flow needs its
// credit back sooner, not later (paired runs, session 19: one-stream TLS
// bulk at two P x0.90 with riding updates), and since session 48 it gets
// it every eagerUpdateBytes read (updateEager, recvwindow.go).
//
// Lock order: Stream.mu is never held while rideList.mu is taken, nor the
// reverse.

// rideList is the streams whose due update waits for the next pong. A
// stream is in it at most once (Stream.rideQueued, under the stream's mu),
// and joins it only after a marker came since its opening or its last
// update (updateRuleLocked; newStream starts rideMark at the session's
// count): if the peer's markers stop, the streams opened after the last
// one never join, so the list holds at most the streams that were open
// then, until the next pong (a closed stream's entry included), and does
// not grow with the streams opened and closed after.
type rideList struct {
	mu      sync.Mutex // guards streams
	streams []*Stream
	spare   []*Stream // the read loop's: the last list taken, emptied
}

// add appends st, whose rideQueued the caller just set.
func (l *rideList) add(st *Stream) {
	l.mu.Lock()
	l.streams = append(l.streams, st)
	l.mu.Unlock()
}

// joinRides adds s, whose rideQueued queueRideLocked just set, to its
// session's ride list, with s.mu released (the lock order above). The
// stream may have left the table between the unlock and the add: the
// peer's FIN came, maybeRemove marked it removed, and releaseStream's
// remove found nothing to take. So the add looks at removed again after,
// and takes the entry out itself: either it sees removed, or the removal
// came after the add and releaseStream's remove finds the entry. An entry
// left behind would keep the closed stream alive in a session that then
// goes idle with no pong coming (TestClosedStreamsAreCollected failed so
// for 1 run in 30 under -race). No lock held.
func (s *Stream) joinRides() {
	s.session.rides.add(s)
	if s.isRemoved() {
		s.session.rides.remove(s)
	}
}

// isRemoved tells whether the stream has left its session's table, for a
// caller that just added it to a set of the session's with s.mu released
// (joinRides, trackGrown): a removal it raced with took nothing out of
// that set. No lock held.
func (s *Stream) isRemoved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removed
}

// remove takes st, which is leaving the session's table, out of the
// list: with no pong coming (an idle session, keep-alive off) its entry
// would keep the closed stream alive. The list holds at most the open
// streams whose update waits, so a scan does. A stream not found is in
// the slice the read loop took (take), which lets it go after its pass,
// or not added yet: its Read's joinRides takes it out again.
func (l *rideList) remove(st *Stream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.streams {
		if x == st {
			last := len(l.streams) - 1
			l.streams[i] = l.streams[last]
			l.streams[last] = nil
			l.streams = l.streams[:last]
			return
		}
	}
}

// take returns the streams queued so far and empties the list. The slice
// is valid until the next take; only the read loop calls it.
func (l *rideList) take() []*Stream {
	l.mu.Lock()
	got := l.streams
	l.streams = l.spare[:0]
	l.mu.Unlock()
	l.spare = got
	return got
}

// sessionUpdateRule returns how a session's window updates go back:
// they ride with pongs (updateRide), unless the writer's read loop is
// busy (see the top of the file), where they go eagerly (updateEager,
// recvwindow.go). Without flow control (mplex) there are none.
func sessionUpdateRule(caps capabilities, w *writer) updateRule {
	switch {
	case !caps.flowControl:
		return updateEighths
	case w.busyReadLoop():
		return updateEager
	}
	return updateRide
}

// updateRuleLocked returns the rule s's next update follows: the
// session's, but where that is updateRide, only while a marker came since
// s's last update, so that pongs are coming; else updateEighths. s.mu
// held.
func (s *Stream) updateRuleLocked() updateRule {
	r := s.session.updates
	if r == updateRide && s.session.markers.Load() == s.rideMark {
		return updateEighths
	}
	return r
}

// queueRideLocked records an update of sent bytes just made (its marker
// count), or, when none was made and ride allowed waiting, marks s for the
// ride list if its update is due and it is not there yet; it reports
// whether the caller, with s.mu released, must add it (rides.add). s.mu
// held.
func (s *Stream) queueRideLocked(ride bool, sent uint32) bool {
	if sent > 0 {
		s.rideMark = s.session.markers.Load()
		return false
	}
	if !ride || s.rideQueued || s.readState != halfOpen || !s.rw.rideDue() {
		return false
	}
	s.rideQueued = true
	return true
}

// takeRides appends to dst the due updates of the streams in the ride
// list, for the pong about to be queued. Called by the read loop.
func (s *Session) takeRides(dst []header) []header {
	for _, st := range s.rides.take() {
		st.mu.Lock()
		st.rideQueued = false
		var delta uint32
		if st.readState == halfOpen {
			delta = st.rw.takeRide()
		}
		if delta > 0 {
			st.rideMark = s.markers.Load()
		}
		h := st.updateLocked(delta)
		st.mu.Unlock()
		if h.length > 0 {
			dst = append(dst, h)
		}
	}
	clear(s.rides.spare) // no stream kept reachable from the spare slice
	return dst
}

// queuePong queues the pong of ping id, with the updates that ride on it.
// Called by the read loop.
func (s *Session) queuePong(id uint32) {
	if s.updates == updateRide {
		if s.rideBuf = s.takeRides(s.rideBuf[:0]); len(s.rideBuf) > 0 {
			s.w.queuePongWith(id, s.rideBuf)
			return
		}
	}
	s.w.queuePong(id)
}
