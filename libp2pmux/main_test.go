package libp2pmux

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The conformance suite's GoServe starts an accept loop on a
		// listener it never closes (its done func only signals a channel),
		// so that goroutine stays blocked in Accept after every subtest that
		// uses it. It belongs to the suite, not to braid or this package.
		goleak.IgnoreAnyFunction("github.com/libp2p/go-libp2p/p2p/muxer/testsuite.GoServe.func1"),
	)
}
