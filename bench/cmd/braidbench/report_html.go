package main

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// writeHTML writes the report as one self-contained HTML file: inline CSS
// and SVG, no scripts, fonts or anything fetched over the network. It
// opens with the verdict and a contents list; every section folds.
func writeHTML(w io.Writer, rep *report) error {
	var text bytes.Buffer
	writeText(&text, rep)
	order := make([]string, len(rep.Contenders))
	for i, e := range rep.Contenders {
		order[i] = e.Name
	}
	sections := buildSections(rep)
	anchors := map[string]string{} // cell ID -> the first chart showing it
	var hs []htmlSection
	for _, s := range sections {
		h := htmlSection{ID: s.id, Title: s.title, Note: s.note, Open: !s.folded}
		for _, c := range s.charts {
			h.Charts = append(h.Charts, c.render(order))
			h.ChartLinks = append(h.ChartLinks, htmlLink{ID: c.ID, Title: c.Title})
			for _, id := range c.Cells {
				if _, ok := anchors[id]; !ok {
					anchors[id] = c.ID
				}
			}
		}
		hs = append(hs, h)
	}
	rows := buildVerdict(rep)
	var vr []htmlVerdict
	for _, r := range rows {
		vr = append(vr, htmlVerdict{verdictRow: r, Anchor: anchors[r.CellID],
			YamuxText: fmtRatio(r.VsYamux), RawText: fmtRatio(r.VsRaw)})
	}
	won, lost, overlap, un := verdictTally(rows)
	var legend []htmlLegend
	for i, e := range rep.Contenders {
		legend = append(legend, htmlLegend{Name: e.Name, Desc: e.Desc, Color: template.CSS(seriesColor(i))})
	}
	return htmlPage().Execute(w, htmlData{
		Rep: rep, Date: rep.Machine.Date.Format(time.RFC1123), Took: rep.Duration.Round(time.Second).String(), Skew: skewLine(rep),
		Legend: legend, Sections: hs, Text: text.String(), TextFont: textFont(text.String()),
		Verdict: vr, Won: won, Lost: lost, Overlap: overlap, Unmeasured: un, Tie: fmt.Sprintf("%.0f %%", 100*tieTolerance),
		BestOthers: strings.Join(bestOthers(), ", "),
	})
}

// The text block is set in textFontMax px, or smaller where its longest
// line would not fit textRoom px: the room right of the body's left edge
// in a laptop's 1280 px window ((1280-960)/2 px of it lie left of the
// 960 px body), less a margin. A monospace character is about
// monoCharEm of the font wide (DejaVu Sans Mono and Liberation Mono:
// 0.60), and the block's padding is an em each side. A line is never set
// below textFontMin px; that takes more than 280 characters.
const (
	textFontMax = 10.0
	textFontMin = 6.0
	textRoom    = 1080.0
	monoCharEm  = 0.62
)

// textFont is the text block's font-size for text.
func textFont(text string) template.CSS {
	longest := 0
	for _, l := range strings.Split(text, "\n") {
		longest = max(longest, utf8.RuneCountInString(l))
	}
	size := min(textFontMax, max(textFontMin, textRoom/(monoCharEm*float64(longest)+2)))
	return template.CSS(fmt.Sprintf("%.1fpx", math.Floor(size*10)/10))
}

type htmlData struct {
	Rep                            *report
	Date                           string
	Took                           string
	Skew                           string // skewLine
	Legend                         []htmlLegend
	Sections                       []htmlSection
	Text                           string
	TextFont                       template.CSS // the text block's font-size
	Verdict                        []htmlVerdict
	Won, Lost, Overlap, Unmeasured int
	Tie, BestOthers                string
}

type htmlLegend struct {
	Name, Desc string
	Color      template.CSS
}

type htmlSection struct {
	ID, Title, Note string
	Open            bool
	Charts          []template.HTML
	ChartLinks      []htmlLink
}

type htmlLink struct{ ID, Title string }

type htmlVerdict struct {
	verdictRow
	Anchor             string // the chart of the row's cell, or ""
	YamuxText, RawText string
}

// section is a titled group of charts.
type section struct {
	id, title, note string
	folded          bool // closed when the page opens
	charts          []chart
}

// detail is what a cell's title says after its name (the part after the
// first ": "), for a chart whose title already names the workload.
func detail(c *cellResult) string {
	if _, after, ok := strings.Cut(c.Title, ": "); ok {
		return after
	}
	return c.Title
}

// buildSections makes the report's charts from the measured cells. A cell
// no section claims (a workload added later) still gets a chart, under
// "Other workloads".
func buildSections(rep *report) []section {
	claimed := map[string]bool{}
	byWorkload := func(w string) []*cellResult {
		var out []*cellResult
		for i := range rep.Cells {
			if rep.Cells[i].Workload == w {
				out = append(out, &rep.Cells[i])
			}
		}
		return out
	}
	var out []section
	add := func(s section) {
		var keep []chart
		for _, c := range s.charts {
			if len(c.Groups) > 0 {
				c.ID = fmt.Sprintf("chart-%s-%d", s.id, len(keep)+1)
				keep = append(keep, c)
				for _, id := range c.Cells {
					claimed[id] = true
				}
			}
		}
		if len(keep) > 0 {
			s.charts = keep
			out = append(out, s)
		}
	}
	var loop []chart
	for _, c := range byWorkload(wBulk) {
		loop = append(loop, metricChart(shortName(c), detail(c), mMBps, []*cellResult{c}, nil))
	}
	for _, c := range byWorkload(wSmall) {
		loop = append(loop,
			metricChart(shortName(c)+": rate", detail(c), mMsgps, []*cellResult{c}, nil),
			metricChart(shortName(c)+": conn writes per message", "the same runs", mWritesMsg, []*cellResult{c}, nil))
	}
	add(section{id: "throughput", title: "Throughput over loopback TCP and TLS 1.3", charts: loop})

	var rtt []chart
	for _, c := range append(append(byWorkload(wPing), byWorkload(wPingSpaced)...), byWorkload(wPingLink)...) {
		ch := metricChart(shortName(c), detail(c), mP50, nil, nil)
		ch.Unit = "µs, less is better"
		ch.Cells = []string{c.ID}
		ch.Groups = append(cellGroups([]*cellResult{c}, mP50, func(*cellResult) string { return "p50" }),
			cellGroups([]*cellResult{c}, mP99, func(*cellResult) string { return "p99" })...)
		rtt = append(rtt, ch)
	}
	add(section{id: "pingpong", title: "Ping-pong round trip (RTT p50 / p99)", charts: rtt})

	var rpc []chart
	for _, c := range byWorkload(wRPC) {
		rpc = append(rpc, metricChart(shortName(c), detail(c), mCallsps, []*cellResult{c}, nil))
	}
	add(section{id: "rpc", title: "Request-response, a new stream per call", charts: rpc})

	var idle []chart
	for _, c := range byWorkload(wIdle) {
		idle = append(idle, metricChart(shortName(c), detail(c), mHeap, []*cellResult{c}, nil))
	}
	add(section{id: "memory", title: "Memory", charts: idle})

	chunks := byWorkload(wChunks)
	lat := func(v string) func(*cellResult) bool {
		return func(c *cellResult) bool { return c.Params["latency"] == v }
	}
	short := func(c *cellResult) string { return fmt.Sprintf("n=%s, %s", c.Params["n"], c.Params["mode"]) }
	chunkSub := "Get/Offer/Want, then n chunks of 4 KiB, one message per chunk (single) or 25 per message (batched)"
	slow := fmt.Sprintf("%s; simulated link (%s)", chunkSub, describeLink(chunkLink()))
	add(section{id: "chunks", title: "Chunk delivery (Swarm pullsync)", charts: []chart{
		metricChart("Time per op, loopback", chunkSub+"; loopback TCP", mTimeOp, filter(chunks, lat("0ms")), short),
		metricChart("Time per op, 200 ms one way", slow, mTimeOp, filter(chunks, lat(chunkLatency.String())), short),
	}})

	// The TCP and the TLS cells share the chart: a group names its
	// transport.
	notifyWhere := func(c *cellResult) string { return notifyLabel(c) + whereSuffix(c, true) }
	add(section{id: "notify", title: "Notifications with backpressure (Polkadot)", charts: []chart{
		metricChart("Message rate", "count messages of 64 or 256 KiB written at once on one stream, loopback TCP or TLS 1.3 over it",
			mMsgps, byWorkload(wNotify), notifyWhere)}})

	hostChunks := byWorkload(wHostChunks)
	hostNotify := byWorkload(wHostNotify)
	hostNotifyWhere := func(c *cellResult) string { return notifyLabel(c) + ", " + c.Params["link"] }
	hostPingWhere := func(c *cellResult) string {
		if hostPingLoaded(c) {
			return c.Params["security"] + ", beside " + c.Params["neighbours"] + " bulk"
		}
		return c.Params["security"]
	}
	hostIdle := func(c *cellResult) bool { return !hostPingLoaded(c) }
	add(section{id: "hosts", title: "Between two go-libp2p hosts (TCP + noise or TLS): libp2pmux vs stock yamux",
		note: "The seed scenarios where their authors ran them, and a ping-pong: two real go-libp2p hosts in one process, braid's libp2pmux against go-libp2p's default yamux, over noise, and over TLS where the rows say so. tcp is a raw TCP connection with the same messages, no libp2p and no security.",
		charts: []chart{
			metricChart("Chunk delivery, time per op, loopback", chunkSub, mTimeOp, filter(hostChunks, lat("0ms")), short),
			metricChart("Chunk delivery, time per op, 200 ms one way", slow, mTimeOp, filter(hostChunks, lat(chunkLatency.String())), short),
			metricChart("Notifications, message rate", "count messages written at once on one stream", mMsgps, hostNotify, hostNotifyWhere),
			metricChart("Ping-pong, p50", "64 B round trips on one stream, by security", mP50, filter(byWorkload(wHostPing), hostIdle), hostPingWhere),
			metricChart("Ping-pong beside bulk streams, p50", "64 B round trips on one stream while bulk streams write on the same connection", mP50, filter(byWorkload(wHostPing), hostPingLoaded), hostPingWhere),
			metricChart("Bulk throughput beside the ping", "what the bulk streams wrote meanwhile", mBulkMBps, filter(byWorkload(wHostPing), hostPingLoaded), hostPingWhere),
		}})

	bulkWhere := func(c *cellResult) string {
		if isTLS(c) {
			return "TLS" + whereSuffix(c, false)
		}
		return "TCP" + whereSuffix(c, false)
	}
	add(section{id: "allocs", title: "Allocations per bulk write and per chunk-delivery op", folded: true, charts: []chart{
		metricChart("Allocations per 64 KiB write+read, one-stream bulk", "both ends; over TLS crypto/tls allocates too",
			mAllocsOp, byWorkload(wBulk), bulkWhere),
		metricChart("Heap bytes per op, loopback", "both peers, as go test -benchmem counts", mBytesOp, filter(chunks, lat("0ms")), short),
		metricChart("Allocations per op, loopback", "both peers", mAllocsOp, filter(chunks, lat("0ms")), short),
		metricChart("Heap bytes per op between two go-libp2p hosts, loopback", "the hostbench process: both hosts", mBytesOp, filter(hostChunks, lat("0ms")), short),
		metricChart("Allocations per op between two go-libp2p hosts, loopback", "the hostbench process: both hosts", mAllocsOp, filter(hostChunks, lat("0ms")), short),
	}})

	add(section{id: "slowdown", title: "Slowdown vs the network-bound limit, per GOMAXPROCS and link", folded: true,
		note:   "slowdown = T/T(tcp) - 1 per round (median, whisker: min-max); tcp is one raw conn over the same simulated link, one write per message.",
		charts: slowdownCharts(rep)})

	var other []chart
	for i := range rep.Cells {
		c := &rep.Cells[i]
		if claimed[c.ID] || isPacketCell(*c) || len(c.Metrics) == 0 {
			continue
		}
		for _, m := range c.Metrics {
			other = append(other, metricChart(shortName(c)+": "+m.Key, detail(c), m.Key, []*cellResult{c}, nil))
		}
	}
	add(section{id: "other", title: "Other workloads", charts: other})
	return out
}

// filter keeps the cells keep accepts.
func filter(cells []*cellResult, keep func(*cellResult) bool) []*cellResult {
	var out []*cellResult
	for _, c := range cells {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// metricChart charts metric key of cells, a group per cell labelled by
// label; a chart of one cell has one unlabelled group.
func metricChart(title, sub, key string, cells []*cellResult, label func(*cellResult) string) chart {
	c := chart{Title: title, Sub: sub, Unit: key}
	if len(cells) == 0 {
		return c
	}
	for _, m := range cells[0].Metrics {
		if m.Key == key {
			c.Unit = m.Unit
			if m.Higher {
				c.Unit += ", more is better"
			} else {
				c.Unit += ", less is better"
			}
		}
	}
	if len(cells) == 1 || label == nil {
		label = func(*cellResult) string { return "" }
	}
	for _, cell := range cells {
		c.Cells = append(c.Cells, cell.ID)
	}
	c.Groups = cellGroups(cells, key, label)
	return c
}

// cellGroups makes a group of bars per cell.
func cellGroups(cells []*cellResult, key string, label func(*cellResult) string) []barGroup {
	var groups []barGroup
	for _, c := range cells {
		g := barGroup{Label: label(c)}
		for _, r := range c.Results {
			if r.NotApplicable != "" {
				continue
			}
			b := bar{Series: r.Contender}
			s, ok := r.Summary[key]
			switch {
			case r.Failed != "":
				b.Failed = "failed: " + firstLine(r.Failed)
			case !ok:
				b.Failed = "not measured"
			default:
				b.Value, b.Min, b.Max = s.Median, s.Min, s.Max
			}
			g.Bars = append(g.Bars, b)
		}
		groups = append(groups, g)
	}
	return groups
}

// slowdownCharts makes a chart per packet workload and link, a group per
// GOMAXPROCS.
func slowdownCharts(rep *report) []chart {
	var keys []matrixKey
	for _, c := range rep.Cells {
		k := matrixKey{c.Workload, c.Params["link"]}
		if isPacketCell(c) && !containsKey(keys, k) {
			keys = append(keys, k)
		}
	}
	var out []chart
	for _, k := range keys {
		ch := chart{Title: k.workload + " on " + k.link, Unit: "slowdown, less is better", Percent: true}
		for i := range rep.Cells {
			c := &rep.Cells[i]
			if !isPacketCell(*c) || c.Workload != k.workload || c.Params["link"] != k.link {
				continue
			}
			if ch.Sub == "" {
				if _, after, ok := strings.Cut(c.Title, " on "+k.link+" "); ok {
					ch.Sub, _, _ = strings.Cut(after, ", GOMAXPROCS")
					ch.Sub = strings.Trim(ch.Sub, "()")
				}
			}
			ch.Cells = append(ch.Cells, c.ID)
			g := barGroup{Label: "GOMAXPROCS " + c.Params["gomaxprocs"] + " · " + c.Params["streams"] + " streams x " + c.Params["messages"] + " msgs"}
			raw := c.result(rawName)
			for j := range c.Results {
				r := &c.Results[j]
				if r.Contender == rawName {
					continue
				}
				b := bar{Series: r.Contender}
				switch {
				case r.Failed != "":
					b.Failed = "failed: " + firstLine(r.Failed)
				case !r.ok() || raw == nil || !raw.ok():
					b.Failed = "not measured"
				default:
					per := perRoundSlowdown(r, raw)
					b.Value, b.Min, b.Max = median(per), per[0], per[len(per)-1]
				}
				g.Bars = append(g.Bars, b)
			}
			ch.Groups = append(ch.Groups, g)
		}
		out = append(out, ch)
	}
	return out
}

func containsKey(keys []matrixKey, k matrixKey) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// htmlPage parses the report's page.
func htmlPage() *template.Template {
	return template.Must(template.New("report").Parse(htmlSource))
}

// htmlSource is the report's page template.
const htmlSource = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>braidbench report</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:960px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin:0;display:inline}
section{margin-top:1.6em;border-top:1px solid #ddd;padding-top:.4em}
summary{cursor:pointer;padding:.2em 0}summary::marker{color:#888}
table.meta td{padding:1px 12px 1px 0}.legend span{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}
.legend li{list-style:none;margin:2px 0}.legend{padding-left:0;columns:2;font-size:.9em}
nav{margin-top:1.2em}nav ol{margin:.3em 0;padding-left:1.4em;font-size:.95em}nav ol ol{font-size:.9em;columns:2}
table.verdict{border-collapse:collapse;font-size:12.5px;margin:.6em 0;width:100%}
table.verdict th,table.verdict td{border-bottom:1px solid #e4e4e4;padding:3px 6px;text-align:left;vertical-align:top}
table.verdict th{background:#f3f3f3;font-weight:600}table.verdict td.num{text-align:right;white-space:nowrap}
tr.won td.res{color:#16702b;font-weight:600}tr.lost td.res{color:#b00;font-weight:600}tr.unmeasured td.res{color:#777}
td small{font-weight:400;color:#555;display:block}table.verdict td:first-child{min-width:14em}
.tally{font-size:1.05em}.tally b.won{color:#16702b}.tally b.lost{color:#b00}
svg.chart{display:block;margin:1em 0;max-width:100%;height:auto}
svg .ct{font-weight:600;font-size:14px}svg .sub,svg .gl{font-size:12px;fill:#555;font-style:italic}
svg .sl{font-size:11px;text-anchor:end}svg .val{font-size:11px;fill:#333}svg .fail{font-size:11px;fill:#c00}
svg .tick{font-size:10px;fill:#666;text-anchor:middle}svg .grid{stroke:#e6e6e6;stroke-width:1}svg .axis{stroke:#999;stroke-width:1}
svg .range{stroke:#000;stroke-width:1;fill:none}svg .clip{fill:#000}svg .zero{stroke:#444;stroke-width:1;stroke-dasharray:3 2}
svg .tiny{stroke:#000;stroke-width:.5}
pre.text{font-size:10px;background:#f7f7f7;padding:1em;width:max-content;min-width:calc(100% - 2em);overflow:visible;white-space:pre}
.note{color:#555;font-size:.9em}.warn{color:#c00;font-weight:600}
</style></head><body>
<h1>braidbench: braid vs the Go stream multiplexers</h1>
<table class="meta">
<tr><td>machine</td><td>{{.Rep.Machine.CPU}}, {{.Rep.Machine.Cores}} cores, {{.Rep.Machine.GOOS}}/{{.Rep.Machine.GOARCH}}</td></tr>
<tr><td>Go</td><td>{{.Rep.Machine.GoVersion}}, GOMAXPROCS {{.Rep.Machine.GOMAXPROCS}}</td></tr>
<tr><td>date</td><td>{{.Date}}</td></tr>
<tr><td>run</td><td>{{.Rep.Options.Rounds}} round(s), took {{.Took}}{{if .Rep.Options.Quick}} (-quick){{end}}{{if not .Rep.Complete}} <span class="warn">interrupted: partial results</span>{{end}}</td></tr>
{{if .Skew}}<tr><td>vCPUs</td><td>{{.Skew}}</td></tr>{{end}}
</table>
<section id="verdict"><details open><summary><h2>Verdict</h2></summary>
<p class="tally">braid met <b class="won">{{.Won}}</b> targets and missed <b class="lost">{{.Lost}}</b>{{if .Overlap}} ({{.Overlap}} of them with braid's best round meeting the target against the other's worst: the medians miss, more rounds could tell){{end}}{{if .Unmeasured}}; {{.Unmeasured}} not measured{{end}}.</p>
<p class="note">Ratios are braid's median over the other's median from this run (for times, less than 1 is faster; for rates, more than 1). Targets are issue #12's (the writer under load) and #15's (flow control and memory): #12.3 is issue 12, target 3; "best other" is the best of {{.BestOthers}}. A workload no issue names (source "none") is held to go-yamux, and within {{.Tie}} of that bound is a tie; an issue's target is judged exactly.{{if .Rep.Options.Quick}} A -quick run has smaller workloads than the issues' targets assume.{{end}}</p>
<table class="verdict" id="verdict-table">
<thead><tr><th>workload</th><th>braid</th><th>braid / go-yamux</th><th>braid / raw</th><th>target</th><th>result</th></tr></thead>
<tbody>{{range .Verdict}}<tr class="{{if eq .Status "not measured"}}unmeasured{{else}}{{.Status}}{{end}}" data-status="{{.Status}}" data-cell="{{.CellID}}">
<td>{{if .Anchor}}<a href="#{{.Anchor}}">{{.Workload}}</a>{{else}}{{.Workload}}{{end}}</td><td class="num">{{.Braid}}</td><td class="num">{{.YamuxText}}</td><td class="num">{{.RawText}}</td><td>{{.Target}}<small>{{.Source}}</small></td><td class="res">{{.Status}}<small>{{.Detail}}</small></td></tr>
{{end}}</tbody></table>
</details></section>
<nav id="contents"><b>Contents</b><ol>
<li><a href="#contenders">Contenders</a></li>
{{range .Sections}}<li><a href="#{{.ID}}">{{.Title}}</a><ol>{{range .ChartLinks}}<li><a href="#{{.ID}}">{{.Title}}</a></li>{{end}}</ol></li>
{{end}}<li><a href="#figures">All figures (text)</a></li>
</ol></nav>
<section id="contenders"><details open><summary><h2>Contenders</h2></summary>
<p class="note">Bars are the median of the rounds; whiskers span min to max (an arrowhead marks a whisker clipped at the axis end, its range printed beside the bar). Contenders ran interleaved, round after round. Every sample is in results.json.</p>
<ul class="legend">{{range .Legend}}<li><span style="background:{{.Color}}"></span><b>{{.Name}}</b>: {{.Desc}}</li>{{end}}</ul>
</details></section>
{{range .Sections}}<section id="{{.ID}}"><details{{if .Open}} open{{end}}><summary><h2>{{.Title}}</h2></summary>{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
{{range .Charts}}{{.}}
{{end}}</details></section>
{{end}}<section id="figures"><details><summary><h2>All figures (text)</h2></summary>
<pre class="text" style="font-size:{{.TextFont}}">{{.Text}}</pre>
</details></section>
</body></html>
`
