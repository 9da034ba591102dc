package libp2pmux

import (
	"sort"
	"strings"
	"testing"

	tmux "github.com/libp2p/go-libp2p/p2p/muxer/testsuite"
)

// conformanceSubtests is the number of subtests in go-libp2p v0.52.0's
// muxer conformance suite. None is removed here: unlike go-yamux, braid
// passes SubtestStress1Conn1000Stream10Msg too, since an opener waits for
// the ACK backlog rather than overflowing the peer's accept backlog.
const conformanceSubtests = 11

// TestConformance runs go-libp2p's muxer conformance suite as it is, with
// the suite's own peer scopes.
func TestConformance(t *testing.T) {
	if n := len(tmux.Subtests); n != conformanceSubtests {
		t.Fatalf("the suite has %d subtests, want %d", n, conformanceSubtests)
	}
	tmux.SubtestAll(t, DefaultTransport)
}

// TestConformanceMemory runs every subtest of the suite again, giving every
// connection (both sides) a counting peer scope that fails the subtest
// unless all memory reserved was released by the muxer and every span
// ended.
func TestConformanceMemory(t *testing.T) {
	names := make([]string, 0, len(tmux.Subtests))
	for name := range tmux.Subtests {
		names = append(names, name)
	}
	sort.Strings(names)
	// The suite has no t.Skip today; fail if one appears and triggers.
	var skipped []string
	for _, name := range names {
		f := tmux.Subtests[name]
		t.Run(name, func(t *testing.T) {
			defer func() {
				if t.Skipped() {
					skipped = append(skipped, name)
				}
			}()
			scope := &countingScope{}
			f(t, scopedTransport{tr: DefaultTransport, scope: scope})
			// Every subtest but the one that opens no stream reserves.
			scope.check(t, !strings.HasSuffix(name, ".SubtestWriteAfterClose"))
		})
	}
	if len(skipped) > 0 {
		t.Errorf("subtests skipped: %v", skipped)
	}
}
