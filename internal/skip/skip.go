// Package skip makes a test's skip visible outside `go test -v`.
//
// `go test` without -v prints nothing for a skipped test, so a check that
// could not run (no root for the kernel shaper, no chromium, no Rust
// toolchain) would look like a pass. A test that skips for a missing
// dependency calls Because; when the environment variable named by LogEnv
// holds a file name, the reason is also appended to that file, and CI
// prints the file at the end of its run.
package skip

import (
	"fmt"
	"os"
	"testing"
)

// LogEnv names the environment variable that holds the skip log's path.
const LogEnv = "BRAID_SKIP_LOG"

// Because records why t cannot run, then skips it.
func Because(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if path := os.Getenv(LogEnv); path != "" {
		// A skip the log can't record would pass unseen: fail instead.
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatalf("skip log %s: %v (skipping because %s)", path, err, reason)
		}
		_, werr := fmt.Fprintf(f, "%s: %s\n", t.Name(), reason)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			t.Fatalf("skip log %s: %v (skipping because %s)", path, werr, reason)
		}
	}
	t.Skip(reason)
}
