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
// one such cell flipped between runs of the same code). At 50 ms (until
// session 47) a sample of the default plan was one run of 100-300 ms, and
// on the 2-core VMs braid is measured on one run over TLS at two P moved
// by a quarter with the vCPUs and BBR's mode: in session 47's default run
// braid's three samples of 64 KiB were 16.5k, 15.4k and 22.4k msgs/s and
// go-yamux's 19.4k, 12.2k and 19.1k, round ratios 0.85-1.26, so the
// cell's verdict was a draw of three. At 400 ms a sample is the mean of
// two to five runs over TLS (more over TCP), for about 45 s more in all.
const minNotifySample = 400 * time.Millisecond
