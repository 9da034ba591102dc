package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind. Nothing is
// ignored: every contender (go-mplex, smux and hashicorp/yamux included)
// stops all of its goroutines when its sessions close, and the tool waits
// for its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
