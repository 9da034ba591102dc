package braid

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Promise: a deadline moved before it passes does not fire at its old
// time, one moved after it passed wakes the calls that waited on it and
// starts anew, a cleared one never fires, and one that passes closes its
// channel; the one timer serves every deadline (re-armed, not remade).
func TestDeadlineMovesWithOneTimer(t *testing.T) {
	var d deadline
	const soon = 5 * time.Millisecond
	d.set(time.Now().Add(soon))
	timer := d.armed.timer
	d.set(time.Now().Add(time.Hour)) // moved later before it passed
	time.Sleep(4 * soon)
	require.False(t, d.expired(), "a deadline moved later fired at its old time")
	require.Same(t, timer, d.armed.timer, "the timer is re-armed, not remade")

	d.set(time.Now().Add(soon))
	waited := d.wait()
	require.Eventually(t, d.expired, time.Second, time.Millisecond, "the deadline did not pass")
	select {
	case <-waited:
	default:
		t.Fatal("a call waiting on the deadline was not woken")
	}

	d.set(time.Now().Add(time.Hour)) // after it passed: a new channel
	require.False(t, d.expired(), "a deadline set anew after one passed is expired")
	d.set(time.Time{})
	time.Sleep(2 * soon)
	require.False(t, d.expired(), "a cleared deadline fired")
	d.stop()
}

// Promise: setting and clearing a stream's deadlines around each read
// and write allocates nothing once the first deadline made its timer.
func TestDeadlineSetAllocatesNothing(t *testing.T) {
	var d deadline
	d.set(time.Now().Add(time.Minute))
	allocs := testing.AllocsPerRun(100, func() {
		d.set(time.Now().Add(time.Minute))
		_ = d.wait()
		d.set(time.Time{})
	})
	require.Zero(t, allocs, "allocations a set and clear")
	d.stop()
}
