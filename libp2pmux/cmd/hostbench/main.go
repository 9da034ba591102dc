// Command hostbench runs one of braidbench's seed scenarios, or a
// ping-pong, between two real go-libp2p hosts (TCP and noise or TLS, on
// loopback or through a simulated link) and prints what it measured as
// one JSON object on stdout.
//
// braidbench runs it for its host rows; it lives in the libp2pmux module
// so that the bench module never imports go-libp2p. Run by hand:
//
//	go run ./libp2pmux/cmd/hostbench -scenario chunks -muxer braid -n 120 -latency 200ms -bandwidth 1e9
//	go run ./libp2pmux/cmd/hostbench -scenario ping -security tls -count 2000 -size 64 -warmup 200
//	go run ./libp2pmux/cmd/hostbench -scenario ping -security noise -count 1000 -size 64 -warmup 100 -bulk 10
//
// The output is {"elapsed_ns":..., "ops":..., "alloc_bytes":..., "allocs":...}:
// the wall time of the timed ops (chunks), messages (notify) or round
// trips (ping), and the heap allocations of the whole process meanwhile;
// a ping adds "p50_ns" and "p99_ns", its round trips' median and 99th
// percentile, and with -bulk "bulk_bytes", what its bulk streams wrote
// meanwhile. -cpuprofile FILE writes a CPU profile of the run (both
// hosts, their set-up included) for go tool pprof, -trace FILE an
// execution trace of it for go tool trace.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/braidmux/braid/libp2pmux/internal/hostbench"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// defaultTimeout bounds one measurement.
const defaultTimeout = time.Minute

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// options are hostbench's flags.
type options struct {
	spec       hostbench.Spec
	timeout    time.Duration
	cpuProfile string // file for a CPU profile of the run; "" for none
	trace      string // file for an execution trace of the run; "" for none
}

func realMain(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "hostbench:", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), opts.timeout, fmt.Errorf("timed out after %v", opts.timeout))
	defer cancel()
	res, err := runProfiled(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "hostbench:", err)
		return exitFailure
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, "hostbench:", err)
		return exitFailure
	}
	return exitOK
}

// runProfiled runs the measurement, under a CPU profile written to
// opts.cpuProfile and an execution trace written to opts.trace, where
// they name files.
func runProfiled(ctx context.Context, opts options) (res hostbench.Result, err error) {
	if opts.cpuProfile != "" {
		stop, rerr := record(opts.cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
		if rerr != nil {
			return res, rerr
		}
		defer func() { err = errors.Join(err, stop()) }() // the named result: a failed close fails the run
	}
	if opts.trace != "" {
		stop, rerr := record(opts.trace, trace.Start, trace.Stop)
		if rerr != nil {
			return res, rerr
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	return hostbench.Run(ctx, opts.spec)
}

// record starts a recording (a CPU profile, an execution trace) into the
// file name; stop ends it and closes the file.
func record(name string, start func(io.Writer) error, end func()) (stop func() error, err error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		end()
		return f.Close()
	}, nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("hostbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	s := &o.spec
	var scenario, muxer, security string
	var bandwidth float64
	fs.StringVar(&scenario, "scenario", string(hostbench.Chunks), "chunks, notify or ping")
	fs.StringVar(&muxer, "muxer", string(hostbench.Braid), "braid, braid-nocoalesce, yamux or tcp (no libp2p)")
	fs.StringVar(&security, "security", string(hostbench.Noise), "the hosts' security: noise or tls")
	fs.Float64Var(&bandwidth, "bandwidth", 0, "link bandwidth in bit/s (0: no limit)")
	fs.DurationVar(&s.Link.Latency, "latency", 0, "link one-way latency (0 with no bandwidth: plain loopback)")
	fs.DurationVar(&s.Link.Jitter, "jitter", 0, "link jitter")
	fs.Float64Var(&s.Link.Loss, "loss", 0, "link packet loss, 0 to 1")
	fs.Int64Var(&s.Link.Seed, "seed", 0, "seed of the link's jitter and loss")
	fs.IntVar(&s.N, "n", 120, "chunks: chunks per op")
	fs.BoolVar(&s.Batched, "batched", false, "chunks: deliver 25 chunks per message")
	fs.IntVar(&s.Warmup, "warmup", 0, "chunks: untimed ops first; ping: untimed round trips first")
	fs.IntVar(&s.Ops, "ops", 1, "chunks: timed ops")
	fs.IntVar(&s.Count, "count", 100, "notify: messages; ping: timed round trips")
	fs.IntVar(&s.Size, "size", 64<<10, "notify: bytes per message; ping: bytes each way")
	fs.IntVar(&s.Bulk, "bulk", 0, "ping: streams sending bulk data to the server throughout")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "longest the measurement may take")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&o.trace, "trace", "", "write an execution trace of the run to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.timeout <= 0 {
		return o, errors.New("-timeout must be positive")
	}
	s.Scenario, s.Muxer, s.Security = hostbench.Scenario(scenario), hostbench.Muxer(muxer), hostbench.Security(security)
	s.Link.Bandwidth = int64(bandwidth)
	return o, s.Validate()
}
