package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestShapesMoveEveryByte: every shape moves its messages and reports a
// rate; a shape that lost or held back a byte would hang or fail here.
func TestShapesMoveEveryByte(t *testing.T) {
	for _, s := range shapes {
		mbps, err := s.run(64)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if mbps <= 0 {
			t.Fatalf("%s: rate %v", s.name, mbps)
		}
	}
}

// TestRunPrintsEveryShape: the summary has a row per shape, raw at 1.00x.
func TestRunPrintsEveryShape(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-rounds", "1", "-messages", "16", "-procs", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range shapes {
		if !strings.Contains(out.String(), "\n"+s.name+" ") {
			t.Errorf("no row for %s in:\n%s", s.name, out.String())
		}
	}
	if !strings.Contains(out.String(), "1.00x") {
		t.Errorf("raw is not the base:\n%s", out.String())
	}
	if err := run([]string{"-rounds", "0"}, &out); err == nil {
		t.Error("zero rounds accepted")
	}
}
