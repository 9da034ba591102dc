// Command benchpairs compares two builds of the benchmarks in paired runs:
// the two test binaries alternate, one short run each, and for every
// benchmark and unit it prints the median of the per-pair ratios (B / A),
// its quartiles and how many pairs went B's way. Which binary runs first
// alternates too, pair by pair (A B, B A, A B, ...), so that what the
// position in a pair gives, the machine's state left by the run before,
// falls on each binary alike. With A always first (until session 47),
// three sets of two copies of one binary measured B/A x1.040, x1.030 and
// x1.001 (13, 11 and 8 of 16 pairs; 64 KiB TLS notifications at
// GOMAXPROCS 2), and alternating, x0.987 and x0.998 (6 and 8 of 16).
//
// On a shared machine whose speed moves by tens of percent within a minute,
// medians of separate runs can't resolve a change of a few percent; two runs
// a second apart share the machine's state, so their ratio can. This is how
// the writer's designs of issue #12 were decided (docs/measurements.md,
// "Tried in session 4"). Build the two binaries with `go test -c`, then,
// for example:
//
//	cd bench && go test -c -o /tmp/old.test . # at the old commit
//	cd bench && go test -c -o /tmp/new.test . # at the new one
//	go run ./bench/cmd/benchpairs -a /tmp/old.test -b /tmp/new.test \
//		-bench 'Bulk/net=tls/impl=braid$' -benchtime 3000x -cpu 2 -pairs 10
//
// A ratio above 1 means B measured more of the unit (better for MB/s and
// msgs/s, worse for ns/op and latencies).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchpairs:", err)
		os.Exit(2)
	}
}

// run parses the flags, makes the paired runs and writes the summary to out.
func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("benchpairs", flag.ContinueOnError)
	a := fs.String("a", "", "the baseline test binary (go test -c)")
	b := fs.String("b", "", "the test binary compared with it")
	bench := fs.String("bench", "", "the -test.bench pattern")
	benchtime := fs.String("benchtime", "1x", "the -test.benchtime of each run")
	cpu := fs.String("cpu", "1", "the -test.cpu of each run")
	pairs := fs.Int("pairs", 8, "how many pairs of runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *a == "" || *b == "" || *bench == "" || *pairs < 1 {
		return fmt.Errorf("-a, -b and -bench are required, and -pairs must be at least 1")
	}
	var p pairing
	for i := 0; i < *pairs; i++ {
		ra, rb, err := runPair(*a, *b, i%2 == 1, func(bin string) (results, error) {
			return runOnce(bin, *bench, *benchtime, *cpu)
		})
		if err != nil {
			return err
		}
		p.add(ra, rb)
	}
	p.write(out)
	return nil
}

// runPair runs a and b once each, b first when bFirst, and returns their
// results in the order a, b whichever ran first.
func runPair(a, b string, bFirst bool, runBin func(bin string) (results, error)) (ra, rb results, err error) {
	first, second := a, b
	if bFirst {
		first, second = b, a
	}
	r1, err := runBin(first)
	if err != nil {
		return nil, nil, err
	}
	r2, err := runBin(second)
	if err != nil {
		return nil, nil, err
	}
	if bFirst {
		return r2, r1, nil
	}
	return r1, r2, nil
}

// runOnce runs bin's benchmarks once and parses what it printed.
func runOnce(bin, bench, benchtime, cpu string) (results, error) {
	cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", bench,
		"-test.benchtime", benchtime, "-test.cpu", cpu)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	r := parse(stdout.String())
	if len(r) == 0 {
		return nil, fmt.Errorf("%s printed no benchmark matching %q", bin, bench)
	}
	return r, nil
}
