// Command writecost measures what a writer over crypto/tls spends per 64
// KiB message on loopback TCP, part by part, and what that leaves a
// muxer to gain over another: the kernel's cost of one write(2) of a TLS
// record (a reader draining the other end), of a short record after it,
// of the same records under TCP_CORK and of four records in one write,
// beside the cost of sealing a record (AES-128-GCM) and of copying a
// message.
//
// crypto/tls seals each record of a Write and writes it with a write(2)
// of its own, so a 64 KiB message is at least four records and four
// writes, whoever writes it. Raw TLS writes a fifth, short record per
// message of a few bytes more than 64 KiB, and go-yamux one more per
// frame header cut (session 46's `perf stat`: 5.0 and 5.1 writes per 64
// KiB message, braid 4.4). At two P the writer's goroutine is the busy
// end of a one-stream flow over TLS (session 47's trace: braid's writer
// running or in a system call 88 % of the run), so the rate is the
// inverse of the writer's time per message, and the best a muxer can do
// against another is the ratio of their writer times. writecost prints
// those times and ratios:
//
//	go run ./bench/cmd/writecost -procs 2 -rounds 5
//
// Issue #12's target 3 asks 1.2x go-yamux for TLS notifications
// (README.md, "What falls short"). The cork and four-records rows are
// Linux's (TCP_CORK); elsewhere they are left out.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "writecost:", err)
		os.Exit(2)
	}
}

// run parses the flags, measures every shape once a round, in turn, and
// prints each one's median and the writer's time per message they add up
// to.
func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("writecost", flag.ContinueOnError)
	procs := fs.Int("procs", 2, "GOMAXPROCS")
	rounds := fs.Int("rounds", 3, "rounds; each measures every shape once, in turn")
	mib := fs.Int("mib", 1024, "MiB written per shape and round")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 || *mib < 1 || *procs < 1 {
		return fmt.Errorf("rounds, mib and procs must be positive")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*procs))
	total := int64(*mib) << 20
	costs := make([][]time.Duration, len(shapes))
	var seals, copies []time.Duration
	for r := range *rounds {
		for i, s := range shapes {
			d, err := s.run(total)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			costs[i] = append(costs[i], d)
			fmt.Fprintf(out, "round %d %-36s %7.2f µs a record\n", r+1, s.name, us(d))
		}
		seal, err := sealCost(total)
		if err != nil {
			return err
		}
		seals = append(seals, seal)
		copies = append(copies, copyCost(total))
	}
	med := make(map[string]time.Duration, len(shapes))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nloopback TCP, GOMAXPROCS %d, %d rounds\tmedian µs a record\tMB/s\n", *procs, *rounds)
	for i, s := range shapes {
		m := median(costs[i])
		med[s.name] = m
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\n", s.name, us(m), float64(recordWire)/us(m))
	}
	seal, cp := median(seals), median(copies)
	fmt.Fprintf(tw, "seal of a record (AES-128-GCM)\t%.2f\t%.0f\n", us(seal), float64(recordPlain)/us(seal))
	fmt.Fprintf(tw, "copy of a 64 KiB message\t%.2f (a message)\t%.0f\n", us(cp), float64(messageSize)/us(cp))
	if err := tw.Flush(); err != nil {
		return err
	}
	return printMessageCosts(out, med, seal, cp)
}

// printMessageCosts adds the parts up to the writer's time per 64 KiB
// message in each shape a writer over crypto/tls can give it, and each
// one's ratio to go-yamux's shape.
func printMessageCosts(out io.Writer, med map[string]time.Duration, seal, cp time.Duration) error {
	write, short := med[shapeRecords], med[shapeShort]-med[shapeRecords]
	floor := recordsPerMessage * (seal + write)
	yamux := floor + short + cp
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nthe writer's time per 64 KiB message\tµs\tgo-yamux's shape over it\n")
	row := func(name string, d time.Duration) {
		fmt.Fprintf(tw, "%s\t%.1f\t%.2fx\n", name, us(d), float64(yamux)/float64(d))
	}
	row("go-yamux's shape: four records, a short fifth, a copy", yamux)
	row("raw TLS's shape: four records and a short fifth", floor+short)
	row("four records, a write each (the least crypto/tls allows)", floor)
	if corked, ok := med[shapeCorked]; ok {
		row("four records, a write each, corked throughout", recordsPerMessage*(seal+corked))
	}
	if merged, ok := med[shapeMerged]; ok {
		row("four records in one write (not possible through crypto/tls)", recordsPerMessage*(seal+merged))
	}
	return tw.Flush()
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// median returns the median of v (not empty): slowdown.Percentile's 50th,
// the upper of the middle two for an even count.
func median(v []time.Duration) time.Duration {
	return slowdown.Percentile(slices.Sorted(slices.Values(v)), 50)
}
