// Command tlsshape measures what the shape of a multiplexer costs over one
// TLS 1.3 connection, with no multiplexer at all: one-way bulk of 64 KiB
// messages on loopback, moved by raw crypto/tls in the shapes a muxer
// gives it, side by side in interleaved rounds.
//
//   - raw: the writer's goroutine writes each message; the reader's reads
//     it in 8 KiB reads (io.Discard's), as the Bulk benchmark's raw TLS.
//   - reverse: raw, and the reader writes a 12-byte record back every
//     message, which a goroutine on the writer's side reads (a muxer's
//     window updates and pongs).
//   - handoff: each message goes to a writer goroutine, and the caller
//     waits until it is written (a muxer's writer, Write by reference).
//   - relay: a reader goroutine reads whole messages into pooled buffers
//     and hands them to the consumer's goroutine, which copies them out in
//     8 KiB reads (a muxer's read loop and the stream's buffer).
//   - relay+handoff, relay+handoff+reverse: both, and all three; queued
//     reverse writes them from a writer goroutine of the reader's side
//     (a muxer's), not from the reader goroutine.
//   - corked: raw, with the TCP socket under the writer's TLS conn corked
//     (TCP_CORK; Linux only, not measured elsewhere) from the first write
//     to the last: its records leave in segments of the MSS, the fewest
//     trips through the two network stacks a writer of these records can
//     make. It bounds what a muxer writing raw TLS's records can gain by
//     merging them (braid's cork.go).
//   - corked muxer: relay+handoff+queued reverse, corked as above: a
//     muxer's goroutines and hand-offs with its records merged.
//   - corked muxer, uncorked idle: the same, but the writer goroutine
//     takes the cork off whenever it finds no message waiting and puts it
//     back for the next, as braid's writer does before it parks: whether
//     the merging survives a writer that may never see a next message.
//   - low-water: raw, with TCP_NOTSENT_LOWAT of 32 KiB (braid's) on the
//     socket under the writer's TLS conn (Linux only): the writer waits
//     while more unsent bytes wait in the kernel, so at one P the two
//     sides take turns of what the receiver's window holds rather than of
//     the send buffer's megabytes, and the bytes of a turn are still in
//     the caches when the reader copies and decrypts them.
//   - low-water muxer: relay+handoff+queued reverse with that low-water
//     mark: a muxer's goroutines and hand-offs in short turns.
//
// Session 18 ran it to find where braid's one-stream TLS bulk (0.84x raw
// TLS at GOMAXPROCS 2 on an AMD EPYC VM, go-yamux the same) loses
// against raw TLS (docs/measurements.md, "Session 18"):
//
//	go run ./bench/cmd/tlsshape -procs 2 -rounds 5
//
// Session 22 added the corked shape, to bound one-stream TLS bulk at
// GOMAXPROCS 2 from above (docs/measurements.md, "Session 22"); session 24
// the corked muxer, to learn whether a muxer's hand-offs eat what merging
// records gains (they did not: docs/measurements.md, "Session 24");
// session 25 the corked muxer uncorked when idle, to learn whether the
// gain survives the uncork a writer owes before it parks (it did not:
// docs/measurements.md, "Session 25"). Session 38 added the low-water
// shapes, to learn what bounding the kernel's unsent bytes gives raw TLS
// at one P, where issue #12 asks braid for 1.04x and 1.13x raw TLS
// (docs/measurements.md, "Session 38"):
//
//	go run ./bench/cmd/tlsshape -procs 1 -rounds 5
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tlsshape:", err)
		os.Exit(2)
	}
}

// run parses the flags, runs every shape once a round and prints each
// shape's median MB/s and its ratio to raw's.
func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("tlsshape", flag.ContinueOnError)
	procs := fs.Int("procs", 2, "GOMAXPROCS")
	rounds := fs.Int("rounds", 3, "rounds; each runs every shape once, in turn")
	messages := fs.Int("messages", 20000, "64 KiB messages per run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 || *messages < 1 || *procs < 1 {
		return fmt.Errorf("rounds, messages and procs must be positive")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*procs))
	rates := make([][]float64, len(shapes))
	for r := range *rounds {
		for i, s := range shapes {
			mbps, err := s.run(*messages)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			rates[i] = append(rates[i], mbps)
			fmt.Fprintf(out, "round %d %-24s %7.0f MB/s\n", r+1, s.name, mbps)
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nshape (GOMAXPROCS %d, %d rounds)\tmedian MB/s\tvs raw\n", *procs, *rounds)
	raw := median(rates[0])
	for i, s := range shapes {
		m := median(rates[i])
		fmt.Fprintf(tw, "%s\t%.0f\t%.2fx\n", s.name, m, m/raw)
	}
	return tw.Flush()
}

// median returns the median of v (not empty).
func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}
