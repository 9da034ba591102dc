// Command braidbench compares braid with the multiplexers an application
// would otherwise pick (go-yamux, go-mplex, smux, hashicorp/yamux) and with
// raw TCP, over loopback TCP and over simulated links, and braid's
// libp2pmux with go-libp2p's stock yamux between two real go-libp2p hosts
// (through libp2pmux/cmd/hostbench, which it builds from the workspace),
// and writes a report to share that opens with a verdict: each workload
// won or lost against the targets of issues #12 and #15, and a lost one
// marked when the rounds overlap the target (braid's best round meets it
// against the other's worst: the medians miss, more rounds could tell).
// Before each cell of each round it samples each CPU's AES-GCM rate
// (bench/cmd/cpuskew), and a row whose cell ran while one CPU was much
// slower than another says in which rounds (skew.go).
//
// Run it with no flags:
//
//	go run ./bench/cmd/braidbench
//
// It prints a table on stdout within about seven minutes on a 2-core
// machine and writes braidbench-out/results.json (every sample) and
// braidbench-out/report.html (one self-contained file with charts).
// -quick is a smoke run of about 20 seconds; -h lists the flags that
// narrow or widen the run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// Defaults of the flags.
const (
	defaultOut     = "braidbench-out"
	defaultRounds  = 3
	quickRounds    = 1
	defaultTimeout = 20 * time.Second
)

// defaultCPUs is the GOMAXPROCS sweep of the link workloads.
func defaultCPUs() []int { return []int{1, 2, 4} }

// options is what the command line asks for.
type options struct {
	Quick   bool          `json:"quick"`
	Out     string        `json:"out"`
	Only    []string      `json:"only,omitempty"`
	Links   []string      `json:"links"`
	CPUs    []int         `json:"cpus"`
	Rounds  int           `json:"rounds"`
	Timeout time.Duration `json:"timeout_ns"`
	// From names an earlier run's results.json to render again instead
	// of measuring.
	From string `json:"-"`
	// Plan sizes the workloads; set from Quick unless a test sets it.
	Plan plan `json:"plan"`
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain parses args, runs the benchmarks and writes the report; it
// returns the exit code.
func realMain(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "braidbench:", err)
		return exitUsage
	}
	if opts.From != "" {
		return rerender(opts, stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := run(ctx, opts, newProgress(os.Stderr, isTerminal(os.Stderr)))
	if rep != nil {
		writeText(stdout, rep)
		if werr := writeFiles(opts.Out, rep); werr != nil {
			fmt.Fprintln(stderr, "braidbench:", werr)
			return exitFailure
		}
		fmt.Fprintf(stderr, "braidbench: wrote %s and %s\n",
			joinPath(opts.Out, resultsFile), joinPath(opts.Out, reportFile))
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "braidbench: interrupted; the report holds what was measured")
		return exitInterrupted
	case err != nil:
		fmt.Fprintln(stderr, "braidbench:", err)
		return exitFailure
	}
	return exitOK
}

// parseFlags turns the command line into options.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("braidbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		quick   = fs.Bool("quick", false, "smoke run of about 20 s: "+strconv.Itoa(quickRounds)+" round, smaller workloads, fewer links")
		out     = fs.String("o", defaultOut, "directory for results.json and report.html")
		only    = fs.String("only", "", "comma-separated contenders and/or workloads to run (default all; tcp and yamux\nalways run: every ratio needs them);\ncontenders: "+strings.Join(contenderNames(), ", ")+"\nworkloads: "+strings.Join(workloadNames(), ", "))
		links   = fs.String("links", "", "comma-separated link profiles of the slowdown workload (default "+strings.Join(defaultLinks(false), ",")+"; -quick "+strings.Join(defaultLinks(true), ",")+");\nknown: "+strings.Join(linkNames(), ", ")+", or all")
		cpus    = fs.String("cpu", joinInts(defaultCPUs()), "comma-separated GOMAXPROCS values of the link workloads")
		rounds  = fs.Int("rounds", 0, "rounds: every contender runs every workload once per round, interleaved (default "+strconv.Itoa(defaultRounds)+", -quick "+strconv.Itoa(quickRounds)+")")
		timeout = fs.Duration("timeout", defaultTimeout, "longest one measurement may take before its contender is marked failed")
		from    = fs.String("from", "", "render the report of an earlier run's results.json into -o instead of measuring")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: braidbench [flags]\n\n"+
			"Compares braid with raw TCP, go-yamux, go-mplex, smux and hashicorp/yamux.\n"+
			"With no flags it runs the default report (about 8 minutes), prints a table\n"+
			"on stdout and writes DIR/results.json and DIR/report.html.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	opts := options{Quick: *quick, Out: *out, Timeout: *timeout, Rounds: *rounds, From: *from}
	opts.Plan = defaultPlan()
	if opts.Quick {
		opts.Plan = quickPlan()
	}
	if opts.Rounds == 0 {
		opts.Rounds = defaultRounds
		if opts.Quick {
			opts.Rounds = quickRounds
		}
	}
	if opts.Rounds < 0 || opts.Timeout <= 0 {
		return options{}, errors.New("-rounds and -timeout must be positive")
	}
	var err error
	if opts.CPUs, err = parseInts(*cpus); err != nil {
		return options{}, fmt.Errorf("-cpu: %w", err)
	}
	opts.Links = defaultLinks(opts.Quick)
	if *links != "" {
		opts.Links = splitList(*links)
		if len(opts.Links) == 1 && opts.Links[0] == "all" {
			opts.Links = linkNames()
		}
	}
	for _, l := range opts.Links {
		if _, ok := linkByName(l); !ok {
			return options{}, fmt.Errorf("-links: unknown link %q (known: %s)", l, strings.Join(linkNames(), ", "))
		}
	}
	opts.Only = splitList(*only)
	known := append(contenderNames(), workloadNames()...)
	for _, o := range opts.Only {
		if !slices.Contains(known, o) {
			return options{}, fmt.Errorf("-only: unknown contender or workload %q", o)
		}
	}
	return opts, nil
}

// isTerminal tells whether f is a terminal, where progress rewrites one
// line.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
