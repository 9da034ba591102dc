package main

import (
	"bytes"
	"strings"
	"testing"
)

const runA = `goos: linux
BenchmarkBulk/net=tls/impl=braid-2   	    3000	     59310 ns/op	1104.98 MB/s	     389 B/op	       2 allocs/op
PASS
`

const runB = `BenchmarkBulk/net=tls/impl=braid-2   	    3000	     50000 ns/op	1200.00 MB/s	     389 B/op	       2 allocs/op
`

func TestParse(t *testing.T) {
	r := parse(runA)
	if got := r[key{"BenchmarkBulk/net=tls/impl=braid-2", "MB/s"}]; got != 1104.98 {
		t.Fatalf("MB/s = %v, want 1104.98", got)
	}
	if len(r) != 4 {
		t.Fatalf("parsed %d quantities, want 4: %v", len(r), r)
	}
	if len(parse("goos: linux\nPASS\nBenchmarkX FAIL\n")) != 0 {
		t.Fatal("parsed a line that is not a result")
	}
}

func TestSummarize(t *testing.T) {
	s := summarize([]float64{1.2, 0.9, 1.1, 1.0})
	if s.median != 1.05 || s.above != 2 || s.n != 4 || s.q1 != 0.9 || s.q3 != 1.1 {
		t.Fatalf("summary %+v", s)
	}
	if s := summarize([]float64{0.5, 2, 1.5}); s.median != 1.5 || s.above != 2 {
		t.Fatalf("odd count: %+v", s)
	}
}

// TestSummarizeNearestRankQuartiles: the quartiles are nearest-rank, the
// ceil(p*n)-th smallest ratio, for counts divisible by 4 and not.
func TestSummarizeNearestRankQuartiles(t *testing.T) {
	cases := []struct {
		ratios []float64
		q1, q3 float64
	}{
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8}, 2, 6},
		{[]float64{4, 3, 2, 1}, 1, 3},
		{[]float64{1, 2, 3, 4, 5}, 2, 4},
		{[]float64{1, 2, 3, 4, 5, 6}, 2, 5},
		{[]float64{7}, 7, 7},
	}
	for _, tc := range cases {
		if s := summarize(tc.ratios); s.q1 != tc.q1 || s.q3 != tc.q3 {
			t.Errorf("%v: q1 %v q3 %v, want %v and %v", tc.ratios, s.q1, s.q3, tc.q1, tc.q3)
		}
	}
}

func TestPairingWrite(t *testing.T) {
	var p pairing
	p.add(parse(runA), parse(runB))
	p.add(parse(runA), parse(runB))
	var out bytes.Buffer
	p.write(&out)
	want := "BenchmarkBulk/net=tls/impl=braid-2 MB/s: B/A median 1.086 (q1 1.086, q3 1.086), B above A in 2 of 2 pairs"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("output:\n%s\nwant a line:\n%s", out.String(), want)
	}
}

func TestRunNeedsFlags(t *testing.T) {
	if err := run([]string{"-a", "x"}, &bytes.Buffer{}); err == nil {
		t.Fatal("no error without -b and -bench")
	}
}

// TestRunPairAlternatesOrder: runPair runs the binary asked first first,
// and returns the results as a, b either way, so the ratios stay B / A.
func TestRunPairAlternatesOrder(t *testing.T) {
	for _, bFirst := range []bool{false, true} {
		var ran []string
		runBin := func(bin string) (results, error) {
			ran = append(ran, bin)
			if bin == "a" {
				return parse(runA), nil
			}
			return parse(runB), nil
		}
		ra, rb, err := runPair("a", "b", bFirst, runBin)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"a", "b"}
		if bFirst {
			want = []string{"b", "a"}
		}
		if strings.Join(ran, " ") != strings.Join(want, " ") {
			t.Errorf("bFirst %v: ran %v, want %v", bFirst, ran, want)
		}
		k := key{"BenchmarkBulk/net=tls/impl=braid-2", "MB/s"}
		if ra[k] != 1104.98 || rb[k] != 1200 {
			t.Errorf("bFirst %v: a %v, b %v, want 1104.98 and 1200", bFirst, ra[k], rb[k])
		}
	}
}
