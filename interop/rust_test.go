package interop_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/internal/skip"
)

// rust-yamux 0.13.10, the muxer of rust-libp2p (as yamux013) and litep2p, in
// a small tokio program (rust/src/main.rs). interop/setup.sh builds it
// offline (rust/build.sh); the test does not build it, it skips where the
// binary is missing (a fresh clone without ../shared/vendor/rust, or
// without Debian's librust-*-dev crates).

func TestRustYamuxPeer(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("rust", "target", "release", "yamux-peer"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		skip.Because(t, "the rust-yamux peer is not built (%s): run interop/setup.sh, which needs ../shared/vendor/rust and Debian's librust-*-dev crates", bin)
	}
	runExtSuite(t, extPeer{
		name:     "rust-yamux 0.13.10",
		protocol: braid.Yamux,
		dir:      filepath.Dir(bin),
		argv: func(args ...string) []string {
			return append([]string{bin}, args...)
		},
		refusedEcho:  "came back as 0 different bytes",
		finsOnGoAway: false, // poll_close sends a go-away and closes the socket, open streams get no FIN
		pings:        false, // no ping API in 0.13; it pings on its own
	})
}
