package main

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/braidmux/braid/slowconn"
)

// cellWith is a cell of workload w with metric m and the given medians by
// contender, one sample each, summarized.
func cellWith(id, w string, params map[string]string, m metric, medians map[string]float64) *cellResult {
	rounds := make(map[string][]float64, len(medians))
	for name, v := range medians {
		rounds[name] = []float64{v}
	}
	return cellRounds(id, w, params, m, rounds)
}

// cellRounds is a cell of workload w with metric m and the given rounds
// by contender, summarized.
func cellRounds(id, w string, params map[string]string, m metric, rounds map[string][]float64) *cellResult {
	c := &cellResult{cell: cell{ID: id, Workload: w, Params: params, Metrics: []metric{m}, Title: id + ": test"}}
	for _, e := range allEntries() {
		r := contenderResult{Contender: e.Name}
		for _, v := range rounds[e.Name] {
			r.Samples = append(r.Samples, sample{m.Key: v})
		}
		c.Results = append(c.Results, r)
	}
	rep := &report{Cells: []cellResult{*c}}
	summarize(rep)
	return &rep.Cells[0]
}

// withFailed marks the named contenders of c failed and summarizes c
// again, as a run does: a failed contender has no summary, and no ratio
// to it is taken.
func withFailed(c *cellResult, names ...string) *cellResult {
	for _, n := range names {
		c.result(n).Failed = "timed out"
	}
	rep := &report{Cells: []cellResult{*c}}
	summarize(rep)
	return &rep.Cells[0]
}

// TestVerdictRoundsOverlap: a lost row is marked when braid's best round
// meets the target against the reference's worst round, for every bound
// it misses, and only then; a won row never is.
func TestVerdictRoundsOverlap(t *testing.T) {
	rate := metric{Key: mMBps, Unit: "MB/s", Higher: true}
	lat := metric{Key: mP99, Unit: "µs"}
	ping := map[string]string{"neighbours": "10"}
	cases := []struct {
		name        string
		c           *cellResult
		wantStatus  status
		wantOverlap bool
	}{
		{"median misses 1.2x, best round 1.3x the worst other", cellRounds("bulk", wBulk, nil, rate, map[string][]float64{
			"braid": {110, 115, 125}, yamuxName: {96, 100, 104}, rawName: {200, 200, 200}}), statusLost, true},
		{"every round misses", cellRounds("bulk", wBulk, nil, rate, map[string][]float64{
			"braid": {110, 112, 114}, yamuxName: {99, 100, 101}, rawName: {200, 200, 200}}), statusLost, false},
		{"met", cellRounds("bulk", wBulk, nil, rate, map[string][]float64{
			"braid": {125, 130, 135}, yamuxName: {99, 100, 101}, rawName: {200, 200, 200}}), statusWon, false},
		{"upper bound: p99 against coalescing off, rounds straddle", cellRounds("ping-bulk", wPing, ping, lat, map[string][]float64{
			"braid": {251, 266, 274}, "braid-nocoalesce": {222, 247, 314}, yamuxName: {6412, 9073, 10193}, "smux": {1377, 2478, 4236}, "hashicorp": {2887, 4210, 7076}}), statusLost, true},
		{"upper bound: braid's best round worse than off's worst", cellRounds("ping-bulk", wPing, ping, lat, map[string][]float64{
			"braid": {320, 330, 340}, "braid-nocoalesce": {222, 247, 314}, yamuxName: {6412, 9073, 10193}, "smux": {1377, 2478, 4236}, "hashicorp": {2887, 4210, 7076}}), statusLost, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := targetsFor(tc.c)
			var tg target
			for _, x := range ts {
				if x.metric == tc.c.Metrics[0].Key {
					tg = x
				}
			}
			r := cellVerdict(tc.c, tg)
			if r.Status != tc.wantStatus || r.Overlap != tc.wantOverlap {
				t.Errorf("status %s overlap %v (%s), want %s overlap %v", r.Status, r.Overlap, r.Detail, tc.wantStatus, tc.wantOverlap)
			}
			if r.Overlap != strings.Contains(r.Detail, "rounds overlap") {
				t.Errorf("detail %q does not say what Overlap says (%v)", r.Detail, r.Overlap)
			}
			won, lost, overlap, _ := verdictTally([]verdictRow{r})
			if won+lost != 1 || (overlap == 1) != tc.wantOverlap {
				t.Errorf("tally won %d lost %d overlap %d", won, lost, overlap)
			}
		})
	}
}

// TestPacketVerdictRoundsOverlap: a slowdown matrix row is lost when
// braid is slower than go-yamux at some GOMAXPROCS, and marked only when
// its rounds overlap go-yamux's at every GOMAXPROCS it loses at.
func TestPacketVerdictRoundsOverlap(t *testing.T) {
	timeOp := metric{Key: mTime, Unit: "ms"}
	packetCell := func(procs string, braid, yamux []float64) cellResult {
		c := cellRounds("packets/"+procs, "SmallPackets", map[string]string{"link": "LAN", "gomaxprocs": procs}, timeOp,
			map[string][]float64{"braid": braid, yamuxName: yamux, rawName: {90, 90, 90}})
		c.Groups = []string{wPackets}
		return *c
	}
	cases := []struct {
		name        string
		cells       []cellResult
		wantStatus  status
		wantOverlap bool
	}{
		{"faster at every P", []cellResult{packetCell("1", []float64{95, 96, 97}, []float64{99, 100, 101}),
			packetCell("2", []float64{95, 96, 97}, []float64{99, 100, 101})}, statusWon, false},
		{"slower at P2, rounds overlap", []cellResult{packetCell("1", []float64{95, 96, 97}, []float64{99, 100, 101}),
			packetCell("2", []float64{98, 104, 106}, []float64{99, 100, 101})}, statusLost, true},
		{"slower at P2, every round", []cellResult{packetCell("1", []float64{95, 96, 97}, []float64{99, 100, 101}),
			packetCell("2", []float64{103, 104, 106}, []float64{99, 100, 101})}, statusLost, false},
		{"slower at both, overlapping at one only", []cellResult{packetCell("1", []float64{98, 104, 106}, []float64{99, 100, 101}),
			packetCell("2", []float64{103, 104, 106}, []float64{99, 100, 101})}, statusLost, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := packetVerdict(&report{Cells: tc.cells}, matrixKey{"SmallPackets", "LAN"})
			if r.Status != tc.wantStatus || r.Overlap != tc.wantOverlap {
				t.Errorf("status %s overlap %v (%s), want %s overlap %v", r.Status, r.Overlap, r.Detail, tc.wantStatus, tc.wantOverlap)
			}
			if r.Overlap && !strings.Contains(r.Detail, "rounds overlap") {
				t.Errorf("detail %q does not say the rounds overlap", r.Detail)
			}
		})
	}
}

// TestVerdict checks the targets' arithmetic: each direction, the tie
// band, the best other, absolute bounds and missing figures.
func TestVerdict(t *testing.T) {
	rate := metric{Key: mMBps, Unit: "MB/s", Higher: true}
	lat := metric{Key: mP50, Unit: "µs"}
	ping := map[string]string{"neighbours": "10"}
	bulkRate := metric{Key: mBulkMBps, Unit: "MB/s", Higher: true}
	cases := []struct {
		name string
		c    *cellResult
		want []status
	}{
		{"bulk 1.25x yamux meets 1.2x", cellWith("bulk", wBulk, nil, rate, map[string]float64{"braid": 125, yamuxName: 100, rawName: 200}), []status{statusWon}},
		{"bulk 1.15x yamux misses 1.2x", cellWith("bulk", wBulk, nil, rate, map[string]float64{"braid": 115, yamuxName: 100, rawName: 200}), []status{statusLost}},
		{"TLS bulk needs 0.9x raw too", cellWith("bulk/tls", wBulk, nil, rate, map[string]float64{"braid": 120, yamuxName: 100, rawName: 140}), []status{statusLost}},
		{"TLS bulk meets both", cellWith("bulk/tls", wBulk, nil, rate, map[string]float64{"braid": 130, yamuxName: 100, rawName: 140}), []status{statusWon}},
		{"ping beside bulk: best other is smux", cellWith("ping-bulk", wPing, ping, lat, map[string]float64{
			"braid": 120, "braid-nocoalesce": 300, yamuxName: 1000, "smux": 200, "hashicorp": 900}), []status{statusLost}},
		{"ping beside bulk: half the best other", cellWith("ping-bulk", wPing, ping, lat, map[string]float64{
			"braid": 99, "braid-nocoalesce": 300, yamuxName: 1000, "smux": 200, "hashicorp": 900}), []status{statusWon}},
		{"ping beside bulk: coalescing worse than off", cellWith("ping-bulk", wPing, ping, lat, map[string]float64{
			"braid": 99, "braid-nocoalesce": 90, yamuxName: 1000, "smux": 200, "hashicorp": 900}), []status{statusLost}},
		{"ping beside bulk: bulk at 0.85x the best other's", cellWith("ping-bulk", wPing, ping, bulkRate, map[string]float64{
			"braid": 850, "braid-nocoalesce": 700, yamuxName: 1000, "smux": 900, "hashicorp": 600}), []status{statusUnmeasured, statusUnmeasured, statusWon}},
		{"ping beside bulk: bulk starved", cellWith("ping-bulk", wPing, ping, bulkRate, map[string]float64{
			"braid": 750, "braid-nocoalesce": 700, yamuxName: 1000, "smux": 900, "hashicorp": 600}), []status{statusUnmeasured, statusUnmeasured, statusLost}},
		{"spaced ping: no target, held to yamux, not to the best other", cellWith("ping-spaced", wPingSpaced, ping, lat, map[string]float64{
			"braid": 150, "braid-nocoalesce": 140, yamuxName: 1000, "smux": 200, "hashicorp": 160}), []status{statusWon}},
		{"spaced ping: slower than yamux loses", cellWith("ping-spaced", wPingSpaced, ping, lat, map[string]float64{
			"braid": 1100, yamuxName: 1000, "smux": 200}), []status{statusLost}},
		{"link ping: held to yamux, not to the best other", cellWith("ping-link/LAN", wPingLink, ping, lat, map[string]float64{
			"braid": 4000, yamuxName: 27000, "smux": 1500}), []status{statusWon}},
		{"link ping: slower than yamux loses", cellWith("ping-link/LAN", wPingLink, ping, lat, map[string]float64{
			"braid": 28000, yamuxName: 27000}), []status{statusLost}},
		{"link ping: bulk within linkBulkShare of yamux's", cellWith("ping-link/LAN", wPingLink, ping, bulkRate, map[string]float64{
			"braid": 119, yamuxName: 121}), []status{statusUnmeasured, statusWon}},
		{"link ping: bulk traded for the latency", cellWith("ping-link/LAN", wPingLink, ping, bulkRate, map[string]float64{
			"braid": 110, yamuxName: 121}), []status{statusUnmeasured, statusLost}},
		{"tie within 1% is no worse", cellWith("chunks", wChunks, map[string]string{"latency": "0ms"}, metric{Key: mTimeOp, Unit: "ms"},
			map[string]float64{"braid": 100.9, yamuxName: 100}), []status{statusWon}},
		{"2% over is worse", cellWith("chunks", wChunks, map[string]string{"latency": "0ms"}, metric{Key: mTimeOp, Unit: "ms"},
			map[string]float64{"braid": 102, yamuxName: 100}), []status{statusLost}},
		{"idle heap absolute bound", cellWith("idle", wIdle, nil, metric{Key: mHeap, Unit: "B"}, map[string]float64{"braid": 1025, yamuxName: 2000}), []status{statusLost}},
		{"braid missing", cellWith("bulk", wBulk, nil, rate, map[string]float64{yamuxName: 100}), []status{statusUnmeasured}},
		{"reference missing", cellWith("bulk", wBulk, nil, rate, map[string]float64{"braid": 100}), []status{statusUnmeasured}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []status
			for _, tg := range targetsFor(tc.c) {
				r := cellVerdict(tc.c, tg)
				got = append(got, r.Status)
				if r.Detail == "" || r.Target == "" {
					t.Errorf("row %+v lacks its detail or target", r)
				}
			}
			if len(tc.want) == 1 && len(got) > 1 {
				// Ping beside bulk judges p50, p99 and the bulk rate; the
				// cell has p50 only.
				got = got[:1]
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("statuses %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAxis checks the scale choices: a log axis for medians far apart,
// decade ticks on it, a linear axis with ticks covering the range, and a
// whisker far beyond the medians clipped with its range in the label.
func TestAxis(t *testing.T) {
	wide := chart{Groups: []barGroup{{Bars: []bar{{Series: "a", Value: 0.001, Min: 0.001, Max: 0.004}, {Series: "b", Value: 2, Min: 2, Max: 2}}}}}
	a := wide.makeAxis()
	if !a.log || a.lo >= 0.001 || a.hi < 2 {
		t.Errorf("medians 0.001 and 2: axis %+v, want a log axis covering both with room below 0.001", a)
	}
	for _, tk := range a.ticks() {
		if d := math.Log10(tk); math.Abs(d-math.Round(d)) > 1e-9 && a.hi/a.lo > 1000 {
			t.Errorf("log tick %v is not a decade", tk)
		}
	}
	narrow := chart{Groups: []barGroup{{Bars: []bar{{Series: "a", Value: 24.2, Min: 20, Max: 20600}, {Series: "b", Value: 60, Min: 50, Max: 70}}}}}
	a = narrow.makeAxis()
	if a.log || a.hi > 2*clipFactor*60 || a.lo != 0 {
		t.Errorf("medians 24.2 and 60 with a 20.6k whisker: axis %+v, want linear from 0, clipped near the medians", a)
	}
	ticks := a.ticks()
	if len(ticks) < 3 || ticks[0] != 0 || ticks[len(ticks)-1] != a.hi {
		t.Errorf("ticks %v of axis %+v: want at least 3 from 0 to the end", ticks, a)
	}
	label, clipped := narrow.label(a, narrow.Groups[0].Bars[0])
	if !clipped || !strings.Contains(label, "20.6k") {
		t.Errorf("label %q (clipped %v): want the clipped whisker's range printed", label, clipped)
	}
	svg := string(narrow.render([]string{"a", "b"}))
	for _, want := range []string{`class="clip"`, `class="grid"`, `class="tick"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %s", want)
		}
	}
	// A slowdown of +0.02 % beside +20 %: a linear axis, a bar under 3 px.
	lin := chart{Percent: true, Groups: []barGroup{{Bars: []bar{{Series: "a", Value: 0.0002, Min: 0.0002, Max: 0.0002}, {Series: "b", Value: 0.2, Min: 0.2, Max: 0.2}}}}}
	if s := string(lin.render([]string{"a", "b"})); !strings.Contains(s, `class="tiny"`) {
		t.Error("a bar under 3 px has no marker")
	}
}

// fillSynthetic gives rep every cell of its options' plan, each
// applicable contender with one made-up sample (1 + the length of its
// name, in every metric), and summarizes it: a report with every row and
// chart, without measuring.
func fillSynthetic(rep *report) {
	for _, c := range buildCells(rep.Options) {
		cr := cellResult{cell: c}
		for _, e := range rep.Contenders {
			r := contenderResult{Contender: e.Name}
			if c.na != nil {
				r.NotApplicable = c.na(e)
			}
			if r.NotApplicable == "" {
				s := sample{}
				for _, m := range c.Metrics {
					s[m.Key] = 1 + float64(len(e.Name))
				}
				r.Samples = []sample{s}
			}
			cr.Results = append(cr.Results, r)
		}
		rep.Cells = append(rep.Cells, cr)
	}
	summarize(rep)
}

// TestReportText checks that the terminal output opens with the verdict
// and that the HTML's charts don't repeat their titles as subtitles or
// group labels, and label notifications "count x size KiB".
func TestReportText(t *testing.T) {
	opts := testOptions(t)
	rep := &report{Options: opts, Contenders: selectEntries(nil), Complete: true}
	fillSynthetic(rep)
	var text bytes.Buffer
	writeText(&text, rep)
	v := strings.Index(text.String(), "== Verdict")
	first := strings.Index(text.String(), "== "+rep.Cells[0].Title)
	if v < 0 || first < 0 || v > first {
		t.Errorf("verdict at %d, first table at %d: want the verdict first", v, first)
	}
	var page bytes.Buffer
	if err := writeHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "KiB KiB") {
		t.Error(`the page says "KiB KiB"`)
	}
	charted := map[string]bool{}
	for _, s := range buildSections(rep) {
		for _, c := range s.charts {
			for _, id := range c.Cells {
				charted[id] = true
			}
			if c.Sub != "" && strings.Contains(strings.ToLower(c.Sub), strings.ToLower(c.Title)) {
				t.Errorf("chart %q repeats its title in its subtitle %q", c.Title, c.Sub)
			}
			if c.Title == s.title {
				t.Errorf("chart %q repeats its section's title", c.Title)
			}
			for _, g := range c.Groups {
				if g.Label != "" && strings.Contains(strings.ToLower(g.Label), strings.ToLower(c.Title)) {
					t.Errorf("chart %q repeats its title in group label %q", c.Title, g.Label)
				}
			}
		}
	}
	for _, c := range rep.Cells {
		if !charted[c.ID] {
			t.Errorf("cell %s is in no chart", c.ID)
		}
	}
}

// TestVerdictBestOtherNeedsEveryMember: a target against the best of
// go-yamux, smux and hashicorp/yamux is not measured while any of them has
// no figure, whatever braid's ratio to the rest, and the detail names the
// missing ones.
func TestVerdictBestOtherNeedsEveryMember(t *testing.T) {
	bulkRate := metric{Key: mBulkMBps, Unit: "MB/s", Higher: true}
	ping := map[string]string{"neighbours": "10"}
	bulkTarget := func(c *cellResult) target {
		for _, tg := range targetsFor(c) {
			if tg.metric == mBulkMBps {
				return tg
			}
		}
		t.Fatalf("cell %s has no %s target", c.ID, mBulkMBps)
		return target{}
	}
	// braid at 0.85x go-yamux's 1000: the bound 0.8x holds against
	// go-yamux and hashicorp, but smux's figure could be higher.
	c := withFailed(cellWith("ping-bulk", wPing, ping, bulkRate, map[string]float64{
		"braid": 850, "braid-nocoalesce": 700, yamuxName: 1000, "smux": 1200, "hashicorp": 600}), "smux")
	r := cellVerdict(c, bulkTarget(c))
	if r.Status != statusUnmeasured || !strings.Contains(r.Detail, "smux") {
		t.Errorf("smux failed: status %s (%s), want %s naming smux", r.Status, r.Detail, statusUnmeasured)
	}
	// smux and hashicorp not run at all.
	c = cellWith("ping-bulk", wPing, ping, bulkRate, map[string]float64{
		"braid": 850, "braid-nocoalesce": 700, yamuxName: 1000})
	r = cellVerdict(c, bulkTarget(c))
	if r.Status != statusUnmeasured || !strings.Contains(r.Detail, "smux") || !strings.Contains(r.Detail, "hashicorp") {
		t.Errorf("smux and hashicorp unmeasured: status %s (%s), want %s naming both", r.Status, r.Detail, statusUnmeasured)
	}
	// Every member measured: judged against the best of them.
	c = cellWith("ping-bulk", wPing, ping, bulkRate, map[string]float64{
		"braid": 850, "braid-nocoalesce": 700, yamuxName: 1000, "smux": 900, "hashicorp": 600})
	if r = cellVerdict(c, bulkTarget(c)); r.Status != statusWon {
		t.Errorf("every member measured: status %s (%s), want %s", r.Status, r.Detail, statusWon)
	}
}

// TestVerdictLossOutranksMissingReference: every condition of a target is
// evaluated; a measured condition that fails makes the row lost even when
// another condition's reference has no figure, and a missing reference
// makes it not measured only when nothing measured failed.
func TestVerdictLossOutranksMissingReference(t *testing.T) {
	lat := metric{Key: mP50, Unit: "µs"}
	ping := map[string]string{"neighbours": "10"}
	cases := []struct {
		name    string
		medians map[string]float64
		want    status
	}{
		// braid at 2.5x the best other (bound 0.5x); coalescing off failed.
		{"first condition fails, second unmeasured", map[string]float64{
			"braid": 500, yamuxName: 1000, "smux": 200, "hashicorp": 900}, statusLost},
		// braid at 1.5x coalescing off (bound 1x); the best other unmeasured.
		{"first condition unmeasured, second fails", map[string]float64{
			"braid": 150, "braid-nocoalesce": 100, yamuxName: 1000, "smux": 200}, statusLost},
		{"first condition holds, second unmeasured", map[string]float64{
			"braid": 90, yamuxName: 1000, "smux": 200, "hashicorp": 900}, statusUnmeasured},
		{"both hold", map[string]float64{
			"braid": 90, "braid-nocoalesce": 100, yamuxName: 1000, "smux": 200, "hashicorp": 900}, statusWon},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cellWith("ping-bulk", wPing, ping, lat, tc.medians)
			r := cellVerdict(c, targetsFor(c)[0])
			if r.Status != tc.want {
				t.Errorf("status %s (%s), want %s", r.Status, r.Detail, tc.want)
			}
			if r.Status != statusWon && !strings.Contains(r.Detail, "no figure") {
				t.Errorf("detail %q does not say which reference has no figure", r.Detail)
			}
		})
	}
}

// TestPacketVerdictLossOutranksMissingFigure: a slowdown matrix row is lost
// when braid loses at one GOMAXPROCS, even when a figure is missing at
// another; it is not measured only when nothing measured lost.
func TestPacketVerdictLossOutranksMissingFigure(t *testing.T) {
	timeOp := metric{Key: mTime, Unit: "ms"}
	packetCell := func(procs string, braid []float64, failed string) cellResult {
		c := cellRounds("packets/"+procs, "SmallPackets", map[string]string{"link": "LAN", "gomaxprocs": procs}, timeOp,
			map[string][]float64{"braid": braid, yamuxName: {99, 100, 101}, rawName: {90, 90, 90}})
		c.Groups = []string{wPackets}
		if failed != "" {
			c = withFailed(c, failed)
		}
		return *c
	}
	slower := []float64{150, 150, 150} // 1.5x go-yamux
	faster := []float64{95, 96, 97}
	cases := []struct {
		name  string
		cells []cellResult
		want  status
	}{
		{"lost at P1, braid failed at P2", []cellResult{packetCell("1", slower, ""), packetCell("2", faster, "braid")}, statusLost},
		{"braid failed at P1, lost at P2", []cellResult{packetCell("1", faster, "braid"), packetCell("2", slower, "")}, statusLost},
		{"lost at P1, yamux failed at P2", []cellResult{packetCell("1", slower, ""), packetCell("2", faster, yamuxName)}, statusLost},
		{"won at P1, braid failed at P2", []cellResult{packetCell("1", faster, ""), packetCell("2", faster, "braid")}, statusUnmeasured},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := packetVerdict(&report{Cells: tc.cells}, matrixKey{"SmallPackets", "LAN"})
			if r.Status != tc.want {
				t.Errorf("status %s (%s), want %s", r.Status, r.Detail, tc.want)
			}
			if !strings.Contains(r.Detail, "no figure") {
				t.Errorf("detail %q does not say what has no figure", r.Detail)
			}
		})
	}
}

// TestVerdictTieBandOnlyWithoutTarget: the 1 % tie band applies to the
// workloads no issue names (source "none") only; an issue's "no worse
// than" target is judged exactly.
func TestVerdictTieBandOnlyWithoutTarget(t *testing.T) {
	lat := metric{Key: mP50, Unit: "µs"}
	timeOp := metric{Key: mTimeOp, Unit: "ms"}
	cases := []struct {
		name string
		c    *cellResult
		want status
	}{
		{"#12.4 idle p50 0.9% over go-yamux", cellWith("ping-idle", wPing, map[string]string{"neighbours": "0"}, lat,
			map[string]float64{"braid": 100.9, yamuxName: 100}), statusLost},
		{"#12.1 p50 0.9% over coalescing off", cellWith("ping-bulk", wPing, map[string]string{"neighbours": "10"}, lat,
			map[string]float64{"braid": 100.9, "braid-nocoalesce": 100, yamuxName: 1000, "smux": 900, "hashicorp": 900}), statusLost},
		{"#15.1 chunks 0.9% over go-yamux", cellWith("chunks", wChunks, map[string]string{"latency": chunkLatency.String(), "n": "40", "mode": "single"}, timeOp,
			map[string]float64{"braid": 100.9, yamuxName: 100}), statusLost},
		{"#12.4 idle p50 equal to go-yamux", cellWith("ping-idle", wPing, map[string]string{"neighbours": "0"}, lat,
			map[string]float64{"braid": 100, yamuxName: 100}), statusWon},
		{"no target, 0.9% over go-yamux", cellWith("chunks", wChunks, map[string]string{"latency": "0ms"}, timeOp,
			map[string]float64{"braid": 100.9, yamuxName: 100}), statusWon},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := cellVerdict(tc.c, targetsFor(tc.c)[0])
			if r.Status != tc.want {
				t.Errorf("target %q [%s]: status %s (%s), want %s", r.Target, r.Source, r.Status, r.Detail, tc.want)
			}
		})
	}
}

// TestNotifyRatiosPairTransports: each 64 KiB notification cell is divided
// by the 256 KiB cell of the same count and transport, and each printed
// line names its transport.
func TestNotifyRatiosPairTransports(t *testing.T) {
	rate := metric{Key: mMsgps, Unit: "msgs/s", Higher: true}
	notify := func(size int, tr transport, braid float64) cellResult {
		return *cellWith(fmt.Sprintf("notify/%dKiB/100%s", size>>10, tr.id), wNotify,
			map[string]string{"count": "100", "size": fmt.Sprint(size), "transport": tr.name()}, rate,
			map[string]float64{"braid": braid, yamuxName: 1, rawName: 1})
	}
	rep := &report{Cells: []cellResult{
		notify(notifySmall, tcpTransport(), 1000),
		notify(notifyLarge, tcpTransport(), 500),
		notify(notifySmall, tlsTransport(), 800),
		notify(notifyLarge, tlsTransport(), 100),
	}}
	var b bytes.Buffer
	writeNotifyRatios(&b, rep)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("output:\n%s\nwant a heading and a line per transport", b.String())
	}
	// tcp: 1000/500 = 2.0; tls: 800/100 = 8.0.
	for i, want := range []struct{ transport, ratio string }{{"tcp", "braid 2.0"}, {"tls", "braid 8.0"}} {
		if l := lines[1+i]; !strings.Contains(l, want.transport) || !strings.Contains(l, want.ratio) {
			t.Errorf("line %q: want %s and %s", l, want.transport, want.ratio)
		}
	}
}

// TestVerdictTextWidth: the verdict's text stays within textWidth, so
// that the HTML page shows it whole, even where braid misses every
// condition of every target by a wide margin or failed with a long
// reason. Its rows wrap the target and the result; the default plan's
// workload names are the longest.
func TestVerdictTextWidth(t *testing.T) {
	for _, quick := range []bool{true, false} {
		opts := testOptions(t)
		opts.Links, opts.CPUs = linkNames(), []int{1, 2, 4}
		if !quick {
			opts.Quick, opts.Plan = false, defaultPlan()
		}
		rep := &report{Options: opts, Contenders: selectEntries(nil), Complete: true}
		fillSynthetic(rep)
		for i := range rep.Cells {
			c := &rep.Cells[i]
			for j := range c.Results {
				r := &c.Results[j]
				if r.Contender != "braid" || r.NotApplicable != "" {
					continue
				}
				if i%3 == 0 {
					r.Samples, r.Failed = nil, "timed out after 20s: "+strings.Repeat("a long reason that goes on ", 8)
					continue
				}
				for _, s := range r.Samples {
					for _, m := range c.Metrics {
						if m.Higher {
							s[m.Key] /= 1234.5
						} else {
							s[m.Key] *= 1234.5
						}
					}
				}
			}
		}
		summarize(rep)
		var text bytes.Buffer
		writeVerdict(&text, buildVerdict(rep))
		lost := 0
		for _, l := range strings.Split(text.String(), "\n") {
			if n := utf8.RuneCountInString(l); n > textWidth {
				t.Errorf("quick %v: verdict line of %d characters, more than %d:\n%s", quick, n, textWidth, l)
			}
			if strings.Contains(l, "LOST: ") {
				lost++
			}
		}
		if lost == 0 {
			t.Errorf("quick %v: braid lost nothing; the test's figures do not exercise the widest rows", quick)
		}
	}
}

// TestWrapClauses: the verdict's columns break between clauses, then
// between words, never inside parentheses while a space outside them
// fits, and a word longer than the column is cut; wrap counts
// characters.
func TestWrapClauses(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want []string
	}{
		{"LOST: 1.07x yamux ✗ (rounds overlap); 1.01x tcp ✓", 34,
			[]string{"LOST: 1.07x yamux ✗", "(rounds overlap); 1.01x tcp ✓"}},
		{"≤ 0.5x best other, ≤ 1x braid-nocoalesce [#12.1]", 36,
			[]string{"≤ 0.5x best other,", "≤ 1x braid-nocoalesce [#12.1]"}},
		{"WON: 0.35x yamux ✓", 34, []string{"WON: 0.35x yamux ✓"}},
		{"abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
	} {
		got := wrapClauses(c.s, c.n, "; ", ", ")
		if !slices.Equal(got, c.want) {
			t.Errorf("wrapClauses(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	// wrap, under titles, notes and failures too: characters, not bytes;
	// a note that is all one parenthesis still breaks between words.
	for _, c := range []struct {
		s    string
		n    int
		want []string
	}{
		{"µµµµµµ", 4, []string{"µµµµ", "µµ"}},
		{"(a note in parentheses)", 12, []string{"(a note in", "parentheses)"}},
	} {
		if got := wrap(c.s, c.n); !slices.Equal(got, c.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// TestDescribeLink: a link's title names what sets it apart, its buffer
// too when it is not the default.
func TestDescribeLink(t *testing.T) {
	for _, tc := range []struct {
		link slowconn.Link
		want string
	}{
		{slowconn.Unlimited(), "unlimited, 0s one way"},
		{slowconn.Broadband(), "100 Mbit/s, 8ms one way"},
		{slowconn.Bufferbloat(), "100 Mbit/s, 8ms one way, a 2 MiB buffer"},
		{slowconn.Link{Bandwidth: 1e9, SendBuffer: 1500}, "1 Gbit/s, 0s one way, a 1500 B buffer"},
		{slowconn.Mobile(), "10 Mbit/s, 30ms one way, jitter 5ms, loss 0.5%"},
	} {
		if got := describeLink(tc.link); got != tc.want {
			t.Errorf("describeLink(%+v) = %q, want %q", tc.link, got, tc.want)
		}
	}
}
