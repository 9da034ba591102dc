package skip

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBecauseLogs: a skip is appended to the log LogEnv names, with the
// test's name and the reason, and the test is skipped.
func TestBecauseLogs(t *testing.T) {
	log := filepath.Join(t.TempDir(), "skips")
	t.Setenv(LogEnv, log)
	var skipped bool
	t.Run("inner", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Because(t, "no %s here", "peer")
	})
	if !skipped {
		t.Fatal("Because did not skip")
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "TestBecauseLogs/inner: no peer here\n"; got != want {
		t.Fatalf("log holds %q, want %q", got, want)
	}
}

// TestBecauseUnloggableFails: when the log can't be written, the test
// fails rather than skip unseen (run in a child process, whose failure is
// the point).
func TestBecauseUnloggableFails(t *testing.T) {
	if os.Getenv("SKIP_TEST_CHILD") == "1" {
		Because(t, "no peer here")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBecauseUnloggableFails$")
	cmd.Env = append(os.Environ(), "SKIP_TEST_CHILD=1", LogEnv+"="+filepath.Join(t.TempDir(), "no-such-dir", "skips"))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child passed:\n%s", out)
	}
	if !strings.Contains(string(out), "skip log") {
		t.Fatalf("the child failed for another reason:\n%s", out)
	}
}
