package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/internal/skip"
	"github.com/libp2p/go-libp2p-testing/race"
)

// testOptions is -quick made smaller still, so that the test stays well
// under 40 s; under the race detector (everything 5-20x slower) the
// workloads shrink again and only one link and GOMAXPROCS value run.
func testOptions(t *testing.T) options {
	opts := options{Quick: true, Out: t.TempDir(), Rounds: 1, Timeout: 30 * time.Second,
		Links: []string{"LAN", "Mobile"}, CPUs: []int{1, 2}, Plan: quickPlan()}
	p := &opts.Plan
	p.BulkBytes = 8 << 20
	p.SmallPerStream = 20
	p.PingCount = 100
	p.PingMax = 100 * time.Millisecond
	p.IdleStreams = 2000
	p.LinkWork = 20 * time.Millisecond
	p.SlowLinkWork = 100 * time.Millisecond
	p.ChunkOps = 2
	p.Notify = []slowdown.NotifyRun{{Count: 20, Size: notifySmall}}
	if race.WithRace() {
		opts.Links, opts.CPUs = []string{"LAN"}, []int{2}
		p.BulkBytes = 2 << 20
		p.SmallPerStream = 5
		p.PingCount = 20
		p.PingNeighbours = 2
		p.IdleStreams = 300
		p.ChunkCounts = []int{25}
		p.Notify = []slowdown.NotifyRun{{Count: 5, Size: notifySmall}}
	}
	return opts
}

// TestQuickRun runs the tool in-process and checks results.json: every
// contender present, every figure positive; then the HTML report in a
// browser.
func TestQuickRun(t *testing.T) {
	opts := testOptions(t)
	var logs bytes.Buffer
	rep, err := run(context.Background(), opts, newProgress(&logs, false))
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	writeText(&text, rep)
	if err := writeFiles(opts.Out, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("took %v", rep.Duration)
	// The text report after the subtests and only when one failed: their
	// messages come first in the output, where a CI log's excerpt shows
	// them (session 16's CI excerpt showed this report and cut the
	// failure off).
	defer func() {
		if t.Failed() {
			t.Logf("the report:\n%s", text.String())
		}
	}()

	t.Run("json", func(t *testing.T) {
		js, err := os.ReadFile(filepath.Join(opts.Out, resultsFile))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Machine    machine `json:"machine"`
			Contenders []struct {
				Name string `json:"name"`
			} `json:"contenders"`
			Cells []struct {
				ID      string    `json:"id"`
				Skew    []float64 `json:"vcpu_skew"`
				Results []struct {
					Contender     string               `json:"contender"`
					Samples       []map[string]float64 `json:"samples"`
					Failed        string               `json:"failed"`
					NotApplicable string               `json:"not_applicable"`
				} `json:"results"`
			} `json:"cells"`
		}
		if err := json.Unmarshal(js, &got); err != nil {
			t.Fatal(err)
		}
		if got.Machine.Cores <= 0 || got.Machine.GoVersion == "" {
			t.Errorf("machine info missing: %+v", got.Machine)
		}
		want := contenderNames()
		if len(got.Contenders) != len(want) {
			t.Fatalf("contenders %v, want %v", got.Contenders, want)
		}
		seen := map[string]int{}
		for _, c := range got.Cells {
			if len(c.Skew) != opts.Rounds {
				t.Errorf("%s: %d vCPU samples, want one a round (%d)", c.ID, len(c.Skew), opts.Rounds)
			}
			if len(c.Results) != len(want) {
				t.Errorf("%s: %d results, want %d", c.ID, len(c.Results), len(want))
			}
			for _, r := range c.Results {
				if r.NotApplicable != "" {
					continue
				}
				if r.Failed != "" {
					t.Errorf("%s: %s failed: %s", c.ID, r.Contender, r.Failed)
					continue
				}
				if len(r.Samples) == 0 {
					t.Errorf("%s: %s has no sample", c.ID, r.Contender)
				}
				for _, s := range r.Samples {
					for k, v := range s {
						if !(v > 0) {
							t.Errorf("%s: %s: %s = %v, want > 0", c.ID, r.Contender, k, v)
						}
					}
				}
				seen[r.Contender]++
			}
		}
		for _, name := range want {
			if seen[name] == 0 {
				t.Errorf("contender %s measured nowhere", name)
			}
		}
	})

	t.Run("browser", func(t *testing.T) {
		checkInBrowser(t, filepath.Join(opts.Out, reportFile), rep)
	})
}

// expectedCharts counts the charts the report should hold.
func expectedCharts(rep *report) int {
	n := 0
	for _, s := range buildSections(rep) {
		n += len(s.charts)
	}
	return n
}

// chromiumNames are the names a headless Chromium goes by.
func chromiumNames() []string { return []string{"chromium", "chromium-browser", "google-chrome"} }

// minScreenshot is the least size of a PNG screenshot with charts on it;
// a blank page is a few kilobytes.
const minScreenshot = 20 << 10

// checkInBrowser renders report in headless Chromium and checks that the
// DOM holds rep's charts with data marks, the layout (no two labels
// overlap, the verdict table comes first and matches rep; see
// checkLayout) and that a screenshot shows something.
func checkInBrowser(t *testing.T, report string, rep *report) {
	want := expectedCharts(rep)
	var bin string
	for _, name := range chromiumNames() {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		skip.Because(t, "chromium not installed: the browser check of report.html did not run (Debian: apt-get install -y chromium)")
	}
	abs, err := filepath.Abs(report)
	if err != nil {
		t.Fatal(err)
	}
	browser := func(page string, extra ...string) []byte {
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir(), "--window-size=" + browserWindow}, extra...)
		args = append(args, "file://"+page)
		ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
		}
		return out
	}
	dom := string(browser(abs, "--dump-dom"))
	svgs := regexp.MustCompile(`(?s)<svg[^>]*class="chart".*?</svg>`).FindAllString(dom, -1)
	withData := 0
	mark := regexp.MustCompile(`<rect [^>]*data-value="[^"]+"`)
	for _, s := range svgs {
		if mark.MatchString(s) {
			withData++
		}
	}
	if want == 0 || withData != want {
		t.Errorf("DOM has %d charts with data marks (of %d <svg>), want %d", withData, len(svgs), want)
	}
	if !strings.Contains(dom, "braidbench") {
		t.Error("DOM lacks the report's title")
	}
	checkLayout(t, parseLayout(t, string(browser(withCheck(t, abs, t.TempDir()), "--dump-dom"))), rep)
	png := filepath.Join(t.TempDir(), "out.png")
	browser(abs, "--screenshot="+png)
	st, err := os.Stat(png)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < minScreenshot {
		t.Errorf("screenshot is %d bytes, want at least %d", st.Size(), minScreenshot)
	}
	if dir := os.Getenv("BRAIDBENCH_SCREENSHOT_DIR"); dir != "" {
		// Keep the screenshot and the page, named by test, to look at.
		name := strings.NewReplacer("/", "-").Replace(t.Name())
		for src, dst := range map[string]string{png: name + ".png", abs: name + ".html"} {
			if b, err := os.ReadFile(src); err == nil {
				_ = os.WriteFile(filepath.Join(dir, dst), b, 0o644)
			}
		}
	}
}

// browserWindow is the window the report is laid out in: a laptop's
// screen, wide enough for the 900 px charts at full size.
const browserWindow = "1280,2000"

// browserTimeout bounds one headless Chromium run.
const browserTimeout = 60 * time.Second

// TestMeasureOneRejectsNonPositive: a zero, negative or NaN figure is an
// error, whether the measurement returns in time or only after its
// timeout, within the grace it is given.
func TestMeasureOneRejectsNonPositive(t *testing.T) {
	const (
		timeout = 10 * time.Millisecond
		late    = 5 * timeout // still well within abandonGrace
	)
	for _, v := range []float64{0, -1, math.NaN()} {
		for _, delay := range []time.Duration{0, late} {
			t.Run(fmt.Sprintf("%v after %v", v, delay), func(t *testing.T) {
				f := func(ctx context.Context, e entry, round int) (sample, error) {
					time.Sleep(delay)
					return sample{mHeap: v}, nil
				}
				if s, err := measureOne(context.Background(), f, entry{Name: "braid"}, 0, timeout); err == nil {
					t.Errorf("measured %v accepted", s)
				}
			})
		}
	}
	f := func(ctx context.Context, e entry, round int) (sample, error) {
		time.Sleep(late)
		return sample{mHeap: 1}, nil
	}
	if s, err := measureOne(context.Background(), f, entry{Name: "braid"}, 0, timeout); err != nil || s[mHeap] != 1 {
		t.Errorf("a positive figure after the timeout: %v, %v; want it kept", s, err)
	}
}
