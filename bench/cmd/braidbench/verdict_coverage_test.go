package main

import (
	"fmt"
	"strings"
	"testing"
)

// Tests of the verdict's coverage of issue #12 and of the report's labels:
// synthetic figures, no measurement.

// cellAtProcs is cellWith with a GOMAXPROCS.
func cellAtProcs(id, w string, params map[string]string, procs int, m metric, medians map[string]float64) cellResult {
	c := cellWith(id, w, params, m, medians)
	c.Procs = procs
	return *c
}

// verdictRowsOf returns rep's verdict rows whose workload has every one of
// words.
func verdictRowsOf(rows []verdictRow, words ...string) []verdictRow {
	var out []verdictRow
	for _, r := range rows {
		all := true
		for _, w := range words {
			all = all && strings.Contains(r.Workload, w)
		}
		if all {
			out = append(out, r)
		}
	}
	return out
}

// TestVerdictNamesGOMAXPROCS: two cells of one workload that differ
// only in their GOMAXPROCS get verdict rows that say which is which; a
// lost P=2 row must not read like the won P=1 row.
func TestVerdictNamesGOMAXPROCS(t *testing.T) {
	rate := metric{Key: mMBps, Unit: "MB/s", Higher: true}
	params := map[string]string{"write": "65536", "transport": "tcp"}
	rep := &report{Cells: []cellResult{
		cellAtProcs("bulk/p1", wBulk, params, 1, rate, map[string]float64{"braid": 130, yamuxName: 100, rawName: 100}),
		cellAtProcs("bulk/p2", wBulk, params, 2, rate, map[string]float64{"braid": 110, yamuxName: 100, rawName: 100}),
	}}
	var rows []verdictRow
	for _, r := range buildVerdict(rep) {
		if r.CellID != "" && r.Metric == mMBps { // the rate rows of the cells measured
			rows = append(rows, r)
		}
	}
	p1, p2 := verdictRowsOf(rows, "Bulk", "P=1"), verdictRowsOf(rows, "Bulk", "P=2")
	if len(p1) != 1 || len(p2) != 1 || p1[0].Status != statusWon || p2[0].Status != statusLost {
		for _, r := range rows {
			t.Logf("row %q: %s (%s)", r.Workload, r.Status, r.Detail)
		}
		t.Fatalf("want one won row naming P=1 and one lost row naming P=2")
	}
}

// TestVerdictIssueMatrix: issue #12 asks for every target at
// GOMAXPROCS 1 and 2, over loopback TCP and over TLS 1.3, and names the
// notification runs (2,000 x 64 KiB, 500 x 256 KiB) and 0 allocations per
// 64 KiB write+read. A run that measured only some of them must not read
// as the issue met: each missing one is a "not measured" row. The default
// plan measures every one.
func TestVerdictIssueMatrix(t *testing.T) {
	rate := metric{Key: mMBps, Unit: "MB/s", Higher: true}
	allocs := metric{Key: mAllocsOp, Unit: "allocs"}
	bulk := func(tls bool, procs int) cellResult {
		id, tr := "bulk", "tcp"
		if tls {
			id, tr = "bulk/tls", "tls"
		}
		if procs > 0 {
			id += fmt.Sprintf("/p%d", procs)
		}
		c := cellAtProcs(id, wBulk, map[string]string{"write": "65536", "transport": tr}, procs, rate,
			map[string]float64{"braid": 130, yamuxName: 100, rawName: 100})
		// And the allocations: none of braid's own over TCP.
		c.Metrics = append(c.Metrics, allocs)
		for i := range c.Results {
			for j := range c.Results[i].Samples {
				c.Results[i].Samples[j][mAllocsOp] = 0.01
			}
		}
		rep := &report{Cells: []cellResult{c}}
		summarize(rep)
		return rep.Cells[0]
	}
	logRows := func(rows []verdictRow) {
		for _, r := range rows {
			t.Logf("row %q [%s]: %s (%s)", r.Workload, r.Source, r.Status, r.Detail)
		}
	}

	t.Run("bulk over TCP at the default GOMAXPROCS only", func(t *testing.T) {
		rep := &report{Machine: machine{GOMAXPROCS: 2}, Options: options{Only: []string{wBulk}},
			Cells: []cellResult{bulk(false, 0)}}
		rows := buildVerdict(rep)
		won, lost, _, un := verdictTally(rows)
		if won != 2 || lost != 0 {
			logRows(rows)
			t.Errorf("won %d lost %d, want the cell's two rows (MB/s, allocs/op) won", won, lost)
		}
		named := map[string][]verdictRow{}
		for _, r := range rows {
			named[r.Workload] = append(named[r.Workload], r)
		}
		for _, want := range []string{"Bulk, one stream, P=1", "Bulk, one stream, TLS, P=1", "Bulk, one stream, TLS, P=2"} {
			got := named[want]
			if len(got) != 1 || got[0].Status != statusUnmeasured || !strings.HasPrefix(got[0].Source, "#12.2") {
				t.Errorf("rows %q: %+v, want one %q row of #12.2", want, got, statusUnmeasured)
			}
		}
		if got := named["Bulk, one stream, P=2"]; len(got) != 0 {
			t.Errorf("rows %q: %+v, want none: the TCP cell ran at the process's GOMAXPROCS 2", "Bulk, one stream, P=2", got)
		}
		// Allocations are judged over TCP (crypto/tls allocates of its
		// own): the P=1 row is missing.
		if got := verdictRowsOf(rows, "Allocations per 64 KiB"); len(got) != 1 || got[0].Status != statusUnmeasured ||
			!strings.Contains(got[0].Workload, "P=1") || !strings.Contains(got[0].Target, "0.5") {
			t.Errorf("allocation rows %+v, want one not measured at P=1, with the 0.5 bound", got)
		}
		if un != 3+1 {
			logRows(rows)
			t.Errorf("%d rows not measured, want 4", un)
		}
	})

	t.Run("bulk at every GOMAXPROCS and transport", func(t *testing.T) {
		rep := &report{Machine: machine{GOMAXPROCS: 4}, Options: options{Only: []string{wBulk}},
			Cells: []cellResult{bulk(false, 1), bulk(false, 2), bulk(true, 1), bulk(true, 2), bulk(false, 0)}}
		rows := buildVerdict(rep)
		won, lost, _, un := verdictTally(rows)
		// Three TCP cells with two rows each, two TLS cells with one.
		if won != 8 || lost != 0 || un != 0 {
			logRows(rows)
			t.Errorf("won %d lost %d not measured %d, want 8 won", won, lost, un)
		}
	})

	t.Run("allocations over the bound", func(t *testing.T) {
		c := bulk(false, 2)
		c.result("braid").Summary[mAllocsOp] = summary{Median: 1, Min: 1, Max: 1}
		for _, r := range buildVerdict(&report{Cells: []cellResult{c}}) {
			if r.CellID != "" && r.Metric == mAllocsOp && r.Status != statusLost {
				t.Errorf("row %q: %s (%s), want lost: one allocation per write", r.Workload, r.Status, r.Detail)
			}
		}
	})

	t.Run("the default plan", func(t *testing.T) {
		opts := options{Plan: defaultPlan(), Links: []string{"LAN"}, CPUs: []int{1, 2}, Rounds: 1}
		rep := &report{Machine: machine{GOMAXPROCS: 2}, Options: opts, Contenders: selectEntries(nil)}
		fillSynthetic(rep)
		if rows := missingVerdict(rep); len(rows) > 0 {
			logRows(rows)
			t.Errorf("the default plan leaves %d of the issue's cells unmeasured", len(rows))
		}
		measured := map[string]bool{}
		for _, r := range buildVerdict(rep) {
			measured[r.Workload] = measured[r.Workload] || r.CellID != ""
		}
		for _, want := range []string{
			"Notifications, 2000 x 64 KiB, P=1", "Notifications, 2000 x 64 KiB, TLS, P=2",
			"Notifications, 500 x 256 KiB, TLS, P=1", "100 streams x 64 B messages, TLS, P=2",
			"Ping-pong, idle, TLS, P=1", "Bulk, one stream, TLS, P=1", "Bulk, one stream, P=2, allocs/op",
		} {
			if !measured[want] {
				t.Errorf("no verdict row %q of a measured cell", want)
			}
		}
		if t.Failed() {
			for w := range measured {
				t.Logf("row %q", w)
			}
		}
	})
}

// TestNotifyChartNamesTransport: the page's notification chart holds
// the TCP and the TLS cells; a TLS group must say TLS, no two groups may
// read alike, and neither the chart nor a section may say "loopback TCP"
// of TLS figures.
func TestNotifyChartNamesTransport(t *testing.T) {
	rate := metric{Key: mMsgps, Unit: "msgs/s", Higher: true}
	mb := metric{Key: mMBps, Unit: "MB/s", Higher: true}
	notify := func(tr transport, braid float64) cellResult {
		c := cellWith("notify/64KiB/100"+tr.id, wNotify,
			map[string]string{"count": "100", "size": fmt.Sprint(notifySmall), "transport": tr.name()}, rate,
			map[string]float64{"braid": braid, yamuxName: 1, rawName: 1})
		c.Title = "Notifications with backpressure (Polkadot): 100 messages of 64 KiB at once on one stream, " + tr.where
		return *c
	}
	rep := &report{Contenders: allEntries(), Cells: []cellResult{
		notify(tcpTransport(), 1000), notify(tlsTransport(), 400),
		*cellWith("bulk", wBulk, map[string]string{"transport": "tcp"}, mb, map[string]float64{"braid": 1, yamuxName: 1, rawName: 1}),
		*cellWith("bulk/tls", wBulk, map[string]string{"transport": "tls"}, mb, map[string]float64{"braid": 1, yamuxName: 1, rawName: 1}),
	}}
	for _, s := range buildSections(rep) {
		for _, c := range s.charts {
			tls := false
			for _, id := range c.Cells {
				tls = tls || strings.Contains(id, "tls")
			}
			if tls && strings.HasSuffix(s.title, "over loopback TCP") {
				t.Errorf("section %q charts TLS cells (chart %q)", s.title, c.Title)
			}
			if !strings.HasPrefix(c.Title, "Message rate") {
				continue
			}
			if tls && strings.Contains(c.Sub, "loopback TCP") && !strings.Contains(c.Sub, "TLS") {
				t.Errorf("chart %q of TCP and TLS cells says %q", c.Title, c.Sub)
			}
			seen := map[string]bool{}
			for i, g := range c.Groups {
				if seen[g.Label] {
					t.Errorf("chart %q: two groups labelled %q", c.Title, g.Label)
				}
				seen[g.Label] = true
				if strings.Contains(c.Cells[i], "tls") != strings.Contains(g.Label, "TLS") {
					t.Errorf("chart %q: group %q of cell %s", c.Title, g.Label, c.Cells[i])
				}
			}
		}
	}
}

// TestTLSByTransportParam: a cell is over TLS when its "transport"
// parameter says so (what bulkCell, pingCell and notifyCell set), whatever
// its ID: TLS bulk is held to 0.9x raw TLS too, and missing that bound is
// a loss.
func TestTLSByTransportParam(t *testing.T) {
	rate := metric{Key: mMBps, Unit: "MB/s", Higher: true}
	c := cellWith("bulk-secure", wBulk, map[string]string{"write": "65536", "transport": "tls"}, rate,
		map[string]float64{"braid": 130, yamuxName: 100, rawName: 200})
	ts := targetsFor(c)
	if len(ts) != 1 {
		t.Fatalf("targets %+v", ts)
	}
	if r := cellVerdict(c, ts[0]); r.Status != statusLost {
		t.Errorf("TLS bulk at 0.65x raw TLS: %s (%s) against %q [%s], want %s", r.Status, r.Detail, r.Target, r.Source, statusLost)
	}
}
