package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// The published figures the notification scenario is compared with:
// rust-libp2p in Polkadot's benchmark "with backpressure" (seed 002), in
// messages per second. Only their ratio is comparable across machines.
const (
	publishedNotify64K  = 22.5e3
	publishedNotify256K = 2.8e3
)

// textWidth is where titles and notes wrap: tables of three metrics are
// about this wide, and the HTML page shows it whole at 1280 px.
const textWidth = 160

// writeText prints the report as plain-text tables.
func writeText(w io.Writer, rep *report) {
	writeHeader(w, rep)
	writeVerdict(w, buildVerdict(rep))
	for _, c := range rep.Cells {
		if isPacketCell(c) {
			continue
		}
		writeCellTable(w, &c)
	}
	writeMatrices(w, rep)
	writeNotifyRatios(w, rep)
}

// writeHeader prints the machine, the run and the contenders.
func writeHeader(w io.Writer, rep *report) {
	m := rep.Machine
	fmt.Fprintf(w, "braidbench: braid vs the Go stream multiplexers\n")
	fmt.Fprintf(w, "machine:  %s, %d cores, %s/%s\n", m.CPU, m.Cores, m.GOOS, m.GOARCH)
	fmt.Fprintf(w, "go:       %s, GOMAXPROCS %d\n", m.GoVersion, m.GOMAXPROCS)
	fmt.Fprintf(w, "date:     %s\n", m.Date.Format(time.RFC1123))
	state := "complete"
	if !rep.Complete {
		state = "INTERRUPTED: partial results"
	}
	fmt.Fprintf(w, "run:      %d round(s), %s, took %v%s\n", rep.Options.Rounds, state, rep.Duration.Round(time.Second),
		map[bool]string{true: " (-quick)"}[rep.Options.Quick])
	fmt.Fprintf(w, "figures:  median of the rounds [min-max]; xtcp and xyamux are the median over tcp's and yamux's median of the same run\n")
	if sk := skewLine(rep); sk != "" {
		fmt.Fprintf(w, "vcpus:    %s\n", sk)
	}
	fmt.Fprintf(w, "\ncontenders:\n")
	for _, e := range rep.Contenders {
		fmt.Fprintf(w, "  %-17s %s\n", e.Name, e.Desc)
	}
}

// writeCellTable prints one cell: a row per contender, the columns of
// each metric.
func writeCellTable(w io.Writer, c *cellResult) {
	for i, l := range wrap(c.Title, textWidth-3) {
		if i == 0 {
			fmt.Fprintf(w, "\n== %s\n", l)
		} else {
			fmt.Fprintf(w, "   %s\n", l)
		}
	}
	if c.Note != "" {
		for _, l := range wrap("("+c.Note+")", textWidth-3) {
			fmt.Fprintf(w, "   %s\n", l)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"contender"}
	for _, m := range c.Metrics {
		head = append(head, m.Key+" "+betterArrow(m), "[min-max]", "xtcp", "xyamux")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	na := map[string][]string{} // reason -> contenders
	var reasons, failures []string
	for _, r := range c.Results {
		row := []string{r.Contender}
		switch {
		case r.NotApplicable != "":
			if na[r.NotApplicable] == nil {
				reasons = append(reasons, r.NotApplicable)
			}
			na[r.NotApplicable] = append(na[r.NotApplicable], r.Contender)
			continue
		case r.Failed != "":
			failures = append(failures, r.Contender+": "+firstLine(r.Failed))
			row = append(row, fmt.Sprintf("FAILED [%d]", len(failures)))
		case len(r.Samples) == 0:
			row = append(row, "not run")
		default:
			for _, m := range c.Metrics {
				s, ok := r.Summary[m.Key]
				if !ok {
					row = append(row, "-", "", "", "")
					continue
				}
				row = append(row, fmtNum(s.Median), "["+fmtNum(s.Min)+"-"+fmtNum(s.Max)+"]", fmtRatio(s.VsRaw), fmtRatio(s.VsYamux))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	for _, why := range reasons {
		fmt.Fprintf(w, "   n/a %s: %s\n", strings.Join(na[why], ", "), why)
	}
	for i, f := range failures {
		for j, l := range wrap(fmt.Sprintf("[%d] %s", i+1, f), textWidth-3) {
			if j > 0 {
				l = "    " + l
			}
			fmt.Fprintf(w, "   %s\n", l)
		}
	}
}

// writeVerdict prints the verdict table.
func writeVerdict(w io.Writer, rows []verdictRow) {
	if len(rows) == 0 {
		return
	}
	won, lost, overlap, un := verdictTally(rows)
	fmt.Fprintf(w, "\n== Verdict: braid won %d, lost %d (%d with the rounds overlapping the target), %d not measured\n", won, lost, overlap, un)
	fmt.Fprintf(w, "   rounds overlap: braid's best round meets the target against the other's worst; the medians miss, more rounds could tell.\n")
	fmt.Fprintf(w, "   xyamux, xtcp: braid's median / theirs, same run. source #12.3: issue 12, target 3; none: no issue names the workload,\n")
	fmt.Fprintf(w, "   so braid is held to yamux (within %.0f%% is a tie; issue targets are exact). best other: the best of %s.\n", 100*tieTolerance, strings.Join(bestOthers(), ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tbraid\txyamux\txtcp\ttarget [source]\tresult")
	for _, r := range rows {
		// The target and the result go on as many lines as they need, so
		// that a row with every condition missed stays within textWidth.
		target := wrapClauses(r.Target+" ["+r.Source+"]", verdictTargetWidth, ", ")
		result := wrapClauses(strings.ToUpper(string(r.Status))+": "+r.Detail, verdictResultWidth, "; ", ", ")
		for i := 0; i < max(len(target), len(result)); i++ {
			var t, res string
			if i < len(target) {
				t = target[i]
			}
			if i < len(result) {
				res = result[i]
			}
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Workload, r.Braid, fmtRatio(r.VsYamux), fmtRatio(r.VsRaw), t, res)
			} else {
				fmt.Fprintf(tw, "\t\t\t\t%s\t%s\n", t, res)
			}
		}
	}
	tw.Flush()
}

// The verdict's target and result columns wrap at these widths, in
// characters: the widest workload, braid and ratio columns take about 85
// of textWidth, and the longest target ("≤ 1x braid-nocoalesce [#12.1,
// hosts]") and result clause fit whole.
const (
	verdictTargetWidth = 36
	verdictResultWidth = 34
)

// wrapClauses packs the clauses of s, split after each of seps, into
// lines of at most n characters, breaking a longer clause between words.
func wrapClauses(s string, n int, seps ...string) []string {
	clauses := []string{s}
	for _, sep := range seps {
		var split []string
		for _, c := range clauses {
			split = append(split, strings.SplitAfter(c, sep)...)
		}
		clauses = split
	}
	var lines []string
	line := ""
	for _, c := range clauses {
		c = strings.TrimRight(c, " ")
		switch {
		case line == "":
			line = c
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(c) <= n:
			line += " " + c
		default:
			lines = append(lines, line)
			line = c
		}
		if parts := wrap(line, n); len(parts) > 1 {
			lines = append(lines, parts[:len(parts)-1]...)
			line = parts[len(parts)-1]
		}
	}
	return append(lines, line)
}

// betterArrow says which way is better.
func betterArrow(m metric) string {
	if m.Higher {
		return "(more=better)"
	}
	return "(less=better)"
}

// isPacketCell tells whether c belongs in the slowdown matrices.
func isPacketCell(c cellResult) bool {
	return slices.Contains(c.Groups, wSlowdown) || slices.Contains(c.Groups, wPackets)
}

// matrixKey identifies a column of the slowdown matrices.
type matrixKey struct {
	workload, link string
}

// writeMatrices prints the slowdown workloads as matrices: a table per
// workload and link, a row per contender, a column per GOMAXPROCS.
func writeMatrices(w io.Writer, rep *report) {
	var keys []matrixKey
	for _, c := range rep.Cells {
		if !isPacketCell(c) {
			continue
		}
		k := matrixKey{c.Workload, c.Params["link"]}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	fmt.Fprintf(w, "\n== Slowdown vs the network-bound limit (tcp: one raw conn over the same link, one write per message)\n")
	fmt.Fprintf(w, "   slowdown = T/T(tcp) - 1 per round, median [min-max]; xyamux = median T / yamux's median T; w/m = conn writes per message\n")
	for _, k := range keys {
		var cells []*cellResult
		for i := range rep.Cells {
			c := &rep.Cells[i]
			if isPacketCell(*c) && c.Workload == k.workload && c.Params["link"] == k.link {
				cells = append(cells, c)
			}
		}
		writeMatrix(w, k, cells)
	}
}

// writeMatrix prints one workload on one link.
func writeMatrix(w io.Writer, k matrixKey, cells []*cellResult) {
	fmt.Fprintf(w, "\n-- %s on %s: %s streams x %s msgs", k.workload, k.link, cells[0].Params["streams"], cells[0].Params["messages"])
	if cells[0].Side {
		fmt.Fprintf(w, " (contenders side by side: the link bounds the time)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"contender"}
	for _, c := range cells {
		p := c.Params["gomaxprocs"]
		head = append(head, "P"+p+" slowdown", "[min-max]", "xyamux", "w/m")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for i, r := range cells[0].Results {
		row := []string{r.Contender}
		for _, c := range cells {
			row = append(row, slowdownFigures(c, &c.Results[i])...)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
}

// slowdownFigures are the four columns of r in one matrix cell.
func slowdownFigures(c *cellResult, r *contenderResult) []string {
	switch {
	case r.Failed != "":
		return []string{"FAILED", "", "", ""}
	case !r.ok():
		return []string{"-", "", "", ""}
	}
	raw := c.result(rawName)
	s := r.Summary[mTime]
	out := []string{"-", "", fmtRatio(s.VsYamux), fmtNum(r.Summary[mWritesMsg].Median)}
	if raw == nil || !raw.ok() {
		return out
	}
	per := perRoundSlowdown(r, raw)
	if len(per) > 0 {
		out[0] = fmtPercent(median(per))
		out[1] = "[" + fmtPercent(per[0]) + ".." + fmtPercent(per[len(per)-1]) + "]"
	}
	return out
}

// perRoundSlowdown returns T/T(raw)-1 of each round both measured, sorted.
func perRoundSlowdown(r, raw *contenderResult) []float64 {
	var out []float64
	for i := 0; i < len(r.Samples) && i < len(raw.Samples); i++ {
		out = append(out, r.Samples[i][mTime]/raw.Samples[i][mTime]-1)
	}
	slices.Sort(out)
	return out
}

// writeNotifyRatios compares the 64 KiB and 256 KiB notification rates
// with the published ratio: each 64 KiB cell with the 256 KiB cell of the
// same count and transport, a line each, labelled with its transport.
func writeNotifyRatios(w io.Writer, rep *report) {
	var lines []string
	for _, c := range rep.Cells {
		if c.Workload != wNotify || c.Params["size"] != fmt.Sprint(notifySmall) {
			continue
		}
		var large *cellResult
		for i := range rep.Cells {
			l := &rep.Cells[i]
			if l.Workload == wNotify && l.Params["size"] == fmt.Sprint(notifyLarge) &&
				l.Params["count"] == c.Params["count"] && notifyTransport(l) == notifyTransport(&c) {
				large = l
			}
		}
		if large == nil {
			continue
		}
		parts := []string{}
		for i, r := range c.Results {
			lr := &large.Results[i]
			if !r.ok() || !lr.ok() {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.1f", r.Contender, r.Summary[mMsgps].Median/lr.Summary[mMsgps].Median))
		}
		lines = append(lines, fmt.Sprintf("   %s, %s messages: %s", notifyTransport(&c), c.Params["count"], strings.Join(parts, ", ")))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n== Notifications: rate at 64 KiB / rate at 256 KiB (published rust-libp2p: %.1fk/s / %.1fk/s = %.1f)\n",
		publishedNotify64K/1e3, publishedNotify256K/1e3, publishedNotify64K/publishedNotify256K)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// notifyTransport is the transport a notification cell ran over: its
// "transport" parameter, or TCP for results written before the TLS rows
// (which had no such parameter and ran over TCP only).
func notifyTransport(c *cellResult) string {
	if t := c.Params["transport"]; t != "" {
		return t
	}
	return tcpTransport().name()
}

// fmtNum formats a figure with about three significant digits.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "-"
	case a >= 1e7:
		return fmt.Sprintf("%.1fM", v/1e6)
	case a >= 1e5:
		return fmt.Sprintf("%.0fk", v/1e3)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// fmtRatio formats a ratio, "-" if there is none.
func fmtRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *r)
}

// fmtPercent formats a fraction as a signed percentage.
func fmtPercent(f float64) string {
	return fmt.Sprintf("%+.0f%%", 100*f)
}

// firstLine is the first line of s.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
