package slowconn

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// Real-time tests measure what the simulator delivers on a real clock, where
// timers fire late and the CPU is shared. Timing noise only ever makes a
// measurement slower than the model, so each check is best of attempts.

const (
	// attempts is how often a real-time measurement is repeated before
	// the best result is judged; this machine is shared and noisy.
	attempts = 3
	// goodputTolerance is the accuracy the simulator promises for
	// sustained goodput.
	goodputTolerance = 0.02
	// raceGoodputTolerance replaces goodputTolerance at 1 Gbit/s under
	// the race detector, which slows the simulator's own work about
	// tenfold: with 1 KiB writes (117,000 Writes a second) the transfer
	// becomes CPU-bound, measured at 40-140 % slower than the link on a
	// loaded 2-core machine. The bound (four times the model's time) still
	// catches a stalled link, the lower bound (never faster than the
	// model) still applies, and TestSynctestGoodputExact checks the same
	// model exactly under -race.
	raceGoodputTolerance = 3.0
	// latencyTolerance is how late the first byte may be: Go can wake a
	// timer up to about a millisecond late.
	latencyTolerance = time.Millisecond
	// transferTime is roughly how long each goodput measurement runs, so
	// that one latency and a late timer are small against it.
	transferTime = 600 * time.Millisecond
)

func TestRealtimeGoodput(t *testing.T) {
	for _, rate := range []int64{10e6, 100e6, 1e9} {
		for _, writeSize := range []int{64 << 10, 1 << 10} {
			t.Run(fmt.Sprintf("%dMbit/%dB", rate/1e6, writeSize), func(t *testing.T) {
				l := Link{Bandwidth: rate, Latency: time.Millisecond}
				l.SendBuffer = robustSendBuffer(l)
				total := int(l.Goodput() * transferTime.Seconds())
				want := modelTime(l, total, writeSize)
				tol := goodputTolerance
				if raceEnabled && rate >= 1e9 {
					tol = raceGoodputTolerance
				}
				best := time.Duration(math.MaxInt64)
				for range attempts {
					a, b := Pipe(l)
					res := transfer(t, a, b, total, writeSize)
					a.Close()
					b.Close()
					best = min(best, res.elapsed)
					if relErr(best, want) <= tol {
						break
					}
				}
				t.Logf("%d bytes in %v, model %v: error %+.2f%%", total, best, want, 100*relErr(best, want))
				if best < want {
					t.Errorf("transfer took %v, faster than the model's %v", best, want)
				}
				if e := relErr(best, want); e > tol {
					t.Errorf("transfer took %v, model %v: %.2f%% slower, want within %.0f%%", best, want, 100*e, 100*tol)
				}
			})
		}
	}
}

// robustSendBuffer returns a send buffer holding a tenth of a second of
// traffic on l. The real-time goodput tests use it because they check the
// model, not the machine: the test machine is shared, and a writer or
// reader starved of CPU for longer than the default buffer lasts (a round
// trip plus 10 ms) would idle the link however exact the model is. With
// this buffer only starvation longer than 100 ms shows. The default buffer
// is checked exactly, where CPU time is free, by TestSynctestGoodputExact.
func robustSendBuffer(l Link) int {
	return int(l.Goodput() / 10)
}

// relErr returns how much longer got is than want, as a fraction.
func relErr(got, want time.Duration) float64 {
	return float64(got-want) / float64(want)
}

func TestRealtimeFirstByteLatency(t *testing.T) {
	l := Link{Bandwidth: 100e6, Latency: 10 * time.Millisecond}
	a, b := Pipe(l)
	defer a.Close()
	defer b.Close()
	want := serialization(l, 1+l.Overhead()) + l.Latency
	best := time.Duration(math.MaxInt64)
	for range 5 {
		start := time.Now()
		a.Write([]byte{1})
		if _, err := b.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		got := time.Since(start)
		if got < want {
			t.Errorf("first byte after %v, earlier than the model's %v", got, want)
		}
		best = min(best, got)
	}
	t.Logf("first byte after %v, model %v", best, want)
	if best > want+latencyTolerance {
		t.Errorf("first byte after %v, want within %v of %v", best, latencyTolerance, want)
	}
}

// TestRealtimeJitter checks jitter on a real clock. Every delay must be at
// least the latency (the simulator is never early). A CPU-starved reader
// can make any single delay long on a shared machine, so the upper bound
// and the spread are judged on the 10th and 90th percentiles, best of a few
// runs; TestSynctestJitter checks the exact bounds.
func TestRealtimeJitter(t *testing.T) {
	const jitterAttempts = 5 // each run takes 0.2 s
	l := Link{Bandwidth: 100e6, Latency: 5 * time.Millisecond, Jitter: 4 * time.Millisecond}
	// A delay may exceed the model by a late timer.
	limit := l.Latency + l.Jitter + latencyTolerance
	var p10, p90 time.Duration
	for range jitterAttempts {
		delays := jitterRun(t, l)
		slices.Sort(delays)
		p10, p90 = delays[len(delays)/10], delays[len(delays)*9/10]
		t.Logf("one-way delays: min %v, 10th percentile %v, 90th %v, max %v; configured [%v, %v]",
			delays[0], p10, p90, delays[len(delays)-1], l.Latency, l.Latency+l.Jitter)
		if delays[0] < l.Latency {
			t.Fatalf("shortest delay %v is below the latency %v", delays[0], l.Latency)
		}
		if p90 <= limit && p90-p10 >= l.Jitter/2 {
			return
		}
	}
	if p90 > limit {
		t.Errorf("90th percentile delay %v exceeds latency+jitter %v by more than %v", p90, l.Latency+l.Jitter, latencyTolerance)
	}
	if p90-p10 < l.Jitter/2 {
		t.Errorf("delays spread over %v (10th to 90th percentile), want at least half the %v jitter", p90-p10, l.Jitter)
	}
}

// jitterRun sends small messages at a steady pace over l, checks they
// arrive in order, and returns their one-way delays.
func jitterRun(t *testing.T, l Link) []time.Duration {
	const (
		count   = 100
		size    = 16
		spacing = 2 * time.Millisecond
	)
	a, b := Pipe(l)
	defer a.Close()
	defer b.Close()
	sent := make(chan time.Time, count)
	go func() {
		next := time.Now()
		for i := range count {
			sent <- time.Now()
			a.Write(message(i, size))
			next = next.Add(spacing)
			time.Sleep(time.Until(next))
		}
	}()
	times, msgs := readMessages(t, b, count, size)
	delays := make([]time.Duration, count)
	for i := range count {
		if !bytes.Equal(msgs[i], message(i, size)) {
			t.Fatalf("message %d out of order: %x", i, msgs[i])
		}
		delays[i] = times[i].Sub(<-sent)
	}
	return delays
}

func TestRealtimeLoss(t *testing.T) {
	l := Link{Bandwidth: 100e6, Latency: 2 * time.Millisecond, Loss: 0.003, Seed: 3}
	const total = 2 << 20
	a, b := Pipe(l)
	defer a.Close()
	defer b.Close()
	res := transfer(t, a, b, total, 64<<10) // fails unless every byte arrives in order
	lossless := modelTime(l, total, 64<<10)
	t.Logf("%d bytes with %.1f%% loss in %v; lossless model %v, RTO %v", total, 100*l.Loss, res.elapsed, lossless, l.RTO())
	if res.elapsed < lossless+l.RTO() {
		t.Errorf("took %v, want at least the lossless %v plus one RTO %v", res.elapsed, lossless, l.RTO())
	}
}
