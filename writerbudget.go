package braid

import "time"

// The in-flight budget for the writer's next frames (inflight.go holds the
// bound itself): how many budgets a stream sending alone gets, and when a
// stream counts as alone (the quiet periods after another stream's small
// frame). Called by run before each batch and by an inline write, with
// writer.mu held.

// sizeBudgetLocked sizes the in-flight budget for the next frames (run's
// batch or an inline write): lone tells whether one stream alone sends.
// The hold applies while several streams send on a writev conn at one P
// (sharedRefHold); a lone stream gets more budgets once it has sent alone
// for loneQuiet (loneScale, loneBudgets). With more than one P, streams
// sending by reference get a floor (inflight.go), marked as it says while
// it sizes the budget: on a writev conn (TCP) two or more of them get
// sharedParallelInflight; on a conn whose peer's read loop is busy (TLS,
// noise) one or more get sharedDecryptInflight, or sharedLookInflight
// where the writer looks at the socket after bulk batches and two or more
// of them send. mu held.
func (w *writer) sizeBudgetLocked(lone bool) {
	if w.path == nil {
		return
	}
	scale, loneMarkers := w.loneScale(lone)
	if w.parallel && w.cork.active() {
		w.bulkOnly = w.bulkOnlyLocked(scale)
	}
	beside := w.copyBulkBeside()
	w.sched.smallBeside = beside
	w.bound.setBudget(w.path.leastRTT(), w.writev && !lone && !w.parallel, scale, loneMarkers)
	// The least room the next frames can use, for needMarker: a lone
	// stream's whole frame goes with any room, a cut needs minRefCut
	// (scheduler.refFits).
	w.bound.minRefRoom = 1
	if !lone {
		w.bound.minRefRoom = minRefCut + headerSize
	}
	w.sharedLook = false
	if !w.parallel {
		return
	}
	floor, floorMarkers := 0, sharedDecryptMarkers
	switch refs := w.sched.refStreams(2); {
	case w.writev && refs >= 2:
		floor, floorMarkers = sharedParallelInflight, sharedParallelMarkers // several bulk streams on TCP
	case w.writev:
		// One bulk stream on TCP has no floor: beside small frames it
		// keeps one budget, alone its lone budgets.
	case refs >= 2 && w.waker != nil:
		floor = sharedLookInflight // several bulk streams, and the writer looks after their batches (readwake.go)
		w.sharedLook = true
	case refs >= 1:
		floor = sharedDecryptInflight
	}
	if floor > 0 {
		w.bound.floor(floor, floorMarkers)
	}
	if beside && w.sched.refStreams(1) == 0 {
		w.bound.ceil(sharedCopyInflight) // bulk by copy alone beside small messages
	}
}

// copyBulkBeside tells whether the next frames are bulk sent by copy
// (streamSend.bulk) beside small messages: some stream sends bulk by copy,
// and a small message of another stream (scheduler.noteWrite) came
// within severalQuiet. Such bulk leaves copySlack to the small messages
// (scheduler.bulkCopyRoom), and with more than one P and no by-reference
// bulk beside it gets sharedCopyInflight (sizeBudgetLocked). One bulk
// stream counts as several do: between two small messages it sends alone,
// and what it has in flight then is what the next one waits behind. The
// clock is read only during the quiet. mu held.
func (w *writer) copyBulkBeside() bool {
	sc := &w.sched
	if sc.takeSmallPushed() && sc.bulkQueued > 0 {
		w.smallUntil = time.Now().Add(severalQuiet)
		return true
	}
	if w.smallUntil.IsZero() {
		return false
	}
	if !time.Now().Before(w.smallUntil) {
		w.smallUntil = time.Time{}
		return false
	}
	return sc.bulkQueued > 0
}

// bulkOnlyLocked tells whether the next batches, sized to scale budgets,
// are bulk alone, for the cork with more than one P (corkWorth): lone
// budgets (loneScale: no small frame beside several streams' bulk for
// their quiet), and no small frame of a stream other than the one that
// last sent by reference for loneQuiet (corkAfter). Lone budgets alone
// are not enough: sized for an inline write, or with no other stream's
// by-reference frames, a stream gets them beside another stream's
// ping-pong, whose frames a corked segment would hold back and whose
// inline writes the cork stops. The clock is read only after another
// stream's small frame, and during the quiet that follows it, not per
// batch of bulk that goes alone throughout. mu held.
func (w *writer) bulkOnlyLocked(scale int) bool {
	if w.sched.takeOtherCopied() {
		w.corkAfter = time.Now().Add(loneQuiet)
		return false
	}
	if scale <= 1 {
		return false
	}
	if !w.corkAfter.IsZero() {
		if time.Now().Before(w.corkAfter) {
			return false
		}
		w.corkAfter = time.Time{}
	}
	return true
}

// loneScale is how many budgets the next frames get, and how many
// markers they carry in all (0: markersPerBudget a budget): loneBudgets
// once no small frame has come beside the bulk for loneQuiet
// (severalQuiet while several streams send, quietLocked), one
// otherwise. While several streams send (two in the ring, or another
// stream's by-reference frames since the last sizing, takeRefSwitch:
// streams that take turns, each written inline, are never together in
// the ring), a small (copied) frame restarts the quiet (takeCopied): the
// lone budget is what the next small frame waits behind, and a stream
// that spoke within loneQuiet (a request beside a transfer, a ping-pong)
// is likely to speak again soon. Bulk frames of other streams do not
// restart it: several transfers with no small frame among them have
// nothing for the budget to hold back but each other, and a transfer's
// turn in the round robin does not depend on what the kernel holds
// (session 36, BenchmarkBulkStreams: x1.27 over TCP, x1.12 over TLS at
// two P). A lone stream's own small frames (a length prefix written on
// its own) restart nothing. The clock is read only during a quiet, not
// per batch of a session that is lone throughout (the idle ping-pong,
// one-stream bulk). mu held.
func (w *writer) loneScale(lone bool) (scale, markers int) {
	switched := w.sched.takeRefSwitch()
	copied := w.sched.takeCopied()
	w.several = !lone || switched
	switch {
	case w.several && copied:
		w.shared = true
		return 1, 0
	case w.shared:
		w.shared = false
		w.loneAfter = time.Now().Add(w.quietLocked())
		return 1, 0
	case !w.loneAfter.IsZero():
		if time.Now().Before(w.loneAfter) {
			return 1, 0
		}
		w.loneAfter = time.Time{}
	}
	return w.loneBudgets()
}

// quietLocked is how long the quiet that starts now runs: severalQuiet
// while several streams send, loneQuiet while one does. mu held.
func (w *writer) quietLocked() time.Duration {
	if w.several {
		return severalQuiet
	}
	return loneQuiet
}

// loneBudgets is how many budgets a stream that has sent alone for
// loneQuiet gets, and the markers they carry in all (0: markersPerBudget
// a budget). On a conn without writev (TLS, noise) with more than one P:
// loneDecryptScale, marked loneDecryptMarkers times. Elsewhere they
// follow its frames (the last one sized; none yet counts as large): while
// they carry at most loneSmallFrame, loneParallelScale with more than one
// P and loneSerialScale at one P once the session has sent serialRamp
// bytes (one before: see serialRamp); larger frames get one budget (see
// loneSmallFrame). mu held.
func (w *writer) loneBudgets() (scale, markers int) {
	large := w.sched.lastRef == 0 || w.sched.lastRef > loneSmallFrame
	switch {
	case w.parallel && !w.writev:
		return loneDecryptScale, loneDecryptMarkers
	case large:
		return 1, 0 // large frames: one a turn, each lent
	case w.parallel:
		return loneParallelScale, 0
	case w.bound.sent < serialRamp:
		return 1, 0 // the connection's first bytes: see serialRamp
	}
	return loneSerialScale, 0
}

// refreshLoneFrameLocked sets the scheduler's lone-stream frame size from
// the write rate (writerate.go). mu held.
func (w *writer) refreshLoneFrameLocked() {
	w.sched.loneFrame = w.rate.loneFrame(w.sched.frameMax, w.sched.frameLimit)
}
