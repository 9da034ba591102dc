package main

import (
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestSkewedRoundsAndNote(t *testing.T) {
	for _, tc := range []struct {
		skew   []float64
		rounds []int
		note   string
	}{
		{nil, nil, ""},
		{[]float64{0.98, 0.95, 1}, nil, ""},
		{[]float64{0, 0, 0}, nil, ""}, // not measured is not skewed
		{[]float64{0.98, 0.63, 1}, []int{2}, "vCPUs skewed in round 2"},
		{[]float64{0.61, 0.99, 0.79}, []int{1, 3}, "vCPUs skewed in rounds 1,3"},
		{[]float64{0.8}, nil, ""}, // the bound itself is even
	} {
		c := &cellResult{Skew: tc.skew}
		if got := skewedRounds(c); !slices.Equal(got, tc.rounds) {
			t.Errorf("skewedRounds(%v) = %v, want %v", tc.skew, got, tc.rounds)
		}
		if got := skewNote(c); got != tc.note {
			t.Errorf("skewNote(%v) = %q, want %q", tc.skew, got, tc.note)
		}
	}
}

func TestSkewSummary(t *testing.T) {
	rep := &report{Cells: []cellResult{
		{Skew: []float64{0.98, 0.62}},
		{Skew: []float64{0.95, 0.9}},
		{Skew: []float64{0, 0.7}}, // round 1 not measured here
		{},                        // a cell that never ran
	}}
	want := "round 1 0.95-0.98 (0 of 2 cells skewed); round 2 0.62-0.90 (2 of 3 cells skewed)"
	if got := skewSummary(rep); got != want {
		t.Errorf("skewSummary = %q, want %q", got, want)
	}
	if got := skewSummary(&report{Cells: []cellResult{{}, {Skew: []float64{0}}}}); got != "" {
		t.Errorf("nothing measured: skewSummary = %q, want \"\"", got)
	}
	// A round no cell could sample does not hide the rounds after it.
	gap := &report{Cells: []cellResult{{Skew: []float64{0, 0.99}}, {Skew: []float64{0, 0.5}}}}
	if got, want := skewSummary(gap), "round 2 0.50-0.99 (1 of 2 cells skewed)"; got != want {
		t.Errorf("skewSummary after an unsampled round = %q, want %q", got, want)
	}
}

// TestVerdictNamesSkewedRounds: a row's detail names the rounds its cell
// ran on skewed CPUs, and the text report's header sums them up.
func TestVerdictNamesSkewedRounds(t *testing.T) {
	rate := metric{Key: mMBps, Unit: "MB/s", Higher: true}
	c := cellRounds("bulk", wBulk, nil, rate, map[string][]float64{
		"braid": {110, 112, 114}, yamuxName: {99, 100, 101}, rawName: {200, 200, 200}})
	c.Skew = []float64{0.99, 0.64, 0.97}
	rep := &report{Cells: []cellResult{*c}, Options: options{Rounds: 3}, Complete: true}
	var found bool
	for _, r := range buildVerdict(rep) {
		if r.CellID == c.ID {
			found = true
			if !strings.HasSuffix(r.Detail, "; vCPUs skewed in round 2") {
				t.Errorf("detail %q does not end with the skewed round", r.Detail)
			}
		}
	}
	if !found {
		t.Fatalf("no verdict row for cell %s", c.ID)
	}
	var text strings.Builder
	writeHeader(&text, rep)
	if !strings.Contains(text.String(), "vcpus:") || !strings.Contains(text.String(), "round 2 0.64-0.64 (1 of 1 cells skewed)") {
		t.Errorf("the header does not sum the CPUs up:\n%s", text.String())
	}
	var page strings.Builder
	if err := writeHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	if line := skewLine(rep); !strings.Contains(page.String(), "<td>vCPUs</td><td>"+line+"</td>") {
		t.Errorf("the HTML report lacks the CPUs' line %q", line)
	}
}

// TestSampleSkew: where the CPUs can be measured (Linux, two or more),
// a sample is a ratio in (0, 1]; elsewhere 0.
func TestSampleSkew(t *testing.T) {
	q := sampleSkew()
	if runtime.GOOS == "linux" && runtime.NumCPU() > 1 {
		if q <= 0 || q > 1 {
			t.Errorf("sampleSkew = %v, want (0, 1]", q)
		}
		return
	}
	if q != 0 {
		t.Errorf("sampleSkew = %v where nothing can be measured, want 0", q)
	}
}
