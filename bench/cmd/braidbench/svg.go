package main

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Inline SVG bar charts for the HTML report: horizontal bars, one per
// contender, in groups (a workload variant, a GOMAXPROCS), with a whisker
// for the min-max range of the rounds, an axis with ticks and gridlines,
// and a value label right of each bar and its whisker.

// bar is one contender's figure in a chart.
type bar struct {
	Series   string // the contender
	Value    float64
	Min, Max float64
	Failed   string // why there is no figure, or ""
}

// barGroup is the bars of one group, labelled ("" for a chart's only
// group, which its title and subtitle already describe).
type barGroup struct {
	Label string
	Bars  []bar
}

// chart is a titled bar chart.
type chart struct {
	ID    string // the anchor the contents and the verdict link to
	Title string
	// Sub describes the workload in more words than Title; "" if Title
	// says it all.
	Sub    string
	Unit   string
	Groups []barGroup
	// Percent formats values as signed percentages (slowdown).
	Percent bool
	// Cells are the IDs of the cells charted.
	Cells []string
}

// Chart geometry, in SVG user units (pixels at 100 %).
const (
	chartWidth  = 900
	labelWidth  = 140 // series names, right-aligned left of the plot
	labelPad    = 6
	barHeight   = 12
	rowPitch    = 15 // a bar row: bar plus gap, room for an 11 px label
	groupGap    = 8
	titleH      = 22
	lineH       = 16 // a subtitle or group label line
	axisH       = 20 // tick labels under the plot
	valuePad    = 5  // between a whisker's end and its value label
	arrowW      = 6  // the mark of a clipped whisker
	minMargin   = 40 // least room right of the plot
	tinyBar     = 3  // bars narrower than this get a marker
	tinyMarkW   = 8  // the marker's width
	wrapChars   = 130
	failChars   = 110
	charWidth   = 6.6 // estimated width of a character at 11 px, generously
	targetTicks = 6
)

// Scale choices.
const (
	// logSpan: when the medians of a chart span this factor or more, the
	// axis is logarithmic, so small figures stay readable beside big ones.
	logSpan = 30
	// clipFactor: on a linear axis, whiskers reaching beyond this times
	// the largest median are clipped at the axis end, marked, and their
	// range printed in the value label.
	clipFactor = 1.6
)

// seriesColor returns a contender's colour, the same in every chart.
func seriesColor(i int) string {
	palette := []string{"#7f7f7f", "#d62728", "#ff9896", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"}
	return palette[i%len(palette)]
}

// axis maps values to x positions between left and right.
type axis struct {
	log         bool
	lo, hi      float64
	left, right float64
}

func (a axis) x(v float64) float64 {
	if a.log {
		v = math.Min(math.Max(v, a.lo), a.hi)
		return a.left + (math.Log10(v)-math.Log10(a.lo))/(math.Log10(a.hi)-math.Log10(a.lo))*(a.right-a.left)
	}
	v = math.Min(math.Max(v, a.lo), a.hi)
	return a.left + (v-a.lo)/(a.hi-a.lo)*(a.right-a.left)
}

// base is where bars start: zero, or the axis's low end on a log axis.
func (a axis) base() float64 {
	if a.log {
		return a.lo
	}
	return math.Min(math.Max(0, a.lo), a.hi)
}

// ticks are the axis's tick values.
func (a axis) ticks() []float64 {
	var out []float64
	if a.log {
		decades := math.Log10(a.hi / a.lo)
		for d := a.lo; d <= a.hi*1.0001; d *= 10 {
			out = append(out, d)
			if decades <= 2 {
				for _, m := range []float64{2, 5} {
					if d*m < a.hi {
						out = append(out, d*m)
					}
				}
			}
		}
		return out
	}
	step := niceStep((a.hi - a.lo) / targetTicks)
	for v := math.Ceil(a.lo/step-1e-9) * step; v <= a.hi+step*1e-9; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

// niceStep rounds a tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// makeAxis picks the scale and range of c's values.
func (c chart) makeAxis() axis {
	var meds []float64
	wlo, whi := math.Inf(1), math.Inf(-1)
	for _, g := range c.Groups {
		for _, b := range g.Bars {
			if b.Failed == "" {
				meds = append(meds, b.Value)
				wlo, whi = math.Min(wlo, math.Min(b.Min, b.Value)), math.Max(whi, math.Max(b.Max, b.Value))
			}
		}
	}
	if len(meds) == 0 {
		return axis{lo: 0, hi: 1}
	}
	mlo, mhi := meds[0], meds[0]
	for _, v := range meds {
		mlo, mhi = math.Min(mlo, v), math.Max(mhi, v)
	}
	if !c.Percent && mlo > 0 && mhi/mlo >= logSpan {
		lo := math.Pow(10, math.Floor(math.Log10(math.Min(mlo, math.Max(wlo, mlo/10)))))
		if mlo/lo < 2 {
			lo /= 10 // the smallest bar stays visible
		}
		hi := math.Pow(10, math.Ceil(math.Log10(whi)))
		return axis{log: true, lo: lo, hi: math.Max(hi, lo*10)}
	}
	lo, hi := math.Min(0, wlo), math.Max(0, whi)
	if mhi > 0 && hi > clipFactor*mhi {
		hi = clipFactor * mhi
	}
	if mlo < 0 && lo < clipFactor*mlo {
		lo = clipFactor * mlo
	}
	if hi == lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / targetTicks)
	return axis{lo: math.Floor(lo/step+1e-9) * step, hi: math.Ceil(hi/step-1e-9) * step}
}

// label is a bar's value label: the median, and the range when the
// whisker is clipped.
func (c chart) label(a axis, b bar) (string, bool) {
	clipped := !a.log && (b.Max > a.hi*1.0001 || b.Min < a.lo*1.0001 && b.Min < 0)
	s := c.format(b.Value)
	if clipped {
		s += " (range " + c.format(b.Min) + " to " + c.format(b.Max) + ")"
	}
	return s, clipped
}

// wrap splits s into lines of at most n characters (runes, not bytes: µ,
// ≤ and ✗ are one each) at spaces (breakAt).
func wrap(s string, n int) []string {
	var lines []string
	for utf8.RuneCountInString(s) > n {
		i := breakAt(s, n)
		lines = append(lines, s[:i])
		s = strings.TrimLeft(s[i:], " ")
	}
	return append(lines, s)
}

// breakAt is the byte index where a line of more than n characters
// breaks: the last space within its first n characters outside
// parentheses ("(rounds overlap)" stays whole), else the last space
// within them (a note that is all one parenthesis), else the n-th
// character.
func breakAt(s string, n int) int {
	end, outside, any, depth := len(s), 0, 0, 0
	for i, r := range s {
		if n == 0 {
			end = i
			break
		}
		n--
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case r == ' ' && i > 0:
			any = i
			if depth == 0 {
				outside = i
			}
		}
	}
	switch {
	case outside > 0:
		return outside
	case any > 0:
		return any
	}
	return end
}

// render draws c; order gives each series its colour.
func (c chart) render(order []string) template.HTML {
	a := c.makeAxis()
	// Room right of the plot for the longest value label.
	margin := float64(minMargin)
	for _, g := range c.Groups {
		for _, b := range g.Bars {
			if b.Failed == "" {
				s, _ := c.label(a, b)
				// Room for the label after a clipped whisker's arrow or a
				// tiny bar's mark, whichever it follows.
				w := float64(len([]rune(s)))*charWidth + valuePad + tinyMarkW + arrowW + 4
				margin = math.Max(margin, w)
			}
		}
	}
	a.left, a.right = labelWidth, chartWidth-margin
	title := c.Title + " (" + c.Unit
	if a.log {
		title += ", log scale"
	}
	title += ")"
	var sub []string
	if c.Sub != "" {
		sub = wrap(c.Sub, wrapChars)
	}
	top := titleH + len(sub)*lineH
	height := top
	for _, g := range c.Groups {
		if g.Label != "" {
			height += len(wrap(g.Label, wrapChars)) * lineH
		}
		height += len(g.Bars)*rowPitch + groupGap
	}
	plotBottom := height
	height += axisH

	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		html.EscapeString(c.ID), chartWidth, height, chartWidth, height, html.EscapeString(title))
	fmt.Fprintf(&sb, `<text x="2" y="16" class="ct">%s</text>`, html.EscapeString(title))
	for i, l := range sub {
		fmt.Fprintf(&sb, `<text x="2" y="%d" class="sub">%s</text>`, titleH+i*lineH+12, html.EscapeString(l))
	}
	// Gridlines and ticks first, so bars draw over them.
	for _, t := range a.ticks() {
		x := a.x(t)
		fmt.Fprintf(&sb, `<path class="grid" d="M%.1f %dV%d"/>`, x, top, plotBottom)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" class="tick">%s</text>`, x, plotBottom+14, c.tick(t))
	}
	fmt.Fprintf(&sb, `<path class="axis" d="M%.1f %dH%.1f"/>`, a.left, plotBottom, a.right)
	y := top
	for _, g := range c.Groups {
		if g.Label != "" {
			for _, l := range wrap(g.Label, wrapChars) {
				fmt.Fprintf(&sb, `<text x="2" y="%d" class="gl">%s</text>`, y+12, html.EscapeString(l))
				y += lineH
			}
		}
		for _, b := range g.Bars {
			c.renderBar(&sb, a, b, seriesColor(indexOf(order, b.Series)), y)
			y += rowPitch
		}
		y += groupGap
	}
	if !a.log && a.lo < 0 {
		fmt.Fprintf(&sb, `<path class="zero" d="M%.1f %dV%d"/>`, a.x(0), top, plotBottom)
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // built from escaped parts
}

// renderBar draws one bar row at y.
func (c chart) renderBar(sb *strings.Builder, a axis, b bar, color string, y int) {
	base := float64(y) + barHeight - 2 // text baseline in the row
	fmt.Fprintf(sb, `<text x="%d" y="%.0f" class="sl">%s</text>`, labelWidth-labelPad, base, html.EscapeString(b.Series))
	if b.Failed != "" {
		msg := b.Failed
		if len(msg) > failChars {
			msg = msg[:failChars] + "…"
		}
		fmt.Fprintf(sb, `<text x="%.1f" y="%.0f" class="fail">%s<title>%s</title></text>`, a.left+labelPad, base,
			html.EscapeString(msg), html.EscapeString(b.Failed))
		return
	}
	x0, x1 := a.x(a.base()), a.x(b.Value)
	if x1 < x0 {
		x0, x1 = x1, x0
	}
	w := math.Max(x1-x0, 1)
	fmt.Fprintf(sb, `<rect class="bar" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" data-series="%s" data-value="%g"><title>%s: %s</title></rect>`,
		x0, y, w, barHeight, color, html.EscapeString(b.Series), b.Value, html.EscapeString(b.Series), c.format(b.Value))
	end := math.Max(x1, x0+w)
	my := float64(y) + barHeight/2
	if x1-x0 < tinyBar {
		// A figure too small to see as a bar: a diamond at its end.
		fmt.Fprintf(sb, `<path class="tiny" fill="%s" d="M%.1f %.1fl4 -4.5l4 4.5l-4 4.5z"/>`, color, end, my)
		end += tinyMarkW
	}
	s, clipped := c.label(a, b)
	if b.Max > b.Min {
		lo, hi := a.x(b.Min), a.x(b.Max)
		fmt.Fprintf(sb, `<path class="range" d="M%.1f %.1fH%.1fM%.1f %.1fV%.1f"/>`, lo, my, hi, lo, my-4, my+4)
		if b.Max <= a.hi*1.0001 {
			fmt.Fprintf(sb, `<path class="range" d="M%.1f %.1fV%.1f"/>`, hi, my-4, my+4)
		} else {
			// Clipped: an arrowhead at the axis end.
			fmt.Fprintf(sb, `<path class="clip" d="M%.1f %.1fl%d 4l-%d 4z"/>`, hi, my-4, arrowW, arrowW)
			hi += arrowW
		}
		end = math.Max(end, hi)
	}
	cls := "val"
	if clipped {
		cls = "val clipped"
	}
	fmt.Fprintf(sb, `<text x="%.1f" y="%.0f" class="%s">%s</text>`, end+valuePad, base, cls, html.EscapeString(s))
}

// format formats a value of c.
func (c chart) format(v float64) string {
	if c.Percent {
		return fmtPercent(v)
	}
	return fmtNum(v)
}

// tick formats a tick value of c: as few digits as it needs.
func (c chart) tick(v float64) string {
	if math.Abs(v) < 1e-12 {
		if c.Percent {
			return "0%"
		}
		return "0"
	}
	if c.Percent {
		return strconv.FormatFloat(math.Round(v*1e4)/1e2, 'f', -1, 64) + "%"
	}
	trim := func(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trim(v/1e6) + "M"
	case a >= 1e3:
		return trim(v/1e3) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
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
