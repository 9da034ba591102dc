package braid

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeEnv is a growthEnv on simulated time: a clock the test moves and a
// fixed path.
type fakeEnv struct {
	t    time.Time
	path pathEstimate
	env  growthEnv
}

func newFakeEnv(rtt time.Duration, rate float64, maxWindow uint32) *fakeEnv {
	f := &fakeEnv{t: time.Unix(1_000_000, 0), path: pathEstimate{rtt: rtt, rate: rate}}
	f.env = growthEnv{
		now:       func() time.Time { return f.t },
		path:      func() pathEstimate { return f.path },
		maxWindow: maxWindow,
	}
	return f
}

func (f *fakeEnv) advance(d time.Duration) { f.t = f.t.Add(d) }

// grow runs one growth with everything granted and returns the update.
func growAll(w *recvWindow, env *growthEnv) (want, update uint32) {
	want = w.wantGrowth(env)
	if want == 0 {
		return 0, 0
	}
	return want, w.grew(want, w.budgetCost(want), false, updateEighths)
}

func TestRecvWindowAdmit(t *testing.T) {
	f := newFakeEnv(0, 0, DefaultMaxStreamWindow)
	w := newRecvWindow(InitialStreamWindow, 0)
	require.True(t, w.admit(InitialStreamWindow))
	require.False(t, w.admit(InitialStreamWindow+1))
	w.received(InitialStreamWindow-10, &f.env)
	require.True(t, w.admit(10))
	require.False(t, w.admit(11), "credit is what the peer may still send")
}

// The peer gets consumed bytes back once half the initial window is
// consumed, not before, and the credit plus what is held never exceeds
// the window.
func TestRecvWindowUpdateThreshold(t *testing.T) {
	f := newFakeEnv(0, 0, DefaultMaxStreamWindow) // no RTT: no growth
	w := newRecvWindow(InitialStreamWindow, 0)
	w.received(InitialStreamWindow, &f.env)
	u, _ := w.consumed(InitialStreamWindow/2-1, false, updateEighths)
	require.Zero(t, u)
	u, _ = w.consumed(1, false, updateEighths)
	require.EqualValues(t, InitialStreamWindow/2, u)
	require.EqualValues(t, InitialStreamWindow, w.credit+w.unread)
	// A closed read side gives nothing back.
	u, _ = w.consumed(InitialStreamWindow/2, true, updateEighths)
	require.Zero(t, u)
	// Large windows are returned in eighths.
	require.EqualValues(t, 2<<20, updateThreshold(16<<20))
}

// A stream whose epoch's bytes arrive faster than the window can carry in
// growthRTTs round trips doubles its window; one whose sender is slower
// does not.
func TestRecvWindowDoubling(t *testing.T) {
	const rtt = 50 * time.Millisecond
	for _, c := range []struct {
		name    string
		elapsed time.Duration // time the half window took to arrive
		grows   bool
	}{
		{"window-limited", 5 * time.Millisecond, true},
		{"sender-limited", 2 * rtt, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeEnv(rtt, 1, DefaultMaxStreamWindow) // a path window of the initial one
			w := newRecvWindow(InitialStreamWindow, 0)
			half := uint32(InitialStreamWindow / 2)
			w.received(half/2, &f.env)
			f.advance(c.elapsed)
			w.received(half/2, &f.env)
			u, _ := w.consumed(half, false, updateEighths)
			require.EqualValues(t, half, u)
			want, update := growAll(&w, &f.env)
			if !c.grows {
				require.Zero(t, want)
				require.EqualValues(t, InitialStreamWindow, w.window)
				return
			}
			require.EqualValues(t, InitialStreamWindow, want, "the window doubles")
			require.EqualValues(t, InitialStreamWindow, update, "the growth goes to the peer at once")
			require.EqualValues(t, 2*InitialStreamWindow, w.window)
			require.EqualValues(t, InitialStreamWindow, w.charged)
			require.EqualValues(t, w.window, w.credit+w.unread)
		})
	}
}

// A reader that let the buffer sit for a round trip limits the transfer
// itself: no growth.
func TestRecvWindowBacklogNoGrowth(t *testing.T) {
	const rtt = 10 * time.Millisecond
	f := newFakeEnv(rtt, 1, DefaultMaxStreamWindow)
	w := newRecvWindow(InitialStreamWindow, 0)
	w.received(InitialStreamWindow, &f.env) // all at once
	f.advance(3 * rtt)                      // nobody read
	w.consumed(InitialStreamWindow/2, false, updateEighths)
	want, _ := growAll(&w, &f.env)
	require.Zero(t, want)
}

// A stream starting on a known long path gets the path's window at once,
// at its first consumption, bounded by maxWindow.
func TestRecvWindowPathWindow(t *testing.T) {
	f := newFakeEnv(50*time.Millisecond, 125e6, DefaultMaxStreamWindow)
	w := newRecvWindow(InitialStreamWindow, 0)
	w.received(100, &f.env)
	u, _ := w.consumed(100, false, updateEighths)
	require.Zero(t, u)
	want, update := growAll(&w, &f.env)
	pathWindow := uint32(2 * 125e6 * 0.05)
	require.EqualValues(t, pathWindow-InitialStreamWindow, want)
	require.EqualValues(t, pathWindow-InitialStreamWindow+100, update, "growth and the consumed bytes in one update")
	require.EqualValues(t, pathWindow, w.window)
	// Once per epoch: no second growth before half the window is used.
	require.Zero(t, w.wantGrowth(&f.env))

	// Capped at maxWindow, and the initial window on a fast local link.
	require.EqualValues(t, DefaultMaxStreamWindow, pathEstimate{rtt: time.Second, rate: 125e6}.window(DefaultMaxStreamWindow))
	require.EqualValues(t, InitialStreamWindow, pathEstimate{rtt: 100 * time.Microsecond, rate: 125e6}.window(DefaultMaxStreamWindow))
	require.EqualValues(t, InitialStreamWindow, pathEstimate{}.window(DefaultMaxStreamWindow))
}

// A refused growth (memory or budget) leaves the window as it was and
// still returns what was pending once the threshold is reached.
func TestRecvWindowGrowthRefused(t *testing.T) {
	f := newFakeEnv(50*time.Millisecond, 125e6, DefaultMaxStreamWindow)
	w := newRecvWindow(InitialStreamWindow, 0)
	w.received(InitialStreamWindow, &f.env)
	u, _ := w.consumed(InitialStreamWindow/2, false, updateEighths)
	require.NotZero(t, u)
	w.pathChecked = false
	want := w.wantGrowth(&f.env)
	require.NotZero(t, want)
	require.Zero(t, w.wantGrowth(&f.env), "one growth at a time")
	require.Zero(t, w.grew(0, 0, false, updateEighths))
	require.EqualValues(t, InitialStreamWindow, w.window)
	require.False(t, w.growing)
}

// An idle grown window shrinks back: its growth is released at once, and
// the session budget keeps what the peer's credit still allows it to
// send until the peer uses it.
func TestRecvWindowShrink(t *testing.T) {
	f := newFakeEnv(50*time.Millisecond, 125e6, DefaultMaxStreamWindow)
	w := newRecvWindow(InitialStreamWindow, 0)
	w.received(1000, &f.env)
	w.consumed(1000, false, updateEighths)
	growAll(&w, &f.env)
	big := w.window
	require.Greater(t, big, uint32(InitialStreamWindow))
	require.EqualValues(t, big-InitialStreamWindow, w.charged)

	// Active since the last check: no shrink.
	_, _, shrunk := w.idleCheck()
	require.False(t, shrunk)
	// Idle for a whole check: shrinks.
	mem, release, shrunk := w.idleCheck()
	require.True(t, shrunk)
	require.EqualValues(t, big-InitialStreamWindow, mem, "the growth goes back to the memory manager")
	require.Zero(t, release, "the peer still holds the credit")
	require.EqualValues(t, InitialStreamWindow, w.window)
	require.False(t, w.grown())

	// The peer uses its old credit: nothing goes back to it until what
	// it holds is below the initial window, and the budget is freed as it
	// goes.
	credit := w.credit
	w.received(credit, &f.env)
	u, rel := w.consumed(credit/2, false, updateEighths)
	require.Zero(t, u, "no credit back while the peer held more than the window")
	require.EqualValues(t, big-InitialStreamWindow, rel+w.charged)
	u, rel2 := w.consumed(credit-credit/2-InitialStreamWindow, false, updateEighths)
	require.Zero(t, u, "what is held is the window now")
	require.EqualValues(t, big-InitialStreamWindow, rel+rel2, "all the budget is back")
	require.Zero(t, w.charged)
	u, _ = w.consumed(InitialStreamWindow/2, false, updateEighths)
	require.EqualValues(t, InitialStreamWindow/2, u, "the initial window's updates again")
}

// budgetCost: growth into credit the peer already holds costs no budget.
func TestRecvWindowBudgetCost(t *testing.T) {
	w := newRecvWindow(InitialStreamWindow+1000, 1000)
	require.EqualValues(t, 500, w.budgetCost(500))
	w.window = InitialStreamWindow // shrunk, the peer still holds 1000 more
	require.EqualValues(t, 0, w.budgetCost(500))
	require.EqualValues(t, 500, w.budgetCost(1500))
}

// The session budget hands out at most its limit, in parts.
func TestRecvBudget(t *testing.T) {
	b := recvBudget{limit: 1000}
	require.EqualValues(t, 600, b.take(600))
	require.EqualValues(t, 400, b.take(600))
	require.EqualValues(t, 0, b.take(1))
	b.give(700)
	require.EqualValues(t, 700, b.take(800))
}

// The path's RTT is its smallest sample within the horizon; before the
// first, the first ping's age is a lower bound.
func TestPathRTT(t *testing.T) {
	var p pathState
	p.probe.Store(time.Now().Add(-30 * time.Millisecond).UnixNano())
	require.GreaterOrEqual(t, p.estimate().rtt, 30*time.Millisecond)
	now := time.Now()
	p.rttSample(40*time.Millisecond, 0, now)
	p.rttSample(60*time.Millisecond, 0, now)
	require.Equal(t, 40*time.Millisecond, p.estimate().rtt)
	p.rttSample(60*time.Millisecond, 0, now.Add(rttHorizon+time.Second))
	require.Equal(t, 60*time.Millisecond, p.estimate().rtt, "an old minimum gives way")
	require.EqualValues(t, assumedRate, p.estimate().rate)
}

// Where updates ride with pongs, a large window's update is due at an
// eighth (for a pong to carry) and made alone only at half; a window no
// larger than the initial one is returned at half either way.
func TestRecvWindowRide(t *testing.T) {
	f := newFakeEnv(0, 0, DefaultMaxStreamWindow)
	const window = 1 << 20
	w := newRecvWindow(window, 0)
	w.received(window, &f.env)
	u, _ := w.consumed(window/8-1, false, updateRide)
	require.Zero(t, u)
	require.False(t, w.rideDue(), "less than an eighth: nothing for a pong to carry")
	require.Zero(t, w.takeRide())
	u, _ = w.consumed(1, false, updateRide)
	require.Zero(t, u, "an eighth: not alone")
	require.True(t, w.rideDue(), "an eighth: due for the next pong")
	require.EqualValues(t, window/8, w.takeRide())
	require.False(t, w.rideDue(), "taken")
	require.EqualValues(t, window, w.credit+w.unread)

	u, _ = w.consumed(window/2-1, false, updateRide)
	require.Zero(t, u)
	u, _ = w.consumed(1, false, updateRide)
	require.EqualValues(t, window/2, u, "half the window: alone")
	require.EqualValues(t, window, w.credit+w.unread)

	// Without riding, the eighth goes at once.
	plain := newRecvWindow(window, 0)
	plain.received(window, &f.env)
	u, _ = plain.consumed(window/8, false, updateEighths)
	require.EqualValues(t, window/8, u)

	// The initial window: half in both cases.
	require.Equal(t, updateThreshold(InitialStreamWindow), aloneThreshold(InitialStreamWindow))
	require.EqualValues(t, InitialStreamWindow/2, sendThreshold(InitialStreamWindow, updateRide))
	// A refused growth's pending bytes wait for a pong as consumed's do.
	g := newRecvWindow(window, 0)
	g.received(window/4, &f.env)
	g.consumed(window/4, false, updateRide)
	require.Zero(t, g.grew(0, 0, false, updateRide))
	require.EqualValues(t, window/4, g.grew(0, 0, false, updateEighths))
}

// Under updateEager a window of any size is returned every
// eagerUpdateBytes, where eighths would wait for an eighth of it; a
// refused growth's pending bytes go at the same threshold.
func TestRecvWindowEager(t *testing.T) {
	f := newFakeEnv(0, 0, DefaultMaxStreamWindow)
	const window = 8 << 20
	require.Greater(t, updateThreshold(window), uint32(eagerUpdateBytes), "the test needs eighths larger than the eager step")
	w := newRecvWindow(window, 0)
	w.received(window, &f.env)
	u, _ := w.consumed(eagerUpdateBytes-1, false, updateEager)
	require.Zero(t, u)
	u, _ = w.consumed(1, false, updateEager)
	require.EqualValues(t, eagerUpdateBytes, u, "eagerUpdateBytes consumed: an update at once")
	u, _ = w.consumed(eagerUpdateBytes, false, updateEighths)
	require.Zero(t, u, "the same bytes under eighths wait for an eighth")
	require.EqualValues(t, window, w.credit+w.unread+uint32(w.pending()))

	g := newRecvWindow(window, 0)
	g.received(window/4, &f.env)
	g.consumed(eagerUpdateBytes-1, false, updateEager)
	require.Zero(t, g.grew(0, 0, false, updateEager), "below the eager step")
	g.consumed(1, false, updateEighths)
	require.EqualValues(t, eagerUpdateBytes, g.grew(0, 0, false, updateEager))
	require.EqualValues(t, eagerUpdateBytes, sendThreshold(InitialStreamWindow, updateEager))
}
