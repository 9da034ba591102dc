package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/braidmux/braid/libp2pmux/internal/hostbench"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRealMain runs one small measurement between two braid hosts and
// decodes its output; bad flags are a usage error.
func TestRealMain(t *testing.T) {
	var out, errs bytes.Buffer
	if code := realMain([]string{"-scenario", "chunks", "-muxer", "braid", "-n", "10", "-ops", "2"}, &out, &errs); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	var r hostbench.Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if r.Ops != 2 || r.Elapsed <= 0 {
		t.Errorf("result %+v, want 2 ops and a positive time", r)
	}
	out.Reset()
	if code := realMain([]string{"-scenario", "ping", "-security", "tls", "-count", "50", "-size", "64"}, &out, &errs); code != exitOK {
		t.Fatalf("ping: exit %d: %s", code, errs.String())
	}
	r = hostbench.Result{}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if r.Ops != 50 || r.P50 <= 0 || r.P99 < r.P50 || r.Elapsed < r.P99 {
		t.Errorf("ping result %+v, want 50 round trips, 0 < p50 <= p99 <= the whole", r)
	}
	for _, args := range [][]string{
		{"-security", "plaintext"},
		{"-muxer", "quic"},
		{"-scenario", "gossip"},
		{"-n", "0"},
		{"-timeout", "0s"},
		{"-loss", "1"},
		{"extra"},
	} {
		out.Reset()
		errs.Reset()
		if code := realMain(args, &out, &errs); code != exitUsage || errs.Len() == 0 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want a usage error", args, code, errs.String(), out.String())
		}
	}
}

// -cpuprofile writes a CPU profile of the run (gzip-compressed protobuf,
// as go tool pprof reads it); a file it can't create fails the run.
func TestRealMainCPUProfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cpu.pprof")
	var out, errs bytes.Buffer
	args := []string{"-scenario", "notify", "-muxer", "braid", "-count", "20", "-cpuprofile", file}
	if code := realMain(args, &out, &errs); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile of %d bytes does not start as gzip", len(b))
	}
	errs.Reset()
	out.Reset()
	args[len(args)-1] = filepath.Join(t.TempDir(), "missing", "cpu.pprof")
	if code := realMain(args, &out, &errs); code != exitFailure || errs.Len() == 0 {
		t.Errorf("unwritable profile: exit %d, stderr %q; want a failure", code, errs.String())
	}
}

// -trace writes an execution trace of the run (go tool trace reads it;
// its header names the Go version and "trace"), beside a CPU profile when
// both are asked for; a file it can't create fails the run.
func TestRealMainTrace(t *testing.T) {
	dir := t.TempDir()
	traceFile, profile := filepath.Join(dir, "run.trace"), filepath.Join(dir, "cpu.pprof")
	var out, errs bytes.Buffer
	args := []string{"-scenario", "ping", "-muxer", "braid", "-count", "20", "-size", "64", "-cpuprofile", profile, "-trace", traceFile}
	if code := realMain(args, &out, &errs); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	b, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	if head, _, ok := bytes.Cut(b, []byte{0}); !ok || !bytes.HasPrefix(head, []byte("go 1.")) || !bytes.HasSuffix(head, []byte(" trace")) {
		t.Fatalf("trace of %d bytes starts %q; want a Go execution trace's header", len(b), b[:min(len(b), 16)])
	}
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Errorf("CPU profile beside the trace: %v, %v", fi, err)
	}
	errs.Reset()
	out.Reset()
	args = append(args[:len(args)-4], "-trace", filepath.Join(dir, "missing", "run.trace"))
	if code := realMain(args, &out, &errs); code != exitFailure || errs.Len() == 0 {
		t.Errorf("unwritable trace: exit %d, stderr %q; want a failure", code, errs.String())
	}
}
