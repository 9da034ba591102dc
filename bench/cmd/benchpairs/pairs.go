package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// key is one measured quantity: a benchmark (with its -cpu suffix) and a
// unit it reports.
type key struct{ bench, unit string }

// results is one run's values, by benchmark and unit.
type results map[key]float64

// parse reads the lines of `go test -bench` output: a name, the iteration
// count, then value and unit pairs. Other lines are skipped.
func parse(output string) results {
	r := results{}
	for _, line := range strings.Split(output, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			r[key{f[0], f[i+1]}] = v
		}
	}
	return r
}

// pairing collects, per quantity, the ratio B / A of each pair of runs.
type pairing struct {
	ratios map[key][]float64
}

// add records one pair: every quantity both runs reported with a nonzero
// baseline.
func (p *pairing) add(a, b results) {
	if p.ratios == nil {
		p.ratios = map[key][]float64{}
	}
	for k, va := range a {
		if vb, ok := b[k]; ok && va != 0 {
			p.ratios[k] = append(p.ratios[k], vb/va)
		}
	}
}

// summary is what write prints of one quantity.
type summary struct {
	median, q1, q3 float64
	above, n       int // pairs with B / A > 1, and all pairs
}

// The quartiles' fractions of the ranked ratios.
const (
	lowerQuartile = 0.25
	upperQuartile = 0.75
)

// summarize returns the median and quartiles of ratios (nearest rank) and
// how many exceed 1.
func summarize(ratios []float64) summary {
	r := slices.Clone(ratios)
	slices.Sort(r)
	n := len(r)
	s := summary{q1: nearestRank(r, lowerQuartile), q3: nearestRank(r, upperQuartile), n: n}
	if n%2 == 1 {
		s.median = r[n/2]
	} else {
		s.median = (r[n/2-1] + r[n/2]) / 2
	}
	for _, x := range r {
		if x > 1 {
			s.above++
		}
	}
	return s
}

// nearestRank is the p-th quantile of sorted by nearest rank: the
// ceil(p*n)-th smallest of its n values (index ceil(p*n)-1, clamped to
// the slice).
func nearestRank(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// write prints one line per quantity, sorted by benchmark and unit.
func (p *pairing) write(out io.Writer) {
	keys := make([]key, 0, len(p.ratios))
	for k := range p.ratios {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y key) int {
		if c := strings.Compare(x.bench, y.bench); c != 0 {
			return c
		}
		return strings.Compare(x.unit, y.unit)
	})
	for _, k := range keys {
		s := summarize(p.ratios[k])
		fmt.Fprintf(out, "%s %s: B/A median %.3f (q1 %.3f, q3 %.3f), B above A in %d of %d pairs\n",
			k.bench, k.unit, s.median, s.q1, s.q3, s.above, s.n)
	}
}
