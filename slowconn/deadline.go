package slowconn

import (
	"sync"
	"time"
)

// deadline is a read or write deadline that wakes calls already waiting:
// its channel is closed when the deadline passes. Setting it arms at most
// one time.AfterFunc; waiting arms nothing. This is the pattern of the
// standard library's net.Pipe.
type deadline struct {
	mu     sync.Mutex    // guards timer and cancel
	timer  *time.Timer   // closes cancel when the deadline passes; nil if none
	cancel chan struct{} // closed once the deadline has passed
}

func makeDeadline() deadline {
	return deadline{cancel: make(chan struct{})}
}

// set moves the deadline to t; the zero time means none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait until it has closed cancel
	}
	d.timer = nil

	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// wait returns a channel that is closed when the deadline passes.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
