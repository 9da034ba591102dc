package main

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"
)

// writeHTML writes the report as one self-contained HTML file: inline CSS
// and SVG, no scripts, fonts or anything fetched over the network.
func writeHTML(w io.Writer, rep *report) error {
	var text bytes.Buffer
	writeText(&text, rep)
	order := make([]string, len(rep.Contenders))
	for i, e := range rep.Contenders {
		order[i] = e.Name
	}
	var sections []htmlSection
	for _, s := range buildSections(rep) {
		hs := htmlSection{Title: s.title, Note: s.note}
		for _, c := range s.charts {
			hs.Charts = append(hs.Charts, c.render(order))
		}
		sections = append(sections, hs)
	}
	var legend []htmlLegend
	for i, e := range rep.Contenders {
		legend = append(legend, htmlLegend{Name: e.Name, Desc: e.Desc, Color: template.CSS(seriesColor(i))})
	}
	return htmlPage().Execute(w, htmlData{
		Rep: rep, Date: rep.Machine.Date.Format(time.RFC1123), Took: rep.Duration.Round(time.Second).String(),
		Legend: legend, Sections: sections, Text: text.String(),
	})
}

type htmlData struct {
	Rep      *report
	Date     string
	Took     string
	Legend   []htmlLegend
	Sections []htmlSection
	Text     string
}

type htmlLegend struct {
	Name, Desc string
	Color      template.CSS
}

type htmlSection struct {
	Title, Note string
	Charts      []template.HTML
}

// section is a titled group of charts.
type section struct {
	title, note string
	charts      []chart
}

// buildSections makes the report's charts from the measured cells.
func buildSections(rep *report) []section {
	byWorkload := func(w string) []*cellResult {
		var out []*cellResult
		for i := range rep.Cells {
			if rep.Cells[i].Workload == w {
				out = append(out, &rep.Cells[i])
			}
		}
		return out
	}
	title := func(c *cellResult) string { return c.Title }
	var out []section
	add := func(s section) {
		var keep []chart
		for _, c := range s.charts {
			if len(c.Groups) > 0 {
				keep = append(keep, c)
			}
		}
		if len(keep) > 0 {
			s.charts = keep
			out = append(out, s)
		}
	}
	add(section{title: "Throughput over loopback TCP", charts: []chart{
		metricChart("Bulk, one stream", mMBps, byWorkload(wBulk), title),
		metricChart("Small messages, 100 streams", mMsgps, byWorkload(wSmall), title),
		metricChart("Conn writes per message (small messages)", mWritesMsg, byWorkload(wSmall), title),
	}})
	var rtt []chart
	for _, c := range byWorkload(wPing) {
		name := "Round trip, idle"
		if c.Params["neighbours"] != "0" {
			name = "Round trip beside " + c.Params["neighbours"] + " bulk streams"
		}
		ch := metricChart(name, mP50, nil, nil)
		ch.Unit = "µs"
		ch.Groups = append(cellGroups([]*cellResult{c}, mP50, func(*cellResult) string { return "p50" }),
			cellGroups([]*cellResult{c}, mP99, func(*cellResult) string { return "p99" })...)
		rtt = append(rtt, ch)
	}
	add(section{title: "Ping-pong round trip (RTT p50 / p99)", charts: rtt})
	add(section{title: "Memory per idle stream", charts: []chart{
		metricChart("Heap per idle stream", mHeap, byWorkload(wIdle), title)}})
	add(section{title: "Slowdown vs the network-bound limit, per GOMAXPROCS and link",
		note:   "slowdown = T/T(tcp) - 1 per round (median, whisker: min-max); tcp is one raw conn over the same simulated link, one write per message.",
		charts: slowdownCharts(rep)})
	lat := func(v string) func(*cellResult) bool {
		return func(c *cellResult) bool { return c.Params["latency"] == v }
	}
	chunks := byWorkload(wChunks)
	short := func(c *cellResult) string {
		return fmt.Sprintf("n=%s, %s, %s latency", c.Params["n"], c.Params["mode"], c.Params["latency"])
	}
	add(section{title: "Chunk delivery (Swarm pullsync)", charts: []chart{
		metricChart("Time per op, loopback", mTimeOp, filter(chunks, lat("0ms")), short),
		metricChart("Time per op, 200 ms one-way latency", mTimeOp, filter(chunks, lat(chunkLatency.String())), short),
		metricChart("Heap bytes per op, loopback", mBytesOp, filter(chunks, lat("0ms")), short),
		metricChart("Allocations per op, loopback", mAllocsOp, filter(chunks, lat("0ms")), short),
	}})
	notify := func(c *cellResult) string {
		return fmt.Sprintf("%s x %s KiB", c.Params["count"], strings.TrimSuffix(c.ID[len("notify/"):], "/"+c.Params["count"]))
	}
	add(section{title: "Notifications with backpressure (Polkadot)", charts: []chart{
		metricChart("Messages per second", mMsgps, byWorkload(wNotify), notify)}})
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

// metricChart charts metric key of cells, a group per cell.
func metricChart(title, key string, cells []*cellResult, label func(*cellResult) string) chart {
	c := chart{Title: title, Unit: key}
	if len(cells) > 0 {
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
		c.Groups = cellGroups(cells, key, label)
	}
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
		if isPacketCell(c) && !slices.Contains(keys, k) {
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
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table.meta td{padding:1px 12px 1px 0}.legend span{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}
.legend li{list-style:none;margin:2px 0}.legend{padding-left:0}
svg.chart{display:block;margin:1em 0;max-width:100%;height:auto}
svg .ct{font-weight:600;font-size:14px}svg .gl{font-size:12px;fill:#555;font-style:italic}
svg .sl{font-size:12px;text-anchor:end}svg .val{font-size:11px;fill:#333}svg .fail{font-size:11px;fill:#c00}
svg .range{stroke:#000;stroke-width:1;fill:none}svg .zero{stroke:#444;stroke-width:1;stroke-dasharray:3 2}
pre{font-size:11px;overflow-x:auto;background:#f7f7f7;padding:1em}.note{color:#555;font-size:.9em}
.warn{color:#c00;font-weight:600}
</style></head><body>
<h1>braidbench: braid vs the Go stream multiplexers</h1>
<table class="meta">
<tr><td>machine</td><td>{{.Rep.Machine.CPU}}, {{.Rep.Machine.Cores}} cores, {{.Rep.Machine.GOOS}}/{{.Rep.Machine.GOARCH}}</td></tr>
<tr><td>Go</td><td>{{.Rep.Machine.GoVersion}}, GOMAXPROCS {{.Rep.Machine.GOMAXPROCS}}</td></tr>
<tr><td>date</td><td>{{.Date}}</td></tr>
<tr><td>run</td><td>{{.Rep.Options.Rounds}} round(s), took {{.Took}}{{if .Rep.Options.Quick}} (-quick){{end}}{{if not .Rep.Complete}} <span class="warn">interrupted: partial results</span>{{end}}</td></tr>
</table>
<p class="note">Bars are the median of the rounds; whiskers span min to max. Contenders ran interleaved, round after round. Every sample is in results.json.</p>
<ul class="legend">{{range .Legend}}<li><span style="background:{{.Color}}"></span><b>{{.Name}}</b>: {{.Desc}}</li>{{end}}</ul>
{{range .Sections}}<h2>{{.Title}}</h2>{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
{{range .Charts}}{{.}}
{{end}}{{end}}
<h2>All figures</h2>
<pre>{{.Text}}</pre>
</body></html>
`
