package braid

import (
	"sync/atomic"
	"time"
)

// stallTimer is the one timer of a read-loop push-back wait (Stream.awaitRoom
// for a full mplex stream buffer, Session.awaitAcceptRoom for a full accept
// backlog): the read loop stops reading until room is made or
// Config.MaxReceiveStall runs out. The waiting read loop owns it, re-arms
// it each round and stops it when the wait ends (defer stop). Each round
// is counted in the session's readStalls.
type stallTimer struct {
	t      *time.Timer
	stalls *readStalls
}

// wait blocks, with no lock held, until room is signalled, left has passed,
// or done (the session's closedCh) is closed; it reports whether done was.
func (st *stallTimer) wait(left time.Duration, room, done <-chan struct{}) (closed bool) {
	if st.t == nil {
		st.t = time.NewTimer(left)
	} else {
		st.t.Reset(left)
	}
	st.stalls.begun.Add(1)
	defer st.stalls.ended.Add(1)
	select {
	case <-room:
	case <-st.t.C:
	case <-done:
		return true
	}
	return false
}

// readStalls counts the read loop's push-back waits, for the keep-alive
// (Session.keepAliveTick): while the read loop waits by this side's own
// choice, the answer to a keep-alive ping may sit unread in the conn, so
// an answer that did not come says nothing of the peer. (With
// Config.MaxReceiveStall above KeepAliveInterval + ConnectionWriteTimeout,
// an accept push-back closed a healthy session so before session 25:
// TestKeepAliveDuringAcceptPushBack.) Written by the read loop, read by
// the keep-alive's timer.
type readStalls struct {
	begun atomic.Uint64 // waits begun
	ended atomic.Uint64 // waits ended
}

// since tells whether the read loop stalled at any time after begun was
// mark: a wait began since, or one is under way.
func (r *readStalls) since(mark uint64) bool {
	begun := r.begun.Load()
	return begun != mark || r.ended.Load() != begun
}

// stop releases the timer.
func (st *stallTimer) stop() {
	if st.t != nil {
		st.t.Stop()
	}
}
