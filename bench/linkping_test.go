package bench_test

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
)

// A small message beside bulk traffic on a link: where the link, not the
// CPU, is the bottleneck, what the sender keeps in flight beyond the
// path's bandwidth-delay product queues in the link's buffer ahead of the
// next small message. braid's in-flight budget follows the peer's read
// rate there (ackrate.go).

// linkPingProfiles are the links of the ping beside bulk on a link: a
// data-centre LAN, home broadband, the same behind a bloated buffer
// (slowconn.Bufferbloat) and a long fat path. (Mobile's loss makes its
// bulk slow to warm up: minutes for six contenders.)
func linkPingProfiles() []slowconn.Profile {
	return []slowconn.Profile{
		{Name: "LAN", Link: slowconn.LAN()},
		{Name: "Broadband", Link: slowconn.Broadband()},
		{Name: "Bufferbloat", Link: slowconn.Bufferbloat()},
		{Name: "LongFat", Link: slowconn.LongFat()},
	}
}

// BenchmarkPingPongLink: 64 B ping-pong on one stream while 10 streams
// write 64 KiB, over a slowconn link in real time (slowdown.PingPongLink).
// One op is one round trip; reports p50, p99 and the mean in µs, and the
// bulk streams' MB/s (the link's goodput is the most they can move). The
// muxers only: raw TCP gives each stream a loopback connection of its
// own, off the link. -benchtime 20x takes a few seconds a contender.
func BenchmarkPingPongLink(b *testing.B) {
	muxers := slices.DeleteFunc(field(), func(c contenders.Contender) bool { return c.Name == contenders.RawTCP().Name })
	for _, l := range linkPingProfiles() {
		for _, c := range muxers {
			b.Run("link="+l.Name+"/impl="+c.Name, func(b *testing.B) {
				r, err := slowdown.PingPongLink(context.Background(), c, l.Link, b.N, bulkNeighbours, pingPongMaxTime)
				if err != nil {
					b.Fatal(err)
				}
				reportPing(b, r, true)
			})
		}
	}
}

// TestPingBesideBulkSimulated: on a simulated LAN and broadband link, and
// broadband behind a bloated buffer (synctest: the link's time alone,
// exact), a 64 B ping-pong beside 10 bulk streams takes at most two of the
// link's round trips and two 64 KiB frames' serialization (what is ahead
// of it is at most a round trip's bytes, where the link's whole buffer was
// before: 9.7-10.2, 48.5 and 194.0 ms), and
// the bulk streams keep 97 % of the link's goodput, at GOMAXPROCS 1, 2
// and 4.
func TestPingBesideBulkSimulated(t *testing.T) {
	const (
		roundTrips = 50
		bulkShare  = 0.97
	)
	for _, l := range linkPingProfiles() {
		if l.Name == "LongFat" {
			// slowconn's buffer there is about the path's product, below
			// the budget: nothing for the budget to bound, and the
			// minute of simulated transfer the longest of these runs.
			continue
		}
		link := l.Link
		frame := time.Duration(float64(64<<10+frameHeader) * 8 / float64(link.Bandwidth) * float64(time.Second))
		limit := 2*(2*link.Latency) + 2*frame
		for _, procs := range procsSweep {
			var r slowdown.PingResult
			func() {
				prev := runtime.GOMAXPROCS(procs)
				defer runtime.GOMAXPROCS(prev)
				synctest.Test(t, func(t *testing.T) {
					var err error
					r, err = slowdown.PingPongLink(context.Background(), contenders.Braid(true), link, roundTrips, bulkNeighbours, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
				})
			}()
			sorted := r.Sorted()
			p50, p99 := slowdown.Percentile(sorted, 50), slowdown.Percentile(sorted, 99)
			goodput := link.Goodput() / 1e6
			t.Logf("%s, GOMAXPROCS %d: p50 %v, p99 %v (bound %v); bulk %.2f MB/s of %.2f", l.Name, procs, p50, p99, limit, r.BulkMBps(), goodput)
			if p50 > limit {
				t.Errorf("%s, GOMAXPROCS %d: p50 %v beside bulk, want <= %v", l.Name, procs, p50, limit)
			}
			if r.BulkMBps() < bulkShare*goodput {
				t.Errorf("%s, GOMAXPROCS %d: bulk %.2f MB/s, want >= %.2f", l.Name, procs, r.BulkMBps(), bulkShare*goodput)
			}
		}
	}
}

// TestLinkBudgetHoldsPastRTTHorizon: the ping beside bulk on a link keeps
// its round trip after the path's least round trip has aged past braid's
// horizon (a minute) twice. While the bulk streams keep the path full,
// every round trip sampled includes the queue the budget keeps; a budget
// sized by such a sample kept a longer queue, and a minute later the
// next. Here a ping-pong beside 10 bulk streams runs for three simulated
// minutes on Broadband, and the last 500 round trips must keep the bound
// of TestPingBesideBulkSimulated. Before rttSample told its own queue
// apart, their p50 was 48.5 ms (the link's whole buffer, as without the
// budget), the first 500's 28.2.
func TestLinkBudgetHoldsPastRTTHorizon(t *testing.T) {
	const (
		span = 3 * time.Minute
		last = 500
	)
	link := slowconn.Broadband()
	frame := time.Duration(float64(64<<10+frameHeader) * 8 / float64(link.Bandwidth) * float64(time.Second))
	limit := 2*(2*link.Latency) + 2*frame
	synctest.Test(t, func(t *testing.T) {
		// At most a round trip of 2 x Latency each, so that the run
		// lasts at least span; maxTime ends it there.
		n := int(span / (2 * link.Latency))
		r, err := slowdown.PingPongLink(context.Background(), contenders.Braid(true), link, n, bulkNeighbours, span)
		if err != nil {
			t.Fatal(err)
		}
		rtts := r.RTTs
		if len(rtts) < 2*last {
			t.Fatalf("%d round trips in %v, want at least %d", len(rtts), span, 2*last)
		}
		var elapsed time.Duration
		for _, d := range rtts {
			elapsed += d
		}
		p50 := func(d []time.Duration) time.Duration { return slowdown.Percentile(slices.Sorted(slices.Values(d)), 50) }
		first, end := p50(rtts[:last]), p50(rtts[len(rtts)-last:])
		t.Logf("%d round trips over %v: p50 %v in the first %d, %v in the last (bound %v); bulk %.2f MB/s", len(rtts), elapsed.Round(time.Second), first, last, end, limit, r.BulkMBps())
		if elapsed < 2*time.Minute {
			t.Errorf("the round trips spanned %v, want past two minutes (the horizon twice)", elapsed)
		}
		if end > limit {
			t.Errorf("p50 of the last %d round trips %v, want <= %v", last, end, limit)
		}
	})
}
