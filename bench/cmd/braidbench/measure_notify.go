package main

import (
	"context"
	"fmt"
	"io"
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

// notify sends count messages of size bytes on one stream of e over
// loopback TCP and returns the time until the receiver has read them all.
func notify(ctx context.Context, e entry, count, size int) (time.Duration, error) {
	p, err := slowdown.LoopbackPair(ctx, e.c)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	cs, ss, err := p.OpenPair(ctx)
	if err != nil {
		return 0, err
	}
	msg := newFrame(size)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		buf := make([]byte, len(msg))
		for range count {
			if _, err := io.ReadFull(ss, buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range count {
		if _, err := cs.Write(msg); err != nil {
			return 0, ctxErr(ctx, err)
		}
	}
	if err := <-done; err != nil {
		return 0, ctxErr(ctx, err)
	}
	return time.Since(start), nil
}
