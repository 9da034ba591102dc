package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/braidmux/braid/bench/internal/cpuskew"
)

// The vCPUs before each cell. On a virtual machine one vCPU can run a
// third slower than another for seconds to minutes, and some workloads
// change mode with it (the TLS ping beside bulk at two P: README, "What
// falls short"). Before each cell of each round the run seals AES-GCM on
// each CPU in turn (cpuskew) and keeps the slowest rate over the
// fastest, so that a row's figures can be read against the CPUs they
// ran on.

const (
	// skewSampleTime is each CPU's share of a sample: 50 ms, a tenth of
	// a second a cell on two CPUs (the default run's 82 cells in 3 rounds
	// took 6 min 10 s with the samples, 5 min 52-54 s before them),
	// long enough that even CPUs measure within a few percent of each
	// other.
	skewSampleTime = 50 * time.Millisecond
	// skewedBelow is the ratio under which the CPUs count as skewed:
	// even ones measured 0.89-1.0 here, skewed ones 0.51-0.79 (session
	// 42, docs/measurements.md).
	skewedBelow = 0.8
)

// sampleSkew returns the slowest CPU's seal rate over the fastest's, or
// 0 where it cannot be measured (one CPU, or pinning unsupported).
func sampleSkew() float64 {
	s, err := cpuskew.Measure(skewSampleTime)
	if err != nil || len(s.Rates) < 2 {
		return 0
	}
	return s.Ratio()
}

// skewed tells whether a sample q found the CPUs skewed: 0, not
// measured, is not.
func skewed(q float64) bool { return q > 0 && q < skewedBelow }

// skewedRounds lists the rounds (from 1) before which c's sample found
// the CPUs skewed.
func skewedRounds(c *cellResult) []int {
	var rounds []int
	for i, q := range c.Skew {
		if skewed(q) {
			rounds = append(rounds, i+1)
		}
	}
	return rounds
}

// skewNote is what a verdict row's detail says of c's CPUs: nothing
// when every round's sample found them even (or none was taken).
func skewNote(c *cellResult) string {
	rounds := skewedRounds(c)
	if len(rounds) == 0 {
		return ""
	}
	word := "round"
	if len(rounds) > 1 {
		word = "rounds"
	}
	return fmt.Sprintf("vCPUs skewed in %s %s", word, joinInts(rounds))
}

// skewSummary is the per-round part of skewLine: per round with a
// sample, the range of the samples and how many cells ran skewed; ""
// when nothing was sampled.
func skewSummary(rep *report) string {
	rounds := 0
	for i := range rep.Cells {
		rounds = max(rounds, len(rep.Cells[i].Skew))
	}
	var parts []string
	for round := range rounds {
		lo, hi, n, nSkewed := 0.0, 0.0, 0, 0
		for i := range rep.Cells {
			c := &rep.Cells[i]
			if round >= len(c.Skew) || c.Skew[round] <= 0 {
				continue
			}
			q := c.Skew[round]
			if n == 0 || q < lo {
				lo = q
			}
			hi = max(hi, q)
			n++
			if skewed(q) {
				nSkewed++
			}
		}
		if n == 0 {
			continue // no cell measured in this round: say nothing of it
		}
		parts = append(parts, fmt.Sprintf("round %d %.2f-%.2f (%d of %d cells skewed)", round+1, lo, hi, nSkewed, n))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ")
}

// skewLine is the report's sentence on the CPUs, the text's header and
// the HTML's table alike: what was sampled, the bound, and skewSummary;
// "" when nothing was sampled.
func skewLine(rep *report) string {
	sk := skewSummary(rep)
	if sk == "" {
		return ""
	}
	return fmt.Sprintf("slowest/fastest AES-GCM rate before each cell, below %.1f skewed: %s", skewedBelow, sk)
}
