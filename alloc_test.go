package braid

import (
	"context"
	"io"
	"testing"

	"github.com/libp2p/go-libp2p-testing/race"
	"github.com/stretchr/testify/require"
)

// bulkWrite is the write size of the allocation promise: one 64 KiB
// Write, large enough to go by reference (writev from the caller's slice).
const bulkWrite = 64 * 1024

// TestZeroAllocsBulkWriteRead proves README's "0 allocs per 64 KiB
// write+read": over loopback TCP, one 64 KiB Write on the client's stream
// and reading those bytes fully on the server's allocate nothing in the
// steady state, counting every goroutine of both sessions (the writers
// and read loops run meanwhile). testing.AllocsPerRun averages over the
// runs and rounds down, as a benchmark's allocs/op does: what is left
// over 1,000 runs is about ten mallocs, the runtime refilling caches that
// a GC emptied (sudogs for channel waits, sync.Pool's per-P chains under
// go-buffer-pool), not work of a write or a read.
//
// Under the race detector sync.Pool drops buffers at random on purpose, so
// the pooled payload buffers are made afresh and the count says nothing:
// the test runs without it.
func TestZeroAllocsBulkWriteRead(t *testing.T) {
	if race.WithRace() {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops buffers at random)")
	}
	cfg := DefaultConfig()
	cfg.DisableKeepAlive = true // no timer-driven frame during the count
	client, server := sessionPair(t, cfg)
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = a.Write([]byte{0}) // the SYN and first data make b acceptable
	require.NoError(t, err)
	b, err := server.AcceptStream()
	require.NoError(t, err)
	_, err = io.ReadFull(b, make([]byte, 1))
	require.NoError(t, err)

	out := make([]byte, bulkWrite)
	for i := range out {
		out[i] = byte(i)
	}
	in := make([]byte, bulkWrite)
	var runErr error
	run := func() {
		if runErr != nil {
			return
		}
		if _, err := a.Write(out); err != nil {
			runErr = err
			return
		}
		_, runErr = io.ReadFull(b, in)
	}
	// Warm up past window growth and the pools' first buffers.
	for range 64 {
		run()
	}
	allocs := testing.AllocsPerRun(200, run)
	require.NoError(t, runErr)
	require.Equal(t, out, in, "the bytes read differ from those written")
	t.Logf("%.0f allocs per %d B write+read", allocs, bulkWrite)
	require.Zero(t, allocs, "allocations per 64 KiB write+read")
}
