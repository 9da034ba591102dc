package main

import (
	"encoding/json"
	"fmt"
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
	js, err := json.MarshalIndent(rep, "", "  ")
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
