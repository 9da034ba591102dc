package main

import (
	"encoding/json"
	"html"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The layout check: a copy of report.html with checkScript appended runs
// in headless Chromium; the script measures the page from the DOM
// (bounding boxes of every label, the verdict table, the page height)
// and writes its findings as JSON into an element that --dump-dom then
// prints. No dependency beyond the browser.

// layout is what checkScript reports.
type layout struct {
	// Page heights in CSS pixels: as the page opens (some sections
	// folded) and with every section open.
	HeightDefault int `json:"height_default"`
	HeightOpen    int `json:"height_open"`
	// Charts and the labels (SVG text) in them.
	Charts int `json:"charts"`
	Labels int `json:"labels"`
	// Overlaps lists pairs of labels whose boxes intersect, and value
	// labels that intersect a bar, whisker or mark.
	Overlaps []string `json:"overlaps"`
	// Outside lists labels that reach beyond their chart's box.
	Outside []string `json:"outside"`
	// The verdict: its table exists and comes before the first chart.
	VerdictRows     int      `json:"verdict_rows"`
	VerdictStatuses []string `json:"verdict_statuses"`
	VerdictFirst    bool     `json:"verdict_first"`
	// TextClipped is true when the text block's content is wider than
	// the block (scrolled or cut off).
	TextClipped bool `json:"text_clipped"`
	// PageWider is true when the page, every section open, is wider than
	// the window.
	PageWider bool `json:"page_wider"`
	// BrokenLinks lists in-page links whose target does not exist.
	BrokenLinks []string `json:"broken_links"`
}

// checkID is the element the script writes into.
const checkID = "braidbench-layout-check"

// checkScript measures the page. Labels are SVG text elements; boxes
// closer than a twentieth of a pixel don't count as touching.
const checkScript = `<script>
(function () {
  var out = {overlaps: [], outside: [], broken_links: [], verdict_statuses: []};
  out.height_default = document.documentElement.scrollHeight;
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  out.height_open = document.documentElement.scrollHeight;
  var eps = 0.05;
  function hit(a, b) {
    return a.left < b.right - eps && b.left < a.right - eps && a.top < b.bottom - eps && b.top < a.bottom - eps;
  }
  function name(e) { return '"' + e.textContent.trim().slice(0, 60) + '"'; }
  var charts = document.querySelectorAll("svg.chart");
  out.charts = charts.length;
  out.labels = 0;
  charts.forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    var texts = Array.prototype.map.call(svg.querySelectorAll("text"), function (t) { return {e: t, r: t.getBoundingClientRect()}; });
    out.labels += texts.length;
    for (var i = 0; i < texts.length; i++) {
      for (var j = i + 1; j < texts.length; j++) {
        if (hit(texts[i].r, texts[j].r)) { out.overlaps.push(svg.id + ": " + name(texts[i].e) + " and " + name(texts[j].e)); }
      }
      var r = texts[i].r;
      if (r.left < box.left - eps || r.right > box.right + eps || r.top < box.top - eps || r.bottom > box.bottom + eps) {
        out.outside.push(svg.id + ": " + name(texts[i].e));
      }
    }
    var marks = svg.querySelectorAll("rect.bar, path.range, path.clip, path.tiny");
    texts.forEach(function (t) {
      if (!t.e.classList.contains("val")) { return; }
      marks.forEach(function (m) {
        if (hit(t.r, m.getBoundingClientRect())) { out.overlaps.push(svg.id + ": value " + name(t.e) + " and a " + m.getAttribute("class") + " mark"); }
      });
    });
  });
  var table = document.getElementById("verdict-table");
  if (table) {
    var rows = table.querySelectorAll("tbody tr");
    out.verdict_rows = rows.length;
    rows.forEach(function (tr) { out.verdict_statuses.push(tr.getAttribute("data-status")); });
    out.verdict_first = charts.length > 0 && !!(table.compareDocumentPosition(charts[0]) & Node.DOCUMENT_POSITION_FOLLOWING);
  }
  out.page_wider = document.documentElement.scrollWidth > window.innerWidth;
  var pre = document.querySelector("pre.text");
  out.text_clipped = !pre || pre.scrollWidth > pre.clientWidth + 1;
  document.querySelectorAll('a[href^="#"]').forEach(function (a) {
    if (!document.getElementById(a.getAttribute("href").slice(1))) { out.broken_links.push(a.getAttribute("href")); }
  });
  var p = document.createElement("pre");
  p.id = "` + checkID + `";
  p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
})();
</script>`

// withCheck writes a copy of report with checkScript into dir.
func withCheck(t *testing.T, report, dir string) string {
	t.Helper()
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Replace(string(b), "</body>", checkScript+"</body>", 1)
	if page == string(b) {
		t.Fatal("report has no </body>")
	}
	out := filepath.Join(dir, "check.html")
	if err := os.WriteFile(out, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseLayout finds checkScript's result in a dumped DOM.
func parseLayout(t *testing.T, dom string) layout {
	t.Helper()
	m := regexp.MustCompile(`(?s)<pre id="` + checkID + `">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the layout check wrote no result into the DOM")
	}
	var l layout
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &l); err != nil {
		t.Fatalf("layout check result: %v\n%s", err, m[1])
	}
	return l
}

// checkLayout checks the page's layout and its verdict against rep.
func checkLayout(t *testing.T, l layout, rep *report) {
	t.Helper()
	t.Logf("page height %d px as it opens, %d px with every section open; %d charts, %d labels",
		l.HeightDefault, l.HeightOpen, l.Charts, l.Labels)
	if l.Labels == 0 {
		t.Error("no chart labels in the DOM")
	}
	for _, o := range l.Overlaps {
		t.Errorf("labels overlap: %s", o)
	}
	for _, o := range l.Outside {
		t.Errorf("label outside its chart: %s", o)
	}
	for _, b := range l.BrokenLinks {
		t.Errorf("in-page link to a missing anchor: %s", b)
	}
	if l.TextClipped {
		t.Error("the text block is clipped: its content is wider than the block")
	}
	if l.PageWider {
		t.Errorf("with every section open the page is wider than the %s window", browserWindow)
	}
	want := buildVerdict(rep)
	if l.VerdictRows != len(want) || len(want) == 0 {
		t.Errorf("verdict table has %d rows, want %d (one per workload target)", l.VerdictRows, len(want))
	}
	for i, s := range l.VerdictStatuses {
		if i < len(want) && s != string(want[i].Status) {
			t.Errorf("verdict row %d (%s): status %q, want %q", i, want[i].Workload, s, want[i].Status)
		}
	}
	if !l.VerdictFirst {
		t.Error("the verdict table does not come before the first chart")
	}
}

// TestLayoutExtremes renders a report whose figures are chosen to break a
// layout: values five decades apart in one chart, whiskers from half to
// fifty times the median, tiny values, negative slowdowns, failures with
// long messages; and checks it in the browser as TestQuickRun checks a
// real run. The cells are the quick plan's; only the samples are made up.
func TestLayoutExtremes(t *testing.T) {
	opts := testOptions(t)
	rep := &report{Machine: readMachine(), Options: opts, Started: time.Now(), Complete: true, Contenders: selectEntries(nil)}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, c := range buildCells(opts) {
		cr := cellResult{cell: c}
		for j, e := range rep.Contenders {
			r := contenderResult{Contender: e.Name}
			if c.na != nil {
				r.NotApplicable = c.na(e)
			}
			switch {
			case r.NotApplicable != "":
			case (i+j)%13 == 5 && !e.raw:
				// Not tcp: without the limit a slowdown chart has no bars
				// at all, and the test wants data in every chart.
				r.Failed = "timed out after 20s: " + strings.Repeat("a long reason that goes on ", 8)
			default:
				scale := math.Pow(10, rng.Float64()*5-3)
				spread := []float64{1.01, 2, 50}[rng.IntN(3)]
				for _, f := range []float64{0.5, 1, spread} {
					s := sample{}
					for _, m := range c.Metrics {
						s[m.Key] = scale * f * (0.9 + 0.2*rng.Float64())
					}
					r.Samples = append(r.Samples, s)
				}
			}
			cr.Results = append(cr.Results, r)
		}
		rep.Cells = append(rep.Cells, cr)
	}
	summarize(rep)
	dir := t.TempDir()
	if err := writeFiles(dir, rep); err != nil {
		t.Fatal(err)
	}
	checkInBrowser(t, filepath.Join(dir, reportFile), rep)
}
