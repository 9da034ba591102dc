//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunAlternatesWhichRunsFirst: over four pairs, run starts with A, B,
// A, B, through real processes (two scripts that log their runs).
func TestRunAlternatesWhichRunsFirst(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "ran")
	script := func(name, result string) string {
		path := filepath.Join(dir, name)
		body := "#!/bin/sh\necho " + name + " >> " + log + "\necho '" + result + "'\n"
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := script("a", "BenchmarkX-2 1 100 ns/op")
	b := script("b", "BenchmarkX-2 1 200 ns/op")
	var out bytes.Buffer
	if err := run([]string{"-a", a, "-b", b, "-bench", "X", "-pairs", "4"}, &out); err != nil {
		t.Fatal(err)
	}
	ran, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(ran)); strings.Join(got, " ") != "a b b a a b b a" {
		t.Errorf("ran %v, want a b b a a b b a", got)
	}
	if want := "BenchmarkX-2 ns/op: B/A median 2.000"; !strings.Contains(out.String(), want) {
		t.Errorf("output:\n%s\nwant %q", out.String(), want)
	}
}
