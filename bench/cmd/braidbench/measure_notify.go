package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
)

// The notification scenario reproduces Polkadot's libp2p vs litep2p
// benchmark "with backpressure" (seed 002): count messages of size bytes
// sent at once on one stream, the sender held back only by the transport.

func notifyCell(count, size int) cell {
	return cell{
		ID:       fmt.Sprintf("notify/%dKiB/%d", size>>10, count),
		Workload: wNotify, Groups: []string{wNotify},
		Title:   fmt.Sprintf("Notifications with backpressure (Polkadot): %d messages of %d KiB at once on one stream, loopback TCP", count, size>>10),
		Params:  map[string]string{"count": strconv.Itoa(count), "size": strconv.Itoa(size)},
		Metrics: []metric{{Key: mMsgps, Unit: "msgs/s", Higher: true}, {Key: mTimeMsg, Unit: "µs"}},
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			d, err := notify(ctx, e, count, size)
			if err != nil {
				return nil, err
			}
			return sample{mMsgps: float64(count) / d.Seconds(), mTimeMsg: us(d) / float64(count)}, nil
		},
	}
}

// notify is slowdown.Notify for entry e.
func notify(ctx context.Context, e entry, count, size int) (time.Duration, error) {
	return slowdown.Notify(ctx, e.c, count, size)
}
