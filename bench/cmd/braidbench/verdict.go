package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/braidmux/braid/bench/internal/slowdown"
)

// The verdict opens the report: for each workload braid's figure, its
// ratio to go-yamux and to the raw limit, and whether it meets the target
// the issues set (#12: the writer under load; #15: flow control and
// memory). A workload no issue names is held to "no worse than go-yamux".

// status is the outcome of one verdict row.
type status string

const (
	statusWon        status = "won"
	statusLost       status = "lost"
	statusUnmeasured status = "not measured"
)

// verdictRow is one workload's line of the verdict.
type verdictRow struct {
	CellID   string   `json:"cell"`
	Workload string   `json:"workload"`
	Metric   string   `json:"metric"`
	Braid    string   `json:"braid"` // braid's figure, formatted
	VsYamux  *float64 `json:"vs_yamux,omitempty"`
	VsRaw    *float64 `json:"vs_tcp,omitempty"`
	Target   string   `json:"target"`
	Source   string   `json:"source"`
	Status   status   `json:"status"`
	Detail   string   `json:"detail"` // the figures behind the status
	// Overlap marks a lost row whose every missed bound braid's rounds
	// and the reference's rounds straddle (rangesOverlap): the medians
	// miss, but the rounds' spread holds the target too, so more rounds
	// could tell either way. The row stays lost.
	Overlap bool `json:"rounds_overlap,omitempty"`
}

// condition is one bound of a target: braid's median over ref's median
// (or braid's median itself, for an absolute bound) at most or at least
// factor.
type condition struct {
	ref    string // a contender, refBestOther, or "" for an absolute bound
	atMost bool
	factor float64
	unit   string // of an absolute bound
}

// refBestOther stands for the best of go-yamux, smux and hashicorp/yamux
// in the same run (#12 target 1).
const refBestOther = "best other"

// bestOthers are the contenders refBestOther picks from.
func bestOthers() []string { return []string{yamuxName, "smux", "hashicorp"} }

// target is what a workload's metric must meet.
type target struct {
	metric string
	conds  []condition
	source string
}

// noTarget is the source of the default target.
const noTarget = "none"

// tieTolerance is how far over a "no worse than" bound (factor 1) braid
// may be and still meet it, on a workload no issue names (source
// noTarget): two medians within 1 % are a tie, not a loss (a link-bound
// workload takes the same time for every muxer to the microsecond, and
// which is ahead is chance). An issue's target is judged exactly.
const tieTolerance = 0.01

// tieBand is the tie tolerance of t's "no worse than" bounds: tieTolerance
// for the default target, none for an issue's.
func tieBand(t target) float64 {
	if t.source == noTarget {
		return tieTolerance
	}
	return 0
}

// zeroAllocsBound is the most heap allocations per 64 KiB write+read
// (both ends, over TCP) that count as issue #12's "0 allocs":
// testing.AllocsPerRun, which go test's TestZeroAllocsBulkWriteRead
// asserts with, floors the mean, and a run of 2,048 writes keeps the few
// allocations a run makes once (its goroutine, the drain's buffer) far
// below half of one per write. Over TLS crypto/tls allocates about two
// per 64 KiB of its own (raw TLS as much), so those cells show the figure
// without a target.
const zeroAllocsBound = 0.5

// defaultTarget holds m to no worse than go-yamux.
func defaultTarget(m metric) target {
	return target{metric: m.Key, conds: []condition{{ref: yamuxName, atMost: !m.Higher, factor: 1}}, source: noTarget}
}

// isTLS tells whether a cell runs over TLS (the writer issue's rows): its
// "transport" parameter (transport.name) says so, or its ID does.
func isTLS(c *cellResult) bool {
	return strings.Contains(strings.ToLower(c.ID), "tls") || c.Params["transport"] == "tls"
}

// targetsFor returns the targets of cell c: #12 and #15 where they name
// the workload, else no worse than go-yamux on c's first metric.
func targetsFor(c *cellResult) []target {
	if len(c.Metrics) == 0 {
		return nil
	}
	first := c.Metrics[0]
	atLeast := func(ref string, f float64) condition { return condition{ref: ref, factor: f} }
	atMost := func(ref string, f float64) condition { return condition{ref: ref, atMost: true, factor: f} }
	switch c.Workload {
	case wBulk:
		if isTLS(c) {
			return []target{{mMBps, []condition{atLeast(yamuxName, 1.1), atLeast(rawName, 0.9)}, "#12.2 (TLS)"}}
		}
		return []target{{mMBps, []condition{atLeast(yamuxName, 1.2)}, "#12.2"},
			{mAllocsOp, []condition{{atMost: true, factor: zeroAllocsBound, unit: "allocs"}}, "#12.4"}}
	case wSmall:
		return []target{{mMsgps, []condition{atLeast(yamuxName, 10)}, "#12.4"}}
	case wPing:
		if c.Params["neighbours"] == "0" {
			return []target{{mP50, []condition{atMost(yamuxName, 1)}, "#12.4"}}
		}
		conds := []condition{atMost(refBestOther, 0.5), atMost("braid-nocoalesce", 1)}
		// No winning the latency by starving the bulk streams beside it.
		bulk := []condition{atLeast(refBestOther, 0.8)}
		return []target{{mP50, conds, "#12.1"}, {mP99, conds, "#12.1"}, {mBulkMBps, bulk, "#12.1"}}
	case wIdle:
		return []target{{mHeap, []condition{{atMost: true, factor: 1024, unit: "B"}}, "#12.4"}}
	case wPingLink:
		// No issue's: the p50 no worse than go-yamux's, and the bulk
		// beside it not traded for it.
		return []target{{mP50, []condition{atMost(yamuxName, 1)}, noTarget},
			{mBulkMBps, []condition{atLeast(yamuxName, linkBulkShare)}, noTarget}}
	case wNotify:
		return []target{{mMsgps, []condition{atLeast(yamuxName, 1.2), atLeast(rawName, 0.85)}, "#12.3"}}
	case wHostNotify:
		return []target{{mMsgps, []condition{atLeast(yamuxName, 1.2)}, "#12.3, vs yamux only"}}
	case wHostPing:
		if hostPingLoaded(c) {
			// The hosts' only other muxer is stock yamux.
			conds := []condition{atMost(yamuxName, 0.5), atMost("braid-nocoalesce", 1)}
			bulk := []condition{atLeast(yamuxName, 0.8)}
			return []target{{mP50, conds, "#12.1, hosts"}, {mP99, conds, "#12.1, hosts"}, {mBulkMBps, bulk, "#12.1, hosts"}}
		}
		return []target{{mP50, []condition{atMost(yamuxName, 1)}, "#12.4, hosts"}}
	case wChunks, wHostChunks:
		if c.Params["latency"] == chunkLatency.String() {
			if c.Params["n"] == "120" && c.Params["mode"] == "single" {
				return []target{{mTimeOp, []condition{atMost(rawName, 1.1)}, "#15.1"}}
			}
			return []target{{mTimeOp, []condition{atMost(yamuxName, 1)}, "#15.1"}}
		}
	}
	return []target{defaultTarget(first)}
}

// buildVerdict makes the verdict's rows: a row per target of every cell
// but the slowdown matrices, which get a row per workload and link.
func buildVerdict(rep *report) []verdictRow {
	var rows []verdictRow
	var packets []matrixKey
	for i := range rep.Cells {
		c := &rep.Cells[i]
		if isPacketCell(*c) {
			k := matrixKey{c.Workload, c.Params["link"]}
			if !slices.Contains(packets, k) {
				packets = append(packets, k)
				rows = append(rows, packetVerdict(rep, k))
			}
			continue
		}
		ts := targetsFor(c)
		note := skewNote(c)
		for _, t := range ts {
			r := cellVerdict(c, t)
			if note != "" {
				r.Detail += "; " + note
			}
			if len(ts) > 1 {
				// Name the metric where a workload has a row per metric.
				name, _, _ := strings.Cut(t.metric, " ")
				r.Workload += ", " + name
			}
			rows = append(rows, r)
		}
	}
	return append(rows, missingVerdict(rep)...)
}

// issueNeed is one workload of issue #12, which asks for its targets at
// GOMAXPROCS 1 and 2 (issueProcs), over loopback TCP and over TLS 1.3.
type issueNeed struct {
	group  string // the -only workload that runs it
	name   string // the workload in the verdict's words
	metric string // the metric judged (the first, where there are several)
	// workload and params (key, value, ...) identify a cell that
	// measures it.
	workload string
	params   []string
	// tcpOnly: the target is the TCP cells' alone (zeroAllocsBound);
	// anyCell: one cell at any transport and GOMAXPROCS measures it (the
	// heap an idle stream holds depends on neither).
	tcpOnly, anyCell bool
}

// issueProcs are the GOMAXPROCS issue #12 asks every target at.
func issueProcs() []int { return []int{1, 2} }

// issueNeeds lists what issue #12 asks braidbench to judge.
func issueNeeds() []issueNeed {
	return []issueNeed{
		{wPing, "Ping-pong beside 10 bulk streams", mP50, wPing, []string{"neighbours", "10"}, false, false},
		{wBulk, "Bulk, one stream", mMBps, wBulk, []string{"write", fmt.Sprint(slowdown.LoopbackWrite)}, false, false},
		{wNotify, "Notifications, 2000 x 64 KiB", mMsgps, wNotify, []string{"count", "2000", "size", fmt.Sprint(notifySmall)}, false, false},
		{wNotify, "Notifications, 500 x 256 KiB", mMsgps, wNotify, []string{"count", "500", "size", fmt.Sprint(notifyLarge)}, false, false},
		{wSmall, "100 streams x 64 B messages", mMsgps, wSmall, []string{"streams", "100", "size", "64"}, false, false},
		{wPing, "Ping-pong, idle", mP50, wPing, []string{"neighbours", "0"}, false, false},
		{wBulk, "Allocations per 64 KiB write+read", mAllocsOp, wBulk, []string{"write", fmt.Sprint(slowdown.LoopbackWrite)}, true, false},
		{wIdle, "Heap per idle stream", mHeap, wIdle, nil, false, true},
	}
}

// measures tells whether c is a cell of n, at whatever transport and
// GOMAXPROCS.
func (n issueNeed) measures(c *cellResult) bool {
	if c.Workload != n.workload {
		return false
	}
	for i := 0; i+1 < len(n.params); i += 2 {
		if c.Params[n.params[i]] != n.params[i+1] {
			return false
		}
	}
	return true
}

// target is n's target over TLS or not, in words, and its source: what
// targetsFor holds a cell of n to.
func (n issueNeed) target(tls bool) (string, string) {
	c := &cellResult{cell: cell{ID: n.workload, Workload: n.workload, Params: map[string]string{},
		Metrics: []metric{{Key: n.metric}}}}
	for i := 0; i+1 < len(n.params); i += 2 {
		c.Params[n.params[i]] = n.params[i+1]
	}
	if tls {
		c.ID += "/tls"
	}
	// The target of n's metric: the others of its cells (the loaded
	// ping's p99 and bulk beside it, the bulk cells' allocations) have
	// rows of their own once measured, and a line per missing cell stays
	// short.
	i := slices.IndexFunc(targetsFor(c), func(t target) bool { return t.metric == n.metric })
	t := targetsFor(c)[max(i, 0)]
	return describeTarget(t.conds, metric{Key: t.metric}), t.source
}

// cellProcs is the GOMAXPROCS c ran at: its own, or the process's.
func cellProcs(rep *report, c *cellResult) int {
	if c.Procs > 0 {
		return c.Procs
	}
	return rep.Machine.GOMAXPROCS
}

// missingVerdict is a "not measured" row for each of issue #12's targets,
// transports and GOMAXPROCS that no cell of rep measured, among the
// workloads rep's run selected: without them a run that measured a part
// of the issue would read as the whole issue judged.
func missingVerdict(rep *report) []verdictRow {
	var rows []verdictRow
	for _, n := range issueNeeds() {
		if len(selectCells([]cell{{Groups: []string{n.group}}}, rep.Options.Only)) == 0 {
			continue
		}
		if n.anyCell {
			if !slices.ContainsFunc(rep.Cells, func(c cellResult) bool { return n.measures(&c) }) {
				target, source := n.target(false)
				rows = append(rows, verdictRow{Workload: n.name, Metric: n.metric, Braid: "-",
					Target: target, Source: source, Status: statusUnmeasured, Detail: "this run did not measure it"})
			}
			continue
		}
		for _, tls := range []bool{false, true} {
			if tls && n.tcpOnly {
				continue
			}
			for _, p := range issueProcs() {
				found := false
				for i := range rep.Cells {
					c := &rep.Cells[i]
					found = found || (n.measures(c) && isTLS(c) == tls && cellProcs(rep, c) == p)
				}
				if found {
					continue
				}
				name := n.name
				if tls {
					name += ", TLS"
				}
				detail := "this run did not measure it" // the row's name says where
				target, source := n.target(tls)
				rows = append(rows, verdictRow{Workload: fmt.Sprintf("%s, P=%d", name, p), Metric: n.metric, Braid: "-",
					Target: target, Source: source, Status: statusUnmeasured, Detail: detail})
			}
		}
	}
	return rows
}

// cellVerdict judges metric t.metric of c.
func cellVerdict(c *cellResult, t target) verdictRow {
	m := metric{Key: t.metric}
	for _, x := range c.Metrics {
		if x.Key == t.metric {
			m = x
		}
	}
	row := verdictRow{CellID: c.ID, Workload: shortName(c), Metric: t.metric, Source: t.source,
		Target: describeTarget(t.conds, m), Braid: "-"}
	b := c.result("braid")
	if b == nil || !b.ok() {
		row.Status = statusUnmeasured
		row.Detail = "braid has no figure"
		if b != nil && b.Failed != "" {
			row.Detail = "braid failed: " + shorten(firstLine(b.Failed), verdictReason)
		}
		return row
	}
	s, ok := b.Summary[t.metric]
	if !ok {
		row.Status, row.Detail = statusUnmeasured, "braid has no "+t.metric
		return row
	}
	row.Braid = fmtNum(s.Median) + " " + m.Unit
	row.VsYamux, row.VsRaw = s.VsYamux, s.VsRaw
	row.Status, row.Detail, row.Overlap = judge(t.conds, tieBand(t), s, func(ref string) (summary, string, []string) {
		return refSummary(c, ref, m)
	})
	return row
}

// refSummary is ref's summary of m in c and the contender it came from
// (for refBestOther, the one with the best median). missing names the
// contenders ref stands for that have no figure of m (failed, not run or
// a zero median); while any has none, ref is unmeasured: the best of the
// rest need not be the best.
func refSummary(c *cellResult, ref string, m metric) (best summary, who string, missing []string) {
	names := []string{ref}
	if ref == refBestOther {
		names = bestOthers()
	}
	found := false
	for _, n := range names {
		var s summary
		ok := false
		if r := c.result(n); r != nil && r.ok() {
			s, ok = r.Summary[m.Key]
		}
		if !ok || s.Median == 0 {
			missing = append(missing, n)
			continue
		}
		if !found || (m.Higher && s.Median > best.Median) || (!m.Higher && s.Median < best.Median) {
			best, who, found = s, n, true
		}
	}
	return best, who, missing
}

// judge checks braid's summary b against every one of conds; ref resolves
// a reference's summary and names the contenders behind it with no
// figure. tie is how far over a factor-1 bound is still a tie (tieBand).
// The row is lost if any measured condition fails, not measured if none
// fails but some reference has no figure, won only if every condition was
// measured and holds. overlap tells, for a loss, whether every missed
// condition is one the rounds straddle (rangesOverlap).
func judge(conds []condition, tie float64, b summary, ref func(string) (summary, string, []string)) (st status, detail string, overlap bool) {
	var parts []string
	lost, unmeasured := false, false
	overlap = true
	for _, cd := range conds {
		got := b.Median
		what := fmtNum(b.Median) + " " + cd.unit
		bound := summary{Median: cd.factor, Min: cd.factor, Max: cd.factor} // an absolute bound
		if cd.ref != "" {
			r, who, missing := ref(cd.ref)
			if len(missing) > 0 {
				unmeasured = true
				parts = append(parts, noFigure(cd.ref, missing))
				continue
			}
			got = b.Median / r.Median
			what = fmt.Sprintf("%.2fx %s", got, who)
			bound = summary{Median: cd.factor * r.Median, Min: cd.factor * r.Min, Max: cd.factor * r.Max}
		}
		holds := got >= cd.factor
		if cd.atMost {
			holds = got <= cd.factor
		}
		if cd.ref != "" && cd.factor == 1 {
			holds = got >= 1-tie
			if cd.atMost {
				holds = got <= 1+tie
			}
		}
		switch {
		case holds:
			what += " ✓"
		case rangesOverlap(b, bound, cd.atMost):
			lost = true
			what += " ✗ (rounds overlap)"
		default:
			lost, overlap = true, false
			what += " ✗"
		}
		parts = append(parts, strings.TrimSpace(what))
	}
	switch {
	case lost:
		st = statusLost
	case unmeasured:
		st = statusUnmeasured
	default:
		st = statusWon
	}
	return st, strings.Join(parts, "; "), lost && overlap
}

// noFigure says that reference ref is unmeasured for want of missing's
// figures.
func noFigure(ref string, missing []string) string {
	if len(missing) == 1 && missing[0] == ref {
		return ref + " has no figure"
	}
	return fmt.Sprintf("%s: no figure from %s", ref, strings.Join(missing, ", "))
}

// rangesOverlap tells whether braid's rounds b reach the bound's rounds
// (the reference's rounds times the target's factor): for an upper bound
// (atMost) braid's best round is at or under the bound's worst, for a
// lower bound braid's best round at or over the bound's lowest. A median
// that misses with overlapping rounds is a miss the run's own spread
// cannot tell from a hit.
func rangesOverlap(b, bound summary, atMost bool) bool {
	if atMost {
		return b.Min <= bound.Max
	}
	return b.Max >= bound.Min
}

// describeTarget says conds in words.
func describeTarget(conds []condition, m metric) string {
	var parts []string
	for _, cd := range conds {
		op := "≥"
		if cd.atMost {
			op = "≤"
		}
		switch cd.ref {
		case "":
			parts = append(parts, fmt.Sprintf("%s %s %s", op, fmtNum(cd.factor), cd.unit))
		case refBestOther:
			parts = append(parts, fmt.Sprintf("%s %gx best other", op, cd.factor))
		default:
			parts = append(parts, fmt.Sprintf("%s %gx %s", op, cd.factor, cd.ref))
		}
	}
	return strings.Join(parts, ", ")
}

// packetVerdict judges braid on one slowdown workload and link: its time
// against go-yamux's at every GOMAXPROCS (no issue sets a target there),
// reported at the GOMAXPROCS where braid fares worst. Every GOMAXPROCS is
// judged: the row is lost if braid loses at any measured one, not
// measured if it loses at none but a figure is missing at some.
func packetVerdict(rep *report, k matrixKey) verdictRow {
	row := verdictRow{CellID: "", Workload: k.workload + " on " + k.link, Metric: "slowdown",
		Target: "≤ 1x yamux at each GOMAXPROCS", Source: noTarget, Braid: "-", Status: statusUnmeasured}
	worst := math.Inf(-1)
	overlap := true // every GOMAXPROCS braid misses at, its rounds overlap go-yamux's
	unmeasured := false
	var procs []string
	for i := range rep.Cells {
		c := &rep.Cells[i]
		if !isPacketCell(*c) || c.Workload != k.workload || c.Params["link"] != k.link {
			continue
		}
		if row.CellID == "" {
			row.CellID = c.ID
		}
		p := "P" + c.Params["gomaxprocs"]
		b, raw := c.result("braid"), c.result(rawName)
		if b == nil || !b.ok() || raw == nil || !raw.ok() {
			unmeasured = true
			procs = append(procs, p+" braid or tcp has no figure")
			continue
		}
		s := b.Summary[mTime]
		if s.VsYamux == nil {
			unmeasured = true
			procs = append(procs, p+" yamux has no figure")
			continue
		}
		mark := "✓"
		if *s.VsYamux > 1+tieTolerance {
			mark = "✗"
			if y := c.result(yamuxName); y != nil && y.ok() && rangesOverlap(s, y.Summary[mTime], true) {
				mark += " (rounds overlap)"
			} else {
				overlap = false
			}
		}
		procs = append(procs, fmt.Sprintf("%s %.2fx %s", p, *s.VsYamux, mark))
		if *s.VsYamux > worst {
			worst = *s.VsYamux
			per := perRoundSlowdown(b, raw)
			row.Braid = fmtPercent(median(per)) + " (" + p + ")"
			row.VsYamux, row.VsRaw = s.VsYamux, s.VsRaw
		}
	}
	if len(procs) == 0 {
		return row
	}
	row.Detail = strings.Join(procs, ", ")
	switch {
	case worst > 1+tieTolerance:
		row.Status, row.Overlap = statusLost, overlap
	case unmeasured:
		row.Status = statusUnmeasured
	default:
		row.Status = statusWon
	}
	return row
}

// shortName names c's workload in a few words, for the verdict.
func shortName(c *cellResult) string {
	p := c.Params
	var s string
	switch c.Workload {
	case wBulk:
		s = "Bulk, one stream"
	case wSmall:
		s = fmt.Sprintf("%s streams x %s B messages", p["streams"], p["size"])
	case wPing:
		s = "Ping-pong, idle"
		if p["accepting"] == "true" {
			s = "Ping-pong, idle, Accept waiting"
		}
		if p["neighbours"] != "0" {
			s = "Ping-pong beside " + p["neighbours"] + " bulk streams"
		}
	case wPingSpaced:
		s = "Spaced ping beside " + p["neighbours"] + " bulk streams"
	case wPingLink:
		s = "Ping-pong beside " + p["neighbours"] + " bulk streams, " + p["link"]
	case wRPC:
		s = "Request-response, " + callersLabel(p["callers"])
	case wIdle:
		s = "Heap per idle stream"
	case wChunks:
		s = fmt.Sprintf("Chunks, n=%s %s, %s", p["n"], p["mode"], p["latency"])
	case wNotify:
		s = "Notifications, " + notifyLabel(c)
	case wHostChunks:
		s = fmt.Sprintf("Hosts: chunks, n=%s %s, %s", p["n"], p["mode"], p["latency"])
	case wHostPing:
		s = "Hosts: ping-pong" // over TLS the row's name says so, as every TLS row's
		if hostPingLoaded(c) {
			s += " beside " + p["neighbours"] + " bulk streams"
		}
	case wHostNotify:
		s = "Hosts: notifications, " + notifyLabel(c)
		if p["link"] != "" && p["link"] != "loopback" {
			s += ", " + p["link"]
		}
	default:
		s = c.ID
	}
	if strings.Contains(s, "TLS") {
		return s + whereSuffix(c, false)
	}
	return s + whereSuffix(c, true)
}

// whereSuffix names where cell c ran, for labels of cells that differ
// only there: ", TLS" over TLS (with tls), and ", P=n" at a GOMAXPROCS of
// its own (cells of a workload that run at each GOMAXPROCS read alike
// without it).
func whereSuffix(c *cellResult, tls bool) string {
	var s string
	if tls && isTLS(c) {
		s += ", TLS"
	}
	if c.Procs > 0 {
		s += fmt.Sprintf(", P=%d", c.Procs)
	}
	return s
}

// notifyLabel is "count x size KiB" of a notification cell.
func notifyLabel(c *cellResult) string {
	var size int
	fmt.Sscan(c.Params["size"], &size)
	return fmt.Sprintf("%s x %d KiB", c.Params["count"], size>>10)
}

// verdictReason bounds a failure's reason in the verdict; the cell's own
// table has all of it.
const verdictReason = 60

// shorten cuts s to n characters, marking the cut.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// verdictTally counts the rows by status, and the lost rows whose rounds
// overlap the target (verdictRow.Overlap).
func verdictTally(rows []verdictRow) (won, lost, overlap, unmeasured int) {
	for _, r := range rows {
		switch r.Status {
		case statusWon:
			won++
		case statusLost:
			lost++
			if r.Overlap {
				overlap++
			}
		default:
			unmeasured++
		}
	}
	return won, lost, overlap, unmeasured
}
