package braid

import "time"

// stallTimer is the one timer of a read-loop push-back wait (Stream.awaitRoom
// for a full mplex stream buffer, Session.awaitAcceptRoom for a full accept
// backlog): the read loop stops reading until room is made or
// Config.MaxReceiveStall runs out. The waiting read loop owns it, re-arms
// it each round and stops it when the wait ends (defer stop).
type stallTimer struct{ t *time.Timer }

// wait blocks, with no lock held, until room is signalled, left has passed,
// or done (the session's closedCh) is closed; it reports whether done was.
func (st *stallTimer) wait(left time.Duration, room, done <-chan struct{}) (closed bool) {
	if st.t == nil {
		st.t = time.NewTimer(left)
	} else {
		st.t.Reset(left)
	}
	select {
	case <-room:
	case <-st.t.C:
	case <-done:
		return true
	}
	return false
}

// stop releases the timer.
func (st *stallTimer) stop() {
	if st.t != nil {
		st.t.Stop()
	}
}
