package braid

import (
	"sync"
	"time"
)

// deadline is a settable point in time with a channel that is closed when
// it passes, so that calls already waiting wake up (the pipeDeadline
// pattern of net.Pipe). It costs one timer per SetDeadline, never one per
// wait, and nothing until first used.
type deadline struct {
	mu     sync.Mutex // guards the fields below
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline has passed; nil = not made yet
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
			d.cancel = nil
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed || d.cancel == nil {
			d.cancel = make(chan struct{})
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
			d.cancel = make(chan struct{})
		}
		close(d.cancel)
	}
}

// wait returns a channel closed when the deadline passes, made on first
// wait, so that a deadline set later still wakes a call already waiting.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		d.cancel = make(chan struct{})
	}
	return d.cancel
}

// expired reports whether the deadline has passed.
func (d *deadline) expired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel != nil && isClosed(d.cancel)
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
