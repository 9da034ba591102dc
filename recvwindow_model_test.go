package braid

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/braidmux/braid/slowconn"
	"github.com/libp2p/go-libp2p-testing/race"
	"github.com/stretchr/testify/require"
)

// Tests of the receive window against a model of the peer, and of ping ids
// and Ping at Close.

const (
	// reviewPingTimeout bounds a Ping in these tests: on loopback a pong
	// comes back within microseconds.
	reviewPingTimeout = 2 * time.Second
	// reviewLinkLatency is the one-way delay of the slow link: a round
	// trip of 200 ms.
	reviewLinkLatency = 100 * time.Millisecond
)

// TestPingIDSkipsMarkerSpace.
//
// Promise: Ping returns the round trip whenever the peer answers (Ping's
// doc); the session's own ping ids and the writer's marker ids
// (markerFlag, inflight.go) never meet, so a pong for a Ping is never
// taken for a marker's. After 2^31 pings the session's counter reaches
// the marker space: then the pong goes to markerAnswered, is ignored, and
// Ping times out although the peer answered.
func TestPingIDSkipsMarkerSpace(t *testing.T) {
	client, _ := sessionPair(t, &Config{ConnectionWriteTimeout: reviewPingTimeout})
	_, err := client.Ping()
	require.NoError(t, err, "a first ping")
	client.mu.Lock()
	client.nextPing = markerFlag - 1 // as after 2^31 - 1 pings
	client.mu.Unlock()
	for i := range 2 {
		_, err := client.Ping()
		require.NoError(t, err, "ping %d after the counter reached the marker space", i)
	}
}

const (
	// reviewModelSteps is how many random operations each model run takes.
	reviewModelSteps = 200_000
	// reviewModelSeeds is how many seeded runs the model test makes.
	reviewModelSeeds = 8
	// reviewModelSeedsRace is the seeded runs under the race detector.
	reviewModelSeedsRace = 2
	// reviewModelRTT is the model's round trip on a default window.
	reviewModelRTT = time.Millisecond
	// reviewHugeRTT is the model's round trip with the largest
	// MaxStreamWindow: the path's window is beyond it at once.
	reviewHugeRTT = 10 * time.Second
	// reviewModelTick bounds the model clock's step between operations:
	// arrivals fast enough for windows to double.
	reviewModelTick = 30 * time.Microsecond
	// reviewModelRate is the path rate of the model runs, bytes/s.
	reviewModelRate = 1e9
)

// TestRecvWindowModel.
//
// Promise (recvwindow.go, "Flow control"): whatever the order of
// arrivals, reads, growths (granted in full, in part or refused), rides
// and shrinks, the peer's credit is exactly what we granted less what it
// sent (so a shrink never takes back credit it holds, and data within it
// is never a protocol error), the credit never exceeds the largest window
// and never wraps, and window - credit - unread is what was consumed and
// not given back. A simple model of the peer, on a fake clock.
func TestRecvWindowModel(t *testing.T) {
	for _, c := range []struct {
		maxWindow uint32
		rtt       time.Duration
	}{{DefaultMaxStreamWindow, reviewModelRTT}, {math.MaxUint32, reviewHugeRTT}} {
		reviewRecvWindowModel(t, c.maxWindow, c.rtt)
	}
}

func reviewRecvWindowModel(t *testing.T, reviewMaxWindow uint32, rtt time.Duration) {
	seeds := reviewModelSeeds
	if race.WithRace() {
		seeds = reviewModelSeedsRace // the model is pure logic: the detector adds time, not coverage
	}
	for seed := range int64(seeds) {
		rng := rand.New(rand.NewSource(seed))
		f := newFakeEnv(rtt, reviewModelRate, reviewMaxWindow)
		w := newRecvWindow(InitialStreamWindow, 0)
		peerCredit := uint64(InitialStreamWindow) // granted less sent, as the peer counts it
		var largest uint32                        // the largest window the run reached
		shrinks := 0
		grant := func(u uint32) {
			peerCredit += uint64(u)
			require.LessOrEqual(t, peerCredit, uint64(reviewMaxWindow), "seed %d: credit beyond MaxStreamWindow", seed)
		}
		for step := range reviewModelSteps {
			f.advance(time.Duration(rng.Int63n(int64(reviewModelTick))))
			switch op := rng.Intn(10); {
			case op < 4: // the peer sends up to its credit
				if peerCredit == 0 {
					continue
				}
				n := uint32(rng.Int63n(int64(min(peerCredit, 1<<20)))) + 1
				require.True(t, w.admit(n), "seed %d step %d: %d bytes within the peer's credit %d refused (window %d credit %d)",
					seed, step, n, peerCredit, w.window, w.credit)
				w.received(n, &f.env)
				peerCredit -= uint64(n)
			case op < 8: // the application reads
				if w.unread == 0 {
					continue
				}
				n := uint32(rng.Int63n(int64(w.unread))) + 1
				rule := updateRule(rng.Intn(3))
				u, _ := w.consumed(n, false, rule)
				grant(u)
				if want := w.wantGrowth(&f.env); want > 0 {
					g := want
					switch rng.Intn(3) {
					case 0:
						g = 0
					case 1:
						g = uint32(rng.Int63n(int64(want))) + 1
					}
					grant(w.grew(g, w.budgetCost(g), false, rule))
				}
			case op == 8: // a pong carries what is due
				grant(w.takeRide())
			default: // the shrink timer
				if _, _, shrunk := w.idleCheck(); shrunk {
					shrinks++
				}
			}
			require.Equal(t, peerCredit, uint64(w.credit), "seed %d step %d: our credit and the peer's differ", seed, step)
			require.LessOrEqual(t, w.window, reviewMaxWindow, "seed %d step %d: window", seed, step)
			largest = max(largest, w.window)
			require.Equal(t, int64(w.window)-int64(w.credit)-int64(w.unread), w.pending(), "seed %d step %d", seed, step)
		}
		t.Logf("max window %d, seed %d: largest window %d, %d shrinks", reviewMaxWindow, seed, largest, shrinks)
		require.Positive(t, shrinks, "the run shrank no window")
	}
}

// reviewClosedPingBound is how long a Ping on a closed session may take:
// it must not wait for ConnectionWriteTimeout.
const reviewClosedPingBound = time.Second

// TestPingAfterClose.
//
// Promise (Ping, Close): a Ping on a closed session, or one in flight
// when the session closes, returns at once with an error matching
// ErrSessionClosed, not after ConnectionWriteTimeout.
func TestPingAfterClose(t *testing.T) {
	c1, c2 := slowconn.Pipe(slowconn.Link{Latency: reviewLinkLatency})
	client, _ := sessionPairOver(t, c1, c2, nil)
	done := make(chan error, 1)
	go func() {
		_, err := client.Ping() // its pong is a round trip away
		done <- err
	}()
	time.Sleep(reviewLinkLatency / 2)
	start := time.Now()
	require.NoError(t, client.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrSessionClosed, "a Ping in flight at Close")
	case <-time.After(reviewClosedPingBound):
		t.Fatal("a Ping in flight did not return at Close")
	}
	_, err := client.Ping()
	require.ErrorIs(t, err, ErrSessionClosed, "a Ping after Close")
	require.Less(t, time.Since(start), reviewClosedPingBound)
}
