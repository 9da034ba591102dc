package main

import (
	"math"
	"slices"
)

// summary is one contender's figure in one cell: the median of the rounds
// with their range, and the median as a ratio to the references' medians
// from the same run.
type summary struct {
	N       int      `json:"n"`
	Median  float64  `json:"median"`
	Min     float64  `json:"min"`
	Max     float64  `json:"max"`
	VsRaw   *float64 `json:"vs_tcp,omitempty"`
	VsYamux *float64 `json:"vs_yamux,omitempty"`
}

// summarize fills every result's summary.
func summarize(rep *report) {
	for i := range rep.Cells {
		c := &rep.Cells[i]
		for j := range c.Results {
			r := &c.Results[j]
			r.Summary = nil
			if !r.ok() {
				continue
			}
			r.Summary = map[string]summary{}
			for _, m := range c.Metrics {
				var vs []float64
				for _, s := range r.Samples {
					if v, ok := s[m.Key]; ok {
						vs = append(vs, v)
					}
				}
				if len(vs) == 0 {
					continue
				}
				slices.Sort(vs)
				r.Summary[m.Key] = summary{N: len(vs), Median: median(vs), Min: vs[0], Max: vs[len(vs)-1]}
			}
		}
		for j := range c.Results {
			r := &c.Results[j]
			for k, s := range r.Summary {
				s.VsRaw = ratio(s.Median, c.result(rawName), k)
				s.VsYamux = ratio(s.Median, c.result(yamuxName), k)
				r.Summary[k] = s
			}
		}
	}
}

// result returns the named contender's result, or nil.
func (c *cellResult) result(name string) *contenderResult {
	for i := range c.Results {
		if c.Results[i].Contender == name {
			return &c.Results[i]
		}
	}
	return nil
}

// ratio is v over ref's median of metric k, or nil if ref has none.
func ratio(v float64, ref *contenderResult, k string) *float64 {
	if ref == nil {
		return nil
	}
	s, ok := ref.Summary[k]
	if !ok || s.Median == 0 {
		return nil
	}
	r := v / s.Median
	return &r
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
