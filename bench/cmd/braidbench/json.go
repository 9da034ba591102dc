package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The files a run writes into its output directory.
const (
	resultsFile = "results.json"
	reportFile  = "report.html"
)

// joinPath names a file in dir.
func joinPath(dir, file string) string { return filepath.Join(dir, file) }

// writeFiles writes results.json and report.html into dir.
func writeFiles(dir string, rep *report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(struct {
		*report
		Verdict []verdictRow `json:"verdict"`
	}{rep, buildVerdict(rep)}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := os.WriteFile(joinPath(dir, resultsFile), append(js, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(joinPath(dir, reportFile))
	if err != nil {
		return err
	}
	if err := writeHTML(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readResults reads an earlier run's results.json.
func readResults(path string) (*report, error) {
	js, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep report
	if err := json.Unmarshal(js, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rep.Cells) == 0 {
		return nil, fmt.Errorf("%s: no cells", path)
	}
	summarize(&rep)
	return &rep, nil
}

// rerender prints and writes the report of opts.From into opts.Out.
func rerender(opts options, stdout, stderr io.Writer) int {
	rep, err := readResults(opts.From)
	if err == nil && filepath.Clean(joinPath(opts.Out, resultsFile)) == filepath.Clean(opts.From) {
		err = errors.New("-from is the results.json -o would overwrite: choose another -o")
	}
	if err != nil {
		fmt.Fprintln(stderr, "braidbench:", err)
		return exitFailure
	}
	writeText(stdout, rep)
	if err := writeFiles(opts.Out, rep); err != nil {
		fmt.Fprintln(stderr, "braidbench:", err)
		return exitFailure
	}
	fmt.Fprintf(stderr, "braidbench: wrote %s and %s\n", joinPath(opts.Out, resultsFile), joinPath(opts.Out, reportFile))
	return exitOK
}
