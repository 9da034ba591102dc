package braid

import "time"

// The rate the peer reads this side's stream data at, learned from the
// in-flight bound's markers, so that on a real link the bound keeps about
// the path's bandwidth-delay product in flight rather than inflightRate's.
//
// The budget covers a round trip at inflightRate (10 Gbit/s). On loopback
// that is below every floor, which size the budget there; on a path whose
// round trip is linkRTT or more and whose rate is below inflightRate it is
// no bound at all: 1 Gbit/s with a 1 ms round trip gets a 1.25
// MB budget for a 125 KB path, and whatever the sender has in flight
// beyond the path queues in the bottleneck's buffer (or, where the socket
// is reachable but the congestion control fills buffers, in the network),
// ahead of the next small message of another stream. Measured on slowconn
// links, 10 streams writing 64 KiB beside a 64 B ping-pong at GOMAXPROCS 2
// (session 44, BenchmarkPingPongLink): on LAN the ping's p50 was 13.9 ms
// for a 1 ms round trip, on Broadband 48.5 ms for 16 ms, each the link's
// whole buffer ahead of it. With the estimate: 4.5-4.8 and 25-29 ms, the
// bulk the same (docs/measurements.md, "Session 44").
//
// Each marker's pong says the peer has read every byte before it; the
// bytes answered over at least a round trip, divided by its time, are a
// sample of the rate the path delivers. Samples taken while the writer
// always had stream data waiting measure the path; a sample in which the
// writer ran out of data (app-limited) measures the application, and one
// in which the budget held data back measures the budget: either may
// only raise the estimate, as in BBR's delivery-rate estimation. The
// estimate is the best sample within ackRateHorizon. Once it has stopped
// growing (ackRateFullSamples path-limited samples in a row, each less
// than ackRateGrowth above the best before it: the path is full, BBR's
// test), the budget of such a path covers a round trip at ackRateGain
// times it instead, never more than inflightRate's, one budget for a lone
// stream too, and carries linkMarkersPerBudget markers
// (inflight.setBudget). Paths of a shorter
// round trip (loopback) are sized as before: the estimate is kept, not
// used.

const (
	// ackRateGain is what the budget covers a round trip at, in times the
	// estimated rate, once the path is full: the path's bandwidth-delay
	// product and three quarters again. What is beyond the product is
	// what a small message beside the bulk waits behind, and the slack
	// that keeps the path busy through the budget's steps
	// (linkMarkersPerBudget), a frame being serialized ahead of a marker
	// and pongs that come late. Measured (session 44, the ping beside 10
	// bulk streams; p50, bulk MB/s): slowconn in synctest, Broadband at
	// 1.5 24.2 ms and 12.14 of 12.17, at 1.75 28.2 and 12.14, at 2 32.2
	// and 12.13 (48.5 and 12.16 before), LAN 2.16 ms and 121.4 of 121.7
	// at each (9.7 before); in real time, LAN at GOMAXPROCS 2, six runs
	// each, 1.5 112-122 MB/s (mean 117; 121.3-121.8 before) at 2.4-6.0
	// ms, 1.75 120.7-122.7 at 3.7-10.7 (median 4.3), 2 120.7-122.2 at
	// 4.6-7.0 (14.1 before): slowconn's timers deliver up to a
	// millisecond late in real time, as a busy receiver's reads would, and
	// a budget of 1.5 least round trips did not cover that on a 1 ms path.
	ackRateGain = 1.75
	// ackRateGrowth is how much above the best sample before it a sample
	// must be to count as growth: BBR's full-pipe threshold.
	ackRateGrowth = 1.25
	// ackRateFullSamples is how many path-limited samples in a row
	// without growth mean the path is full (BBR counts three rounds).
	ackRateFullSamples = 3
	// ackRateHorizon is how long the best sample stands before a
	// path-limited lower one may replace it: the path's rate may fall
	// (another flow shares its bottleneck), and until the estimate
	// follows, the budget is as large as before, never smaller.
	ackRateHorizon = 10 * time.Second
)

// ackRate estimates the rate the peer reads stream data at. Guarded by
// writer.mu (it is part of inflight).
type ackRate struct {
	startAcked uint64    // inflight.acked at the sample's start
	startSent  time.Time // when the marker that started the sample was queued; zero: no sample yet
	startAck   time.Time // when its pong came
	appLimited bool      // the writer ran out of stream data during the sample
	heldBack   bool      // the budget held stream data back during the sample
	best       float64   // bytes/s, the estimate; 0 until sampled
	bestAt     time.Time // when best was set
	flat       int       // path-limited samples in a row without growth
	full       bool      // the estimate stopped growing: it caps the budget
}

// answered takes the pong of a marker queued at queued, received at now,
// with acked the bytes of stream data the peer has now read in all, and
// rtt the path's least round trip. A sample ends once it spans a round
// trip; its time is the longer of the markers' sends and their pongs',
// so that pongs that come in a bunch (a peer that read a burst at once)
// don't read as a rate the path never had (BBR's delivery rate takes the
// same care). mu held.
func (r *ackRate) answered(acked uint64, queued, now time.Time, rtt time.Duration) {
	if r.startSent.IsZero() || acked < r.startAcked {
		r.restart(acked, queued, now)
		return
	}
	elapsed := max(queued.Sub(r.startSent), now.Sub(r.startAck))
	if rtt <= 0 || elapsed < rtt {
		return
	}
	s := float64(acked-r.startAcked) / elapsed.Seconds()
	limited := !r.appLimited
	if limited {
		if s < r.best*ackRateGrowth {
			r.flat++
		} else {
			r.flat = 0
		}
		if r.flat >= ackRateFullSamples {
			r.full = true
		}
	}
	// A sample may lower the estimate only if neither the application
	// nor the budget it sizes set its rate: a budget sized from a round
	// trip that has since grown (a new route; the least round trip
	// stands a minute, rttHorizon) would otherwise measure itself, lower
	// the estimate, shrink, and measure itself again.
	if s > r.best || limited && !r.heldBack && now.Sub(r.bestAt) > ackRateHorizon {
		r.best, r.bestAt = s, now
	}
	r.restart(acked, queued, now)
}

// restart begins a sample with the pong of a marker queued at queued,
// received at now. mu held.
func (r *ackRate) restart(acked uint64, queued, now time.Time) {
	r.startAcked, r.startSent, r.startAck = acked, queued, now
	r.appLimited, r.heldBack = false, false
}

// idle records that the writer ran out of stream data: the sample under
// way measures the application, not the path. mu held.
func (r *ackRate) idle() { r.appLimited = true }

// held records that the budget held stream data back: the sample under
// way measures the budget, and may raise the estimate but not lower it.
// mu held.
func (r *ackRate) held() { r.heldBack = true }

// drainTime is how long the peer takes to read n bytes at the estimated
// rate: what n bytes queued ahead of a ping add to its round trip. 0
// until the path is full (the estimate may still be growing). mu held.
func (r *ackRate) drainTime(n uint64) time.Duration {
	if !r.full || r.best <= 0 {
		return 0
	}
	return time.Duration(float64(n) / r.best * float64(time.Second))
}

// rate is the rate the budget covers a round trip at: ceiling, or
// ackRateGain times the estimate once the path is full, whichever is
// less. mu held.
func (r *ackRate) rate(ceiling float64) float64 {
	if !r.full || r.best <= 0 {
		return ceiling
	}
	return min(ceiling, ackRateGain*r.best)
}
