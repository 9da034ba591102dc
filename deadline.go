package braid

import (
	"sync"
	"sync/atomic"
	"time"
)

// deadline is a settable point in time with a channel that is closed when
// it passes, so that calls already waiting wake up (the pipeDeadline
// pattern of net.Pipe). It costs one timer for its life (armedTimer), made
// on the first deadline in the future and armed anew (Reset) by each one
// after, never one per wait, and nothing until first used: a protocol
// that sets a deadline around every read or write allocates nothing for
// it (two allocations a set before session 29, the timer and its func).
// Every Read and Write asks for it, so wait and expired take no lock once
// the channel exists: they load it.
type deadline struct {
	mu     sync.Mutex                    // guards armed and the changes of cancel
	armed  *armedTimer                   // made on the first deadline in the future; nil until then
	cancel chan struct{}                 // closed when the deadline has passed; nil = not made yet
	ch     atomic.Pointer[chan struct{}] // cancel, for wait and expired without mu; set under mu
}

// armedTimer is a deadline's one timer, which runs deadline.fire, and the
// deadline it is armed for. Out of line, so that a stream that never sets
// a deadline holds one pointer for it (idle streams: TestScaleManyStreams).
// Guarded by the deadline's mu.
type armedTimer struct {
	timer  *time.Timer
	at     time.Time // zero while no deadline is armed
	reader *Stream   // the stream whose read deadline this is (setRead), nil for others: fire cuts its Read's conn read
}

// setCancel replaces the channel. mu held.
func (d *deadline) setCancel(c chan struct{}) {
	d.cancel = c
	if c == nil {
		d.ch.Store(nil)
	} else {
		d.ch.Store(&c)
	}
}

// set arms the deadline at t; the zero t clears it.
func (d *deadline) set(t time.Time) { d.setRead(t, nil) }

// setRead is set for st's read deadline: when it passes, fire also cuts
// the conn read of st's Read if it holds the conn turn (turn.go), as
// cutFor does for the stream's other events. (A past t is the caller's
// to cut for.)
func (d *deadline) setRead(t time.Time, st *Stream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.armed
	if a != nil && !a.timer.Stop() && !a.at.IsZero() && d.cancel != nil && !isClosed(d.cancel) {
		// The timer fired but fire waits for mu: its deadline passed,
		// so close cancel for it (fire then finds its deadline gone or
		// moved, and does nothing) rather than strand the calls waiting
		// on cancel.
		close(d.cancel)
	}
	if a != nil {
		a.at = time.Time{}
	}
	closed := d.cancel != nil && isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.setCancel(nil)
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed || d.cancel == nil {
			d.setCancel(make(chan struct{}))
		}
		if a == nil {
			d.armed = &armedTimer{at: t, reader: st}
			d.armed.timer = time.AfterFunc(dur, d.fire)
		} else {
			a.at = t
			a.timer.Reset(dur) // after a Stop that came too late, fire runs twice: the first finds at moved
		}
		return
	}
	if !closed {
		if d.cancel == nil {
			d.setCancel(make(chan struct{}))
		}
		close(d.cancel)
	}
}

// fire is the timer's: it closes cancel if the deadline it was armed for
// is still the deadline and has passed, and then, without mu, cuts a read
// deadline's taker (setRead). A run for a deadline since cleared or moved
// later finds at zero or ahead, and leaves cancel.
func (d *deadline) fire() {
	d.mu.Lock()
	a := d.armed
	if a == nil || a.at.IsZero() || time.Now().Before(a.at) {
		d.mu.Unlock()
		return
	}
	if d.cancel != nil && !isClosed(d.cancel) {
		close(d.cancel)
	}
	reader := a.reader
	d.mu.Unlock()
	if reader != nil {
		// After the close: a taker that looked at its deadline before
		// it was closed had stored itself as the holder first (turn.go).
		reader.session.cutFor(reader)
	}
}

// wait returns a channel closed when the deadline passes, made on first
// wait, so that a deadline set later still wakes a call already waiting.
func (d *deadline) wait() <-chan struct{} {
	if c := d.ch.Load(); c != nil {
		return *c
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		d.setCancel(make(chan struct{}))
	}
	return d.cancel
}

// expired reports whether the deadline has passed.
func (d *deadline) expired() bool {
	c := d.ch.Load()
	return c != nil && isClosed(*c)
}

// stop releases the timer.
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed != nil {
		d.armed.timer.Stop()
		d.armed = nil
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// armTimer starts *t to fire after d, making it on first use: a waiter
// that waits again and again (the writer's coalescing delay, the read
// loop's pong wait and turn loan) keeps one timer for its life instead
// of one per wait. *t must be stopped or drained (its channel read)
// before it is armed again.
func armTimer(t **time.Timer, d time.Duration) {
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
}
