package interop_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/internal/skip"
)

// js-libp2p's muxers, @chainsafe/libp2p-yamux 8.0.1 and @libp2p/mplex
// 12.0.32 (pinned in js/package-lock.json), each on a raw TCP socket in a
// Node.js process (js/peer.mjs). interop/setup.sh installs them (npm ci);
// the tests skip where node or the modules are missing.

// jsPeer finds node and the installed modules, or skips.
func jsPeer(t *testing.T, muxer string, protocol braid.Protocol) extPeer {
	node, err := exec.LookPath("node")
	if err != nil {
		skip.Because(t, "node is not installed: js-libp2p interop needs Node.js 20+ (interop/setup.sh)")
	}
	dir, err := filepath.Abs("js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@chainsafe", "libp2p-yamux", "package.json")); err != nil {
		skip.Because(t, "js-libp2p modules are not installed in interop/js: run interop/setup.sh (npm ci there)")
	}
	return extPeer{
		name:     "js-libp2p " + muxer,
		protocol: protocol,
		dir:      dir,
		argv: func(args ...string) []string {
			return append([]string{node, "peer.mjs", muxer}, args...)
		},
		refusedEcho:  "StreamResetError",
		finsOnGoAway: true, // its muxer close() closes every stream before the go-away
		pings:        protocol == braid.Yamux,
	}
}

func TestJSYamuxPeer(t *testing.T) { runExtSuite(t, jsPeer(t, "yamux", braid.Yamux)) }

func TestJSMplexPeer(t *testing.T) { runExtSuite(t, jsPeer(t, "mplex", braid.Mplex)) }
