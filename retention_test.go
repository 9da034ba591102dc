package braid

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Promise: a stream that left its session's table is garbage once the
// application lets go of it, even in a session that then goes idle with
// nothing arriving (keep-alive off): neither the read loop's cache of the
// last stream it looked up (lastStream) nor the list of window updates
// waiting for a pong (rideList) keeps it. Each pair echoes 1 MiB, so that
// updates ride and the last frames are the streams' own. Without either
// release it fails: with neither, none of the 40 streams was collected;
// with the cache's alone, 29-32 were. A Read that queued its stream for a
// ride as the peer's FIN removed it once left the entry behind (1 run in
// 30 under -race, 37 of 40 collected): joinRides takes it out again.
func TestClosedStreamsAreCollected(t *testing.T) {
	const pairs, size = 20, 1 << 20
	cfg := DefaultConfig()
	cfg.DisableKeepAlive = true
	var collected atomic.Int32
	for _, p := range func() []scalePair { ps, _ := tcpSessionPairs(t, pairs, cfg); return ps }() {
		opened, accepted := openAccepted(t, p.client, p.server, 1)
		echoAll(t, opened, accepted, size)
		require.Eventually(t, func() bool { return p.client.NumStreams() == 0 && p.server.NumStreams() == 0 }, eventually, time.Millisecond)
		for _, st := range []*Stream{opened[0], accepted[0]} {
			runtime.AddCleanup(st, func(*atomic.Int32) { collected.Add(1) }, &collected)
		}
	}
	// The count is read after the wait, not as Eventually's message
	// (evaluated once, before it), so that a failure says what was left.
	for end := time.Now().Add(eventually); collected.Load() != 2*pairs && time.Now().Before(end); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, int32(2*pairs), collected.Load(), "streams collected")
}
