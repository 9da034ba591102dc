package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

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

func bulkCell(p plan) cell {
	return cell{
		ID: "bulk", Workload: wBulk, Groups: []string{wBulk},
		Title:   fmt.Sprintf("Bulk: one stream, %d MiB in %d KiB writes, loopback TCP", p.BulkBytes>>20, slowdown.LoopbackWrite>>10),
		Params:  map[string]string{"bytes": strconv.FormatInt(p.BulkBytes, 10), "write": strconv.Itoa(slowdown.LoopbackWrite)},
		Metrics: []metric{{Key: mMBps, Unit: "MB/s", Higher: true}},
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			r, err := slowdown.Bulk(ctx, e.c, p.BulkBytes)
			if err != nil {
				return nil, err
			}
			return sample{mMBps: float64(p.BulkBytes) / r.Time.Seconds() / bytesPerMB}, nil
		},
	}
}

func smallCell(p plan) cell {
	msgs := float64(p.SmallStreams * p.SmallPerStream)
	return cell{
		ID: "small", Workload: wSmall, Groups: []string{wSmall},
		Title: fmt.Sprintf("Small messages: %d streams x %d messages of %d B at once, loopback TCP",
			p.SmallStreams, p.SmallPerStream, p.SmallSize),
		Params: map[string]string{"streams": strconv.Itoa(p.SmallStreams), "per_stream": strconv.Itoa(p.SmallPerStream),
			"size": strconv.Itoa(p.SmallSize)},
		Metrics: []metric{{Key: mMsgps, Unit: "msgs/s", Higher: true}, {Key: mWritesMsg, Unit: "writes"}},
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			r, err := slowdown.SmallMessages(ctx, e.c, p.SmallStreams, p.SmallPerStream, p.SmallSize)
			if err != nil {
				return nil, err
			}
			return sample{mMsgps: msgs / r.Time.Seconds(), mWritesMsg: float64(r.Writes) / msgs}, nil
		},
	}
}

// pingCell is the ping-pong round trip, idle or beside neighbours bulk
// streams.
func pingCell(p plan, neighbours int) cell {
	id, load := "ping-idle", "idle"
	if neighbours > 0 {
		id, load = "ping-bulk", fmt.Sprintf("beside %d bulk streams", neighbours)
	}
	return cell{
		ID: id, Workload: wPing, Groups: []string{wPing},
		Title: fmt.Sprintf("Ping-pong: %d B round trips on one stream, %s, loopback TCP (up to %d or %v)",
			slowdown.PingPongSize, load, p.PingCount, p.PingMax),
		Params:  map[string]string{"neighbours": strconv.Itoa(neighbours), "count": strconv.Itoa(p.PingCount)},
		Metrics: []metric{{Key: mP50, Unit: "µs"}, {Key: mP99, Unit: "µs"}},
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			rtts, err := slowdown.PingPong(ctx, e.c, p.PingCount, neighbours, p.PingMax)
			if err != nil {
				return nil, err
			}
			return sample{
				mP50: us(slowdown.Percentile(rtts, 50)),
				mP99: us(slowdown.Percentile(rtts, 99)),
			}, nil
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
