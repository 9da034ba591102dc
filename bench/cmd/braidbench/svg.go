package main

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
)

// Inline SVG bar charts for the HTML report: horizontal bars, one per
// contender, in groups (a workload variant, a GOMAXPROCS), with a whisker
// for the min-max range of the rounds.

// bar is one contender's figure in a chart.
type bar struct {
	Series   string // the contender
	Value    float64
	Min, Max float64
	Failed   string // why there is no figure, or ""
}

// barGroup is the bars of one group, labelled.
type barGroup struct {
	Label string
	Bars  []bar
}

// chart is a titled bar chart.
type chart struct {
	Title  string
	Unit   string
	Groups []barGroup
	// Percent formats values as signed percentages (slowdown).
	Percent bool
}

// Chart geometry, in SVG user units (pixels at 100 %).
const (
	chartWidth  = 900
	labelWidth  = 150
	valueMargin = 90 // room right of the longest bar for its figure
	barHeight   = 14
	barGap      = 3
	groupGap    = 12
	titleHeight = 28
	groupLabelH = 16
	axisPad     = 8
)

// seriesColor returns a contender's colour, the same in every chart.
func seriesColor(i int) string {
	palette := []string{"#7f7f7f", "#d62728", "#ff9896", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"}
	return palette[i%len(palette)]
}

// render draws c; order gives each series its colour.
func (c chart) render(order []string) template.HTML {
	lo, hi := 0.0, 0.0
	for _, g := range c.Groups {
		for _, b := range g.Bars {
			if b.Failed != "" {
				continue
			}
			lo = math.Min(lo, math.Min(b.Min, b.Value))
			hi = math.Max(hi, math.Max(b.Max, b.Value))
		}
	}
	if hi == lo {
		hi = lo + 1
	}
	plot := float64(chartWidth - labelWidth - valueMargin)
	x := func(v float64) float64 { return labelWidth + (v-lo)/(hi-lo)*plot }
	height := titleHeight
	for _, g := range c.Groups {
		height += groupLabelH + len(g.Bars)*(barHeight+barGap) + groupGap
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		chartWidth, height, chartWidth, height, html.EscapeString(c.Title))
	fmt.Fprintf(&sb, `<text x="0" y="18" class="ct">%s</text>`, html.EscapeString(c.Title+" ("+c.Unit+")"))
	y := titleHeight
	zero := x(0)
	for _, g := range c.Groups {
		fmt.Fprintf(&sb, `<text x="0" y="%d" class="gl">%s</text>`, y+12, html.EscapeString(g.Label))
		y += groupLabelH
		for _, b := range g.Bars {
			color := seriesColor(indexOf(order, b.Series))
			fmt.Fprintf(&sb, `<text x="%d" y="%d" class="sl">%s</text>`, labelWidth-axisPad, y+barHeight-3, html.EscapeString(b.Series))
			if b.Failed != "" {
				fmt.Fprintf(&sb, `<text x="%.1f" y="%d" class="fail">%s</text>`, zero+axisPad, y+barHeight-3, html.EscapeString(b.Failed))
				y += barHeight + barGap
				continue
			}
			x0, x1 := zero, x(b.Value)
			if x1 < x0 {
				x0, x1 = x1, x0
			}
			fmt.Fprintf(&sb, `<rect class="bar" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" data-series="%s" data-value="%g"><title>%s: %s</title></rect>`,
				x0, y, math.Max(x1-x0, 1), barHeight, color, html.EscapeString(b.Series), b.Value,
				html.EscapeString(b.Series), c.format(b.Value))
			if b.Max > b.Min {
				my := float64(y) + barHeight/2
				fmt.Fprintf(&sb, `<path class="range" d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f"/>`,
					x(b.Min), my, x(b.Max), x(b.Min), my-4, my+4, x(b.Max), my-4, my+4)
			}
			fmt.Fprintf(&sb, `<text x="%.1f" y="%d" class="val">%s</text>`, math.Max(x1, x(b.Max))+4, y+barHeight-3, c.format(b.Value))
			y += barHeight + barGap
		}
		y += groupGap
	}
	if lo < 0 {
		fmt.Fprintf(&sb, `<path class="zero" d="M%.1f %dV%d"/>`, zero, titleHeight, height)
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // built from escaped parts
}

// format formats a value of c.
func (c chart) format(v float64) string {
	if c.Percent {
		return fmtPercent(v)
	}
	return fmtNum(v)
}

// indexOf returns the index of s in list, or len(list).
func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return len(list)
}
