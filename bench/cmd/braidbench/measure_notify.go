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

func notifyCell(count, size int, t transport, procs int) cell {
	id, title := atProcs(fmt.Sprintf("notify/%dKiB/%d%s", size>>10, count, t.id),
		fmt.Sprintf("Notifications with backpressure (Polkadot): %d messages of %d KiB at once on one stream, %s", count, size>>10, t.where), procs)
	return cell{
		ID:       id,
		Workload: wNotify, Groups: []string{wNotify},
		Title:   title,
		Params:  map[string]string{"count": strconv.Itoa(count), "size": strconv.Itoa(size), "transport": t.name()},
		Metrics: []metric{{Key: mMsgps, Unit: "msgs/s", Higher: true}, {Key: mTimeMsg, Unit: "µs"}},
		Procs:   procs,
		Note:    fmt.Sprintf("A sample repeats the run, each on a fresh connection, until the runs took %v.", minNotifySample),
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			var total time.Duration
			runs := 0
			for runs == 0 || total < minNotifySample {
				d, err := slowdown.Notify(ctx, t.over(e), count, size)
				if err != nil {
					return nil, err
				}
				total += d
				runs++
			}
			msgs := float64(count * runs)
			return sample{mMsgps: msgs / total.Seconds(), mTimeMsg: us(total) / msgs}, nil
		},
	}
}

// minNotifySample is the least time one sample of a notification cell
// measures: 100 messages of 64 KiB take about 2 ms on loopback, where one
// scheduling hiccup or GC moves a single run by a third (the verdict of
// one such cell flipped between runs of the same code); repeated to 50
// ms, a round's sample is about as steady as the long cells'.
const minNotifySample = 50 * time.Millisecond
