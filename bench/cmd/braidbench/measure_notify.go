package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/braidmux/braid/bench/internal/slowdown"
)

// The notification scenario reproduces Polkadot's libp2p vs litep2p
// benchmark "with backpressure" (seed 002): count messages of size bytes
// sent at once on one stream, the sender held back only by the transport.

func notifyCell(count, size int, t transport) cell {
	return cell{
		ID:       fmt.Sprintf("notify/%dKiB/%d%s", size>>10, count, t.id),
		Workload: wNotify, Groups: []string{wNotify},
		Title:   fmt.Sprintf("Notifications with backpressure (Polkadot): %d messages of %d KiB at once on one stream, %s", count, size>>10, t.where),
		Params:  map[string]string{"count": strconv.Itoa(count), "size": strconv.Itoa(size), "transport": t.name()},
		Metrics: []metric{{Key: mMsgps, Unit: "msgs/s", Higher: true}, {Key: mTimeMsg, Unit: "µs"}},
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			d, err := slowdown.Notify(ctx, t.over(e), count, size)
			if err != nil {
				return nil, err
			}
			return sample{mMsgps: float64(count) / d.Seconds(), mTimeMsg: us(d) / float64(count)}, nil
		},
	}
}
