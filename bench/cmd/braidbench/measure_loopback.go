package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
)

// The loopback workloads: braid's benchmarks (benchmarks_test.go) as fixed
// amounts of work over loopback TCP.

// bytesPerMB makes MB/s (10^6 bytes per second).
const bytesPerMB = 1e6

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// us converts a duration to microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// transport is what the loopback cells run over: TCP, or TLS 1.3 on TCP
// (every libp2p connection is secured; the raw limit is then one TLS
// connection per stream).
type transport struct {
	id, where string // ID suffix and title words
	tls       bool
}

func tcpTransport() transport { return transport{id: "", where: "loopback TCP"} }
func tlsTransport() transport {
	return transport{id: "/tls", where: "TLS 1.3 over loopback TCP", tls: true}
}

// over is e's contender over t.
func (t transport) over(e entry) contenders.Contender {
	if t.tls {
		return contenders.TLS(e.c)
	}
	return e.c
}

// name is the transport's params value.
func (t transport) name() string {
	if t.tls {
		return "tls"
	}
	return "tcp"
}

// atProcs names a cell that runs at GOMAXPROCS procs (0: the process's
// own) in its ID and title.
func atProcs(id, title string, procs int) (string, string) {
	if procs > 0 {
		id += fmt.Sprintf("/p%d", procs)
		title += fmt.Sprintf(", GOMAXPROCS %d", procs)
	}
	return id, title
}

// bulkCell is one stream's bulk over t at GOMAXPROCS procs: MB/s, and the
// process's heap allocations per write+read (both ends; issue #12 asks
// for none of braid's own, and go test asserts it over TCP in
// TestZeroAllocsBulkWriteRead).
func bulkCell(p plan, t transport, procs int) cell {
	id, title := atProcs("bulk"+t.id,
		fmt.Sprintf("Bulk: one stream, %d MiB in %d KiB writes, %s", p.BulkBytes>>20, slowdown.LoopbackWrite>>10, t.where), procs)
	writes := float64((p.BulkBytes + slowdown.LoopbackWrite - 1) / slowdown.LoopbackWrite)
	return cell{
		ID: id, Workload: wBulk, Groups: []string{wBulk},
		Title:   title,
		Params:  map[string]string{"bytes": strconv.FormatInt(p.BulkBytes, 10), "write": strconv.Itoa(slowdown.LoopbackWrite), "transport": t.name()},
		Metrics: []metric{{Key: mMBps, Unit: "MB/s", Higher: true}, {Key: mAllocsOp, Unit: "allocs"}},
		Procs:   procs,
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			r, err := slowdown.Bulk(ctx, t.over(e), p.BulkBytes)
			if err != nil {
				return nil, err
			}
			return sample{mMBps: float64(p.BulkBytes) / r.Time.Seconds() / bytesPerMB, mAllocsOp: float64(r.Mallocs) / writes}, nil
		},
	}
}

// smallCell is many streams of small messages over t at GOMAXPROCS procs.
func smallCell(p plan, t transport, procs int) cell {
	msgs := float64(p.SmallStreams * p.SmallPerStream)
	id, title := atProcs("small"+t.id, fmt.Sprintf("Small messages: %d streams x %d messages of %d B at once, %s",
		p.SmallStreams, p.SmallPerStream, p.SmallSize, t.where), procs)
	return cell{
		ID: id, Workload: wSmall, Groups: []string{wSmall},
		Title: title,
		Params: map[string]string{"streams": strconv.Itoa(p.SmallStreams), "per_stream": strconv.Itoa(p.SmallPerStream),
			"size": strconv.Itoa(p.SmallSize), "transport": t.name()},
		Metrics: []metric{{Key: mMsgps, Unit: "msgs/s", Higher: true}, {Key: mWritesMsg, Unit: "writes"}},
		Procs:   procs,
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			r, err := slowdown.SmallMessages(ctx, t.over(e), p.SmallStreams, p.SmallPerStream, p.SmallSize)
			if err != nil {
				return nil, err
			}
			return sample{mMsgps: msgs / r.Time.Seconds(), mWritesMsg: float64(r.Writes) / msgs}, nil
		},
	}
}

// pingCell is the ping-pong round trip, idle or beside neighbours bulk
// streams, over t, at GOMAXPROCS procs (0 leaves it). Beside bulk it also
// reports the neighbours' goodput, so that no contender wins the latency by
// starving bulk.
func pingCell(p plan, neighbours int, t transport, procs int) cell {
	id, load := "ping-idle", "idle"
	if neighbours > 0 {
		id, load = "ping-bulk", fmt.Sprintf("beside %d bulk streams", neighbours)
	}
	id += t.id
	count := fmt.Sprintf("up to %d or %v", p.PingCount, p.PingMax)
	if neighbours > 0 {
		count = loadedPingCount(p)
	}
	id, title := atProcs(id, fmt.Sprintf("Ping-pong: %d B round trips on one stream, %s, %s (%s)",
		slowdown.PingPongSize, load, t.where, count), procs)
	return cell{
		ID: id, Workload: wPing, Groups: []string{wPing},
		Title:   title,
		Params:  map[string]string{"neighbours": strconv.Itoa(neighbours), "count": strconv.Itoa(p.PingCount), "transport": t.name()},
		Metrics: pingMetrics(neighbours > 0),
		Procs:   procs,
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			r, err := slowdown.PingPongLoad(ctx, t.over(e), p.PingCount, neighbours, p.PingMax)
			if err != nil {
				return nil, err
			}
			return pingSample(r, neighbours > 0), nil
		},
	}
}

// acceptingPingCell is the idle ping-pong as a go-libp2p host runs it,
// with an Accept waiting on both sessions throughout
// (slowdown.PingPongHost), over t at GOMAXPROCS procs: a host's swarm
// accepts every stream the peer opens, so its muxer must read a new
// stream's frames at any moment, not only when a Read waits. Issue #12's
// idle target holds it to go-yamux. (The host rows, measure_hosts.go, run
// real go-libp2p hosts.)
func acceptingPingCell(p plan, t transport, procs int) cell {
	id, title := atProcs("ping-accepting"+t.id, fmt.Sprintf(
		"Ping-pong: %d B round trips on one stream, idle, an Accept waiting on both sessions (as in a go-libp2p host), %s (up to %d or %v)",
		slowdown.PingPongSize, t.where, p.PingCount, p.PingMax), procs)
	return cell{
		ID: id, Workload: wPing, Groups: []string{wPing},
		Title:   title,
		Params:  map[string]string{"neighbours": "0", "accepting": "true", "count": strconv.Itoa(p.PingCount), "transport": t.name()},
		Metrics: pingMetrics(false),
		Procs:   procs,
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			r, err := slowdown.PingPongHost(ctx, t.over(e), p.PingCount, p.PingMax)
			if err != nil {
				return nil, err
			}
			return pingSample(r, false), nil
		},
	}
}

// loadedPingCount says how many round trips a ping beside bulk streams
// makes, for a cell's title.
func loadedPingCount(p plan) string {
	return fmt.Sprintf("%d, or more until the bulk streams have moved %d MiB; at most %v",
		p.PingCount, slowdown.BulkMeasured>>20, p.PingMax)
}

// pingMetrics are a ping cell's metrics: p50 and p99, and with bulk the
// neighbours' goodput.
func pingMetrics(bulk bool) []metric {
	m := []metric{{Key: mP50, Unit: "µs"}, {Key: mP99, Unit: "µs"}}
	if bulk {
		m = append(m, metric{Key: mBulkMBps, Unit: "MB/s", Higher: true})
	}
	return m
}

// pingSample is a ping run's sample of pingMetrics(bulk).
func pingSample(r slowdown.PingResult, bulk bool) sample {
	sorted := r.Sorted()
	s := sample{
		mP50: us(slowdown.Percentile(sorted, 50)),
		mP99: us(slowdown.Percentile(sorted, 99)),
	}
	if bulk {
		s[mBulkMBps] = r.BulkMBps()
	}
	return s
}

// spacedPingCell is the ping beside p.PingNeighbours bulk streams with a
// random pause before each round trip (slowdown.PingPongSpaced, mean
// slowdown.SpacedGap), over t at GOMAXPROCS procs: requests at random
// moments of the bulk traffic, where the back-to-back ping of pingCell
// samples a muxer whose bulk comes in bursts by count, mostly between
// its bursts. No issue names it, so the verdict holds it to go-yamux.
func spacedPingCell(p plan, t transport, procs int) cell {
	id, title := atProcs("ping-spaced"+t.id, fmt.Sprintf(
		"Ping-pong at random moments: %d B round trips on one stream beside %d bulk streams, each after a pause uniform in [0, %v), %s (%s)",
		slowdown.PingPongSize, p.PingNeighbours, 2*slowdown.SpacedGap, t.where, loadedPingCount(p)), procs)
	return cell{
		ID: id, Workload: wPingSpaced, Groups: []string{wPing},
		Title:   title,
		Params:  map[string]string{"neighbours": strconv.Itoa(p.PingNeighbours), "count": strconv.Itoa(p.PingCount), "transport": t.name()},
		Metrics: pingMetrics(true),
		Procs:   procs,
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			r, err := slowdown.PingPongSpaced(ctx, t.over(e), p.PingCount, p.PingNeighbours, slowdown.SpacedGap, p.PingMax)
			if err != nil {
				return nil, err
			}
			return pingSample(r, true), nil
		},
	}
}

func idleCell(p plan) cell {
	return cell{
		ID: "idle", Workload: wIdle, Groups: []string{wIdle},
		Title:   fmt.Sprintf("Memory per idle stream: heap with %d streams open, both ends, loopback TCP", p.IdleStreams),
		Params:  map[string]string{"streams": strconv.Itoa(p.IdleStreams)},
		Metrics: []metric{{Key: mHeap, Unit: "B"}},
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			b, err := slowdown.IdleStreamHeap(ctx, e.forIdle(2*p.IdleStreams), p.IdleStreams)
			if err != nil {
				return nil, err
			}
			return sample{mHeap: b}, nil
		},
		na: func(e entry) string {
			if e.raw {
				return "a TCP connection's memory is the kernel's, not the Go heap"
			}
			return ""
		},
	}
}
