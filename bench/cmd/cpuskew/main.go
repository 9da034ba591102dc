// Command cpuskew prints how fast each CPU seals AES-128-GCM (the cipher
// of a TLS 1.3 connection between Go peers), measured one CPU at a time on
// a pinned thread, and the slowest CPU's rate over the fastest's.
//
// On a virtual machine one vCPU can run a third slower than another for
// seconds to minutes, and braid's loaded ping over TLS at two P changes
// mode with it (docs/measurements.md, session 42). Run it beside a
// benchmark, before and after, to tell which kind of stretch the
// benchmark ran in:
//
//	go run ./bench/cmd/cpuskew -n 5
//
// Linux only (it pins threads with sched_setaffinity).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/braidmux/braid/bench/internal/cpuskew"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

// realMain parses args, measures and prints; it returns the exit code.
func realMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cpuskew", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1, "how many samples, one after the other")
	d := fs.Duration("d", 200*time.Millisecond, "how long each CPU seals per sample")
	every := fs.Duration("every", time.Second, "the pause between samples")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if *n < 1 || *d <= 0 || *every < 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "cpuskew: -n must be at least 1, -d positive, -every not negative, and no arguments")
		return exitUsage
	}
	for i := range *n {
		if i > 0 {
			time.Sleep(*every)
		}
		s, err := cpuskew.Measure(*d)
		if err != nil {
			fmt.Fprintln(stderr, "cpuskew:", err)
			return exitFailure
		}
		fmt.Fprintln(stdout, format(time.Now(), s))
	}
	return exitOK
}

// format is one sample's line: the time, each CPU's MB/s and the ratio.
func format(at time.Time, s cpuskew.Sample) string {
	var b strings.Builder
	b.WriteString(at.Format("15:04:05"))
	for _, r := range s.Rates {
		fmt.Fprintf(&b, "  cpu%d %.0f MB/s", r.CPU, r.MBPerSec)
	}
	fmt.Fprintf(&b, "  slowest/fastest %.2f", s.Ratio())
	return b.String()
}
