package braid

import (
	"sync"
	"sync/atomic"
	"time"
)

// deadline is a settable point in time with a channel that is closed when
// it passes, so that calls already waiting wake up (the pipeDeadline
// pattern of net.Pipe). It costs one timer per SetDeadline, never one per
// wait, and nothing until first used. Every Read and Write asks for it, so
// wait and expired take no lock once the channel exists: they load it.
type deadline struct {
	mu     sync.Mutex // guards timer and the changes of cancel
	timer  *time.Timer
	cancel chan struct{}                 // closed when the deadline has passed; nil = not made yet
	ch     atomic.Pointer[chan struct{}] // cancel, for wait and expired without mu; set under mu
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
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() && d.cancel != nil && !isClosed(d.cancel) {
		// The timer fired but its func waits for mu: its deadline passed,
		// so close cancel for it (it then finds a new channel and does
		// nothing) rather than strand the calls waiting on cancel.
		close(d.cancel)
	}
	d.timer = nil
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
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.cancel == cancel && !isClosed(cancel) {
				close(cancel)
			}
		})
		return
	}
	if !closed {
		if d.cancel == nil {
			d.setCancel(make(chan struct{}))
		}
		close(d.cancel)
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
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
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
