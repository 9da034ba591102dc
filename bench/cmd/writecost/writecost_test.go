package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestShapesWriteEveryByte: every shape writes its records and the reader
// drains them; a shape that lost a byte or left one corked would hang or
// fail here.
func TestShapesWriteEveryByte(t *testing.T) {
	for _, s := range shapes {
		d, err := s.run(1 << 20)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if d <= 0 {
			t.Fatalf("%s: %v a record", s.name, d)
		}
	}
}

// TestRunPrintsTheWritersTime: the summary has a row per shape and the
// writer's time per message in go-yamux's shape, at 1.00x itself.
func TestRunPrintsTheWritersTime(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-rounds", "1", "-mib", "4", "-procs", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range shapes {
		if !strings.Contains(out.String(), "\n"+s.name+" ") {
			t.Errorf("no row for %s in:\n%s", s.name, out.String())
		}
	}
	if !strings.Contains(out.String(), "go-yamux's shape: four records, a short fifth, a copy") || !strings.Contains(out.String(), "1.00x") {
		t.Errorf("no go-yamux row at 1.00x:\n%s", out.String())
	}
	if err := run([]string{"-rounds", "0"}, &out); err == nil {
		t.Error("zero rounds accepted")
	}
}
