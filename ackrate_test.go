package braid

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ackSample is one marker's pong for TestAckRate: the bytes the peer has
// read in all, when the marker was queued and when its pong came (both
// after the test's start), and whether the writer ran out of data before
// it.
type ackSample struct {
	acked          uint64
	queued, pong   time.Duration
	idleBefore     bool
	wantBest       float64 // bytes/s
	wantFull       bool
	wantRateAt1GBs float64 // rate(1e9)
}

// TestAckRate is a table test of the peer's rate estimate (ackrate.go).
func TestAckRate(t *testing.T) {
	const (
		rtt  = 10 * time.Millisecond
		mbps = 1e6 // bytes/s
	)
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	cases := []struct {
		name    string
		samples []ackSample
	}{
		{"the first pong starts a sample; none is an estimate", []ackSample{
			{acked: 1e6, queued: 0, pong: ms(10), wantRateAt1GBs: 1e9},
		}},
		{"a sample ends once it spans a round trip", []ackSample{
			{acked: 0, queued: 0, pong: ms(10), wantRateAt1GBs: 1e9},
			{acked: 50e3, queued: ms(5), pong: ms(15), wantRateAt1GBs: 1e9}, // 5 ms: not yet
			{acked: 100e3, queued: ms(10), pong: ms(20), wantBest: 10 * mbps, wantRateAt1GBs: 1e9},
		}},
		{"three path-limited samples without growth: the path is full", []ackSample{
			{acked: 0, queued: 0, pong: ms(10)},
			{acked: 100e3, queued: ms(10), pong: ms(20), wantBest: 10 * mbps, wantRateAt1GBs: 1e9},
			{acked: 200e3, queued: ms(20), pong: ms(30), wantBest: 10 * mbps, wantRateAt1GBs: 1e9},
			{acked: 310e3, queued: ms(30), pong: ms(40), wantBest: 11 * mbps, wantRateAt1GBs: 1e9},
			{acked: 400e3, queued: ms(40), pong: ms(50), wantBest: 11 * mbps, wantFull: true, wantRateAt1GBs: ackRateGain * 11 * mbps},
			{acked: 500e3, queued: ms(50), pong: ms(60), wantBest: 11 * mbps, wantFull: true, wantRateAt1GBs: ackRateGain * 11 * mbps},
		}},
		{"growth restarts the count", []ackSample{
			{acked: 0, queued: 0, pong: ms(10)},
			{acked: 100e3, queued: ms(10), pong: ms(20), wantBest: 10 * mbps},
			{acked: 200e3, queued: ms(20), pong: ms(30), wantBest: 10 * mbps},
			{acked: 400e3, queued: ms(30), pong: ms(40), wantBest: 20 * mbps},
			{acked: 600e3, queued: ms(40), pong: ms(50), wantBest: 20 * mbps},
			{acked: 800e3, queued: ms(50), pong: ms(60), wantBest: 20 * mbps},
			{acked: 1000e3, queued: ms(60), pong: ms(70), wantBest: 20 * mbps, wantFull: true, wantRateAt1GBs: ackRateGain * 20 * mbps},
		}},
		{"app-limited samples neither count nor lower", []ackSample{
			{acked: 0, queued: 0, pong: ms(10)},
			{acked: 100e3, queued: ms(10), pong: ms(20), wantBest: 10 * mbps},
			{acked: 110e3, queued: ms(20), pong: ms(30), idleBefore: true, wantBest: 10 * mbps},
			{acked: 120e3, queued: ms(30), pong: ms(40), idleBefore: true, wantBest: 10 * mbps},
			{acked: 130e3, queued: ms(40), pong: ms(50), idleBefore: true, wantBest: 10 * mbps},
			{acked: 230e3, queued: ms(50), pong: ms(60), wantBest: 10 * mbps},
		}},
		{"pongs in a bunch: the markers' sends set the time", []ackSample{
			{acked: 0, queued: 0, pong: ms(10)},
			// 1 MB answered 1 ms after the last pong, but queued over
			// 100 ms: 10 MB/s, not 1 GB/s.
			{acked: 1e6, queued: ms(100), pong: ms(11), wantBest: 10 * mbps},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r ackRate
			t0 := time.Now()
			for i, s := range c.samples {
				if s.idleBefore {
					r.idle()
				}
				r.answered(s.acked, t0.Add(s.queued), t0.Add(s.pong), rtt)
				require.InDelta(t, s.wantBest, r.best, 1, "sample %d: estimate", i)
				require.Equal(t, s.wantFull, r.full, "sample %d: full", i)
				want := s.wantRateAt1GBs
				if want == 0 {
					want = 1e9
				}
				require.InDelta(t, want, r.rate(1e9), 1, "sample %d: rate", i)
			}
		})
	}
}

// TestAckRateHorizon: a path-limited sample lower than the estimate
// replaces it only once the estimate is ackRateHorizon old (the path's
// rate fell); one the application or the budget limited never does.
func TestAckRateHorizon(t *testing.T) {
	const rtt = 10 * time.Millisecond
	t0 := time.Now()
	var r ackRate
	r.answered(0, t0, t0, rtt)
	r.answered(1e6, t0.Add(rtt), t0.Add(rtt), rtt) // 100 MB/s
	require.InDelta(t, 100e6, r.best, 1)
	late := t0.Add(ackRateHorizon + 2*rtt)
	r.answered(1e6, late.Add(-time.Second), late.Add(-time.Second), rtt) // restarts the sample
	r.idle()
	r.answered(1.1e6, late, late, rtt) // 100 KB/s, app-limited
	require.InDelta(t, 100e6, r.best, 1, "an app-limited sample does not lower the estimate")
	r.held()
	r.answered(1.2e6, late.Add(time.Second), late.Add(time.Second), rtt) // 100 KB/s, the budget's
	require.InDelta(t, 100e6, r.best, 1, "a sample the budget held back does not lower it")
	r.answered(1.3e6, late.Add(2*time.Second), late.Add(2*time.Second), rtt) // 100 KB/s, path-limited
	require.InDelta(t, 100e3, r.best, 1, "a path-limited one does, once the estimate is old")
}

// TestInflightLinkBudget: on a path of linkRTT or more, a full estimate of
// the peer's rate sizes the budget (ackRateGain round trips' worth, at
// least minInflight), one for a lone stream too, marked every
// linkMarkersPerBudget-th of it, and bytes sent go unmarked for at most
// half a round trip. On loopback's round trips the
// estimate changes nothing: the budget and its markers are what they were.
func TestInflightLinkBudget(t *testing.T) {
	full := ackRate{best: 100e6, full: true} // 100 MB/s, 0.8 Gbit/s
	for _, rtt := range []time.Duration{10 * time.Microsecond, 200 * time.Microsecond, linkRTT - 1} {
		var with, without inflight
		with.peerRate = full
		for _, scale := range []int{1, loneDecryptScale} {
			with.setBudget(rtt, false, scale, loneDecryptMarkers)
			without.setBudget(rtt, false, scale, loneDecryptMarkers)
			require.Equal(t, without.budget, with.budget, "rtt %v scale %d: loopback's budget", rtt, scale)
			require.Equal(t, without.markerEvery(), with.markerEvery(), "rtt %v scale %d: loopback's markers", rtt, scale)
			require.Zero(t, with.markInterval, "rtt %v: no markers by time", rtt)
		}
	}

	var f inflight
	f.peerRate = full
	const rtt = 10 * time.Millisecond // 1 MB at 100 MB/s
	f.setBudget(rtt, false, 1, 0)
	require.Equal(t, int(rtt.Seconds()*ackRateGain*100e6), f.budget)
	require.Equal(t, f.budget/linkMarkersPerBudget, f.markerEvery())
	require.Equal(t, rtt/linkMarkersPerRTT, f.markInterval)
	one := f.budget
	f.setBudget(rtt, false, loneDecryptScale, loneDecryptMarkers)
	require.Equal(t, one, f.budget, "a lone stream gets one budget on a link too")
	require.Equal(t, one/linkMarkersPerBudget, f.markerEvery(), "marked as one budget")
	unknownLone := inflight{}
	unknownLone.setBudget(rtt, false, loneDecryptScale, loneDecryptMarkers)
	require.Equal(t, int(rtt.Seconds()*inflightRate)*loneDecryptScale, unknownLone.budget, "until the rate is known, its budgets")

	var slow inflight
	slow.peerRate = ackRate{best: 1e6, full: true} // 1 MB/s: 15 KB a round trip
	slow.setBudget(rtt, false, 1, 0)
	require.Equal(t, minInflight, slow.budget, "at least minInflight")

	var unknown inflight
	unknown.setBudget(rtt, false, 1, 0)
	require.Equal(t, int(rtt.Seconds()*inflightRate), unknown.budget, "no estimate yet: inflightRate's round trip")
	require.Equal(t, unknown.budget/markersPerBudget, unknown.markerEvery())
}

// TestInflightLinkMarksByTime: on a link, bytes sent unmarked for half a
// round trip need a marker even when they are far below a marker's share
// of the budget; on loopback they don't.
func TestInflightLinkMarksByTime(t *testing.T) {
	const rtt = 4 * time.Millisecond
	var f inflight
	f.setBudget(rtt, false, 1, 0) // 5 MB at inflightRate: a share is 1.25 MB
	require.False(t, f.took(1000), "just sent: no marker due")
	f.markedAt = f.markedAt.Add(-rtt / linkMarkersPerRTT)
	require.True(t, f.needMarker(), "half a round trip unmarked")
	f.mark()
	require.False(t, f.took(1000), "marked just now")

	var loop inflight
	loop.setBudget(100*time.Microsecond, false, 1, 0)
	require.False(t, loop.took(1000))
	loop.markedAt = time.Now().Add(-time.Second)
	require.False(t, loop.needMarker(), "loopback marks by bytes alone")
}

// TestRTTSampleOwnQueue: once the least round trip is older than
// rttHorizon, a longer sample replaces it only if the sender's own bytes
// in flight ahead of it (own) do not explain it; a shorter one always
// does, and with own unknown (0) the horizon alone decides, as before.
func TestRTTSampleOwnQueue(t *testing.T) {
	const base = 16 * time.Millisecond
	for _, tc := range []struct {
		name      string
		rtt, own  time.Duration
		aged      bool
		wantLeast time.Duration
	}{
		{"shorter, fresh", 10 * time.Millisecond, 0, false, 10 * time.Millisecond},
		{"longer, fresh", 28 * time.Millisecond, 0, false, base},
		{"longer, aged, own unknown", 28 * time.Millisecond, 0, true, 28 * time.Millisecond},
		{"longer, aged, own queue explains it", 28 * time.Millisecond, 27 * time.Millisecond, true, base},
		{"longer, aged, within the slack", 33 * time.Millisecond, 27 * time.Millisecond, true, base},
		{"longer, aged, beyond the slack: a new route", 40 * time.Millisecond, 28 * time.Millisecond, true, 40 * time.Millisecond},
		{"shorter, aged, own queue large", 10 * time.Millisecond, 27 * time.Millisecond, true, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pathState
			start := time.Now()
			p.rttSample(base, 0, start)
			at := start.Add(time.Second)
			if tc.aged {
				at = start.Add(rttHorizon + time.Second)
			}
			p.rttSample(tc.rtt, tc.own, at)
			if got := p.leastRTT(); got != tc.wantLeast {
				t.Errorf("least round trip %v, want %v", got, tc.wantLeast)
			}
		})
	}
}

// TestAckRateDrainTime: the time the peer takes to read n bytes is known
// once the path is full, at the best rate sampled.
func TestAckRateDrainTime(t *testing.T) {
	var r ackRate
	if got := r.drainTime(1 << 20); got != 0 {
		t.Errorf("before the path is full: %v, want 0", got)
	}
	r.full, r.best = true, 12.5e6
	if got, want := r.drainTime(125_000), 10*time.Millisecond; got != want {
		t.Errorf("125 kB at 12.5 MB/s: %v, want %v", got, want)
	}
}
