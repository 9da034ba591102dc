package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/braidmux/braid/bench/internal/cpuskew"
)

func TestFormat(t *testing.T) {
	at := time.Date(2026, 12, 7, 6, 1, 2, 0, time.UTC)
	s := cpuskew.Sample{Rates: []cpuskew.Rate{{CPU: 0, MBPerSec: 5500.4}, {CPU: 1, MBPerSec: 3667}}}
	want := "06:01:02  cpu0 5500 MB/s  cpu1 3667 MB/s  slowest/fastest 0.67"
	if got := format(at, s); got != want {
		t.Errorf("format = %q, want %q", got, want)
	}
}

func TestRealMain(t *testing.T) {
	var out, errs bytes.Buffer
	code := realMain([]string{"-n", "2", "-d", "5ms", "-every", "0s"}, &out, &errs)
	if runtime.GOOS != "linux" {
		if code != exitFailure || !strings.Contains(errs.String(), "not supported") {
			t.Fatalf("off Linux: exit %d, stderr %q", code, errs.String())
		}
		return
	}
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errs.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %q", len(lines), out.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "cpu0 ") || !strings.Contains(l, "slowest/fastest") {
			t.Errorf("line %q lacks cpu0's rate or the ratio", l)
		}
	}
}

func TestRealMainUsage(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-d", "0s"}, {"-every", "-1s"}, {"extra"}, {"-bogus"}} {
		var out, errs bytes.Buffer
		if code := realMain(args, &out, &errs); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, errs.String())
		}
	}
}
