package main

import (
	"bytes"
	"encoding/json"
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
	for _, args := range [][]string{
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
