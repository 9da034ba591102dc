package braid

import "time"

// Receive flow control as a pure type: recvWindow holds one stream's
// receive window and decides, from what arrives and what the application
// consumes, when the peer gets credit back and when the window should grow
// or shrink. It reads no clock (the caller passes one, read only when a
// decision needs it), takes no lock (the stream's mu guards it) and calls
// no memory manager: growth is two steps, wantGrowth then grew, so that the
// caller reserves memory and session budget between them with no lock
// held.
//
// The numbers, all in bytes:
//
//	window  what we let the peer have in flight plus what we hold unread
//	credit  what the peer may still send (granted, not yet used)
//	unread  received, not yet consumed
//	pending window - credit - unread: consumed and not yet given back;
//	        negative after a shrink, while the peer still holds credit
//	        granted under the larger window
//
// The peer gets pending back in a window update once it reaches
// updateThreshold(window). Memory reserved from Config.Memory is the
// window; the session budget (Config.MaxSessionWindow) holds what the peer
// could make us buffer beyond InitialStreamWindow, max(window,
// credit+unread) - InitialStreamWindow, so that it still counts credit
// granted before a shrink.

// growthRTTs: a window the arrival rate fills in fewer round trips than
// this is too small. Two: the window must cover the round trip of the data
// and of the update that returns it. (quic-go uses four; with more, every
// busy stream on a fast local link keeps megabytes in flight, and a small
// request queues behind them in the socket buffers.)
const growthRTTs = 2

// largeWindowUpdates is how many updates a large window is returned in.
const largeWindowUpdates = 8

// leastUpdateBytes is the fewest consumed bytes that make a window
// update: half the initial window, go-yamux's rule for it.
const leastUpdateBytes = InitialStreamWindow / 2

// updateThreshold is how many consumed bytes make a window update. Half
// the window at first (leastUpdateBytes), as go-yamux does; a large window
// is returned in eighths, so that the sender is never short of credit by
// more than a small part of it while the update travels (a 16 MiB window
// then keeps a 12 MB bandwidth-delay product full).
func updateThreshold(window uint32) uint32 {
	return max(window/largeWindowUpdates, leastUpdateBytes)
}

// aloneThreshold is how many consumed bytes make a window update written
// on its own where updates ride with pongs (see updateride.go): half the
// window, go-yamux's rule, which leaves the sender half the window of
// credit while the update travels; below it, from updateThreshold on, an
// update waits for the next pong.
func aloneThreshold(window uint32) uint32 {
	return max(window/2, updateThreshold(window))
}

// updateRule is how a stream returns what its application consumed:
// chosen per update by the stream (Stream.updateRuleLocked) from what the
// session fixed at its start.
type updateRule uint8

const (
	// updateEighths: an update once updateThreshold is consumed, written
	// at once.
	updateEighths updateRule = iota
	// updateRide: an update due at updateThreshold waits for a pong, and
	// is written on its own only from aloneThreshold on (updateride.go).
	updateRide
	// updateEager: an update once eagerUpdateBytes are consumed, however
	// large the window; where the read loop is busy (writer.busyReadLoop:
	// TLS and noise at more than one P; see eagerUpdateBytes).
	updateEager
)

// eagerUpdateBytes is how many consumed bytes make an update under
// updateEager: leastUpdateBytes, the least updateThreshold ever asks, as
// if the window had never grown. Where the read loop is busy the sender and the receiver run at
// once on their own Ps, and a sender short of credit leaves its P idle:
// at two P over TLS a Write waited for credit about a tenth of a 64 KiB
// notifications run with windows of 5-11 MB returned in eighths (session
// 47), while the receiver was, for moments, a megabyte behind. Returned
// in 128 KiB steps the credit comes back as the reader goes. Paired at
// two P over TLS against eighths (session 48): 64 KiB notifications
// x1.114 and x1.081 (15 and 11 of 16 pairs), 256 KiB x1.040 and x1.071,
// one-stream bulk x1.029 (13 of 24); the ping beside 10 bulk streams
// bulk x0.989, p50 x0.972, p99 x0.991 (24 pairs). 64 KiB steps gained
// x1.007-1.046 more on notifications and bulk, but cost the ping beside
// 10 bulk streams, whose receiver then writes ten streams' updates twice
// as often: bulk x0.960 (4 of 24 pairs above), p99 x1.048 (19 of 24);
// 256 KiB steps x0.932 and x1.004 on notifications. A larger window from
// the start instead (the largest at once) measured x0.893: more bytes in
// the socket buffers, not sooner credit. The cost is an update frame per
// 128 KiB read, 12 bytes in a write of the receiver's writer, which at
// two P runs beside the reader.
const eagerUpdateBytes = leastUpdateBytes

// sendThreshold is how many consumed bytes make an update now under
// rule: aloneThreshold when the update may ride, eagerUpdateBytes when
// eager, else updateThreshold.
func sendThreshold(window uint32, rule updateRule) uint32 {
	switch rule {
	case updateRide:
		return aloneThreshold(window)
	case updateEager:
		return eagerUpdateBytes
	}
	return updateThreshold(window)
}

// pathEstimate is what the session knows of its path: the round-trip time
// and the rate bytes arrive at. A zero rtt means unknown.
type pathEstimate struct {
	rtt  time.Duration
	rate float64 // bytes per second
}

// window returns the receive window a stream needs to keep this path busy
// on its own: growthRTTs bandwidth-delay products, at least the protocol's
// initial window and at most limit.
func (p pathEstimate) window(limit uint32) uint32 {
	if p.rtt <= 0 || p.rate <= 0 {
		return min(InitialStreamWindow, limit)
	}
	w := growthRTTs * p.rate * p.rtt.Seconds()
	if w >= float64(limit) {
		return limit
	}
	return max(uint32(w), min(InitialStreamWindow, limit))
}

// growthEnv is what a window's growth decisions read: the clock and the
// session's path (each called only when a decision needs it) and the
// largest window allowed.
type growthEnv struct {
	now       func() time.Time
	path      func() pathEstimate
	maxWindow uint32
}

// recvWindow is one stream's receive flow control; see the top of the
// file. The zero value is not usable: start with newRecvWindow.
type recvWindow struct {
	window  uint32
	credit  uint32
	unread  uint32
	charged uint32 // session budget held: max(window, credit+unread) - InitialStreamWindow
	growing bool   // a growth is being reserved; no second one starts
	active  bool   // bytes arrived since the last idle check

	// A growth epoch starts with the first byte after an idle time and
	// ends once half a window is consumed; its arrival rate tells whether
	// the window limits the transfer.
	epoch       time.Time
	arrived     uint32 // bytes received since epoch
	taken       uint32 // bytes consumed since epoch
	filledAt    time.Time
	pathChecked bool // the path's window was considered in this epoch
}

// newRecvWindow returns flow control for a new stream whose window is
// window (InitialStreamWindow, or more granted with the SYN or ACK), of
// which charged bytes are held from the session budget.
func newRecvWindow(window, charged uint32) recvWindow {
	return recvWindow{window: window, credit: window, charged: charged}
}

// pending returns the consumed bytes not yet given back; negative while
// the peer holds credit from before a shrink.
func (w *recvWindow) pending() int64 {
	return int64(w.window) - int64(w.credit) - int64(w.unread)
}

// admit reports whether the peer may send n more bytes.
func (w *recvWindow) admit(n uint32) bool { return n <= w.credit }

// canGrow reports whether the window may still grow in env.
func (w *recvWindow) canGrow(env *growthEnv) bool { return w.window < env.maxWindow }

// received accounts n bytes the peer sent (admit said yes). Growth
// bookkeeping reads the clock once per burst, and never once the window
// can't grow.
func (w *recvWindow) received(n uint32, env *growthEnv) {
	w.credit -= n
	w.active = true
	if w.canGrow(env) && (w.arrived == 0 || w.unread == 0) {
		now := env.now()
		if w.arrived == 0 || now.Sub(w.epoch) > env.path().rtt {
			// An epoch starts with its first byte; data into an empty
			// buffer more than a round trip after the epoch began
			// follows an idle time, and starts a new one.
			w.epoch, w.arrived, w.taken, w.pathChecked = now, 0, 0, false
		}
		if w.unread == 0 {
			w.filledAt = now
		}
	}
	w.arrived += n
	w.unread += n
}

// consumed accounts n bytes read (or dropped) and returns the window
// update to send now (0: none) and the session budget to give back.
// Under updateRide an update is sent now only from aloneThreshold on, and
// one that is due (updateThreshold) waits for a pong (rideDue, takeRide).
// Check wantGrowth before sending: a growth joins the same update.
func (w *recvWindow) consumed(n uint32, final bool, rule updateRule) (update, release uint32) {
	w.unread -= n
	w.taken += n
	release = w.settleCharge()
	if final {
		return 0, release // the peer sends no more: nothing to give back
	}
	if p := w.pending(); p >= int64(sendThreshold(w.window, rule)) {
		w.credit += uint32(p)
		return uint32(p), release
	}
	return 0, release
}

// rideDue reports whether an update is due, for a pong to carry: the
// consumed bytes not given back reach updateThreshold.
func (w *recvWindow) rideDue() bool {
	return w.pending() >= int64(updateThreshold(w.window))
}

// takeRide returns the update a pong carries: the consumed bytes not
// given back, once rideDue; 0 otherwise.
func (w *recvWindow) takeRide() uint32 {
	if !w.rideDue() {
		return 0
	}
	p := uint32(w.pending())
	w.credit += p
	return p
}

// settleCharge lowers charged to what the window and the peer's credit
// still need and returns what it freed.
func (w *recvWindow) settleCharge() uint32 {
	need := max(w.window, w.credit+w.unread)
	need -= min(need, InitialStreamWindow)
	if w.charged <= need {
		return 0
	}
	freed := w.charged - need
	w.charged = need
	return freed
}

// wantGrowth returns how much the window should grow now, 0 for nothing.
// Two rules: a stream starting a burst gets at once what the session's
// path needs (the path's window), and a window that limits the transfer
// doubles (its epoch's bytes arrived at a rate that would fill it in less
// than growthRTTs round trips; quic-go's rule, with the arrival rate,
// since the rate a reader drains a backlog at says nothing about the
// link). A non-zero answer must be followed by grew, which ends the
// growth.
func (w *recvWindow) wantGrowth(env *growthEnv) uint32 {
	if w.growing || !w.canGrow(env) {
		return 0
	}
	var want uint32
	if !w.pathChecked {
		w.pathChecked = true
		if t := env.path().window(env.maxWindow); t > w.window {
			want = t - w.window
		}
	}
	if want == 0 && w.taken >= w.window/2 && w.arrived > 0 {
		want = w.doubling(env)
		w.taken, w.arrived = 0, 0 // the next arrival starts the next epoch
	}
	if want > 0 {
		w.growing = true
	}
	return want
}

// doubling applies the doubling rule at the end of an epoch.
func (w *recvWindow) doubling(env *growthEnv) uint32 {
	rtt := env.path().rtt
	if rtt <= 0 {
		return 0
	}
	now := env.now()
	if w.unread > 0 && now.Sub(w.filledAt) > rtt {
		// The reader has not emptied the buffer for a round trip: it,
		// not the window, limits the transfer. (A burst that arrived at
		// once and is being read is not a backlog.)
		return 0
	}
	// elapsed < growthRTTs * rtt * arrived/window: the arrival rate times
	// growthRTTs round trips exceeds the window.
	elapsed := now.Sub(w.epoch)
	if float64(elapsed)*float64(w.window) >= growthRTTs*float64(rtt)*float64(w.arrived) {
		return 0
	}
	return min(w.window, env.maxWindow-w.window)
}

// budgetCost returns the session budget a growth by g needs: the part of
// the new window beyond both the old window and the credit the peer holds.
func (w *recvWindow) budgetCost(g uint32) uint32 {
	held := w.charged + InitialStreamWindow
	if nw := w.window + g; nw > held {
		return nw - held
	}
	return 0
}

// grew ends a growth: the window grows by g (0 when memory or budget
// refused), charged by the budget the caller took (budgetCost(g)). It
// returns the window update to send, the growth and what is pending
// together; 0 when there is nothing worth sending (under rule, as
// consumed: under updateRide a refused growth's pending bytes may wait
// for a pong).
func (w *recvWindow) grew(g, charged uint32, final bool, rule updateRule) uint32 {
	w.growing = false
	w.window += g
	w.charged += charged
	if final {
		return 0
	}
	p := w.pending()
	if p <= 0 || (g == 0 && p < int64(sendThreshold(w.window, rule))) {
		return 0
	}
	w.credit += uint32(p)
	return uint32(p)
}

// idleCheck is the shrink rule, run by the session every shrinkAfter: a
// window larger than the initial one whose stream received nothing since
// the last check and holds nothing unread shrinks back to
// InitialStreamWindow. It returns the memory to release (the window's
// growth) and the session budget freed; the budget still holds the credit
// the peer has from before, until it is used.
func (w *recvWindow) idleCheck() (memory, release uint32, shrunk bool) {
	wasActive := w.active
	w.active = false
	if wasActive || w.growing || w.unread > 0 || w.window <= InitialStreamWindow {
		return 0, 0, false
	}
	memory = w.window - InitialStreamWindow
	w.window = InitialStreamWindow
	w.arrived, w.taken, w.pathChecked = 0, 0, false
	return memory, w.settleCharge(), true
}

// grown reports whether the window is larger than the initial one (the
// session checks such streams for idleness).
func (w *recvWindow) grown() bool { return w.window > InitialStreamWindow }
