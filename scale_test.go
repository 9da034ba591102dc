package braid

// Scale promises (the list is at the top of faults_test.go): many streams,
// many sessions, bounded memory, fair throughput.

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braidmux/braid/internal/heapstat"
	"github.com/braidmux/braid/slowconn"
	"github.com/libp2p/go-libp2p-testing/race"
	"github.com/stretchr/testify/require"
)

const (
	// maxIdleStreamBytes bounds the heap one idle, open stream costs,
	// counting both ends (the opener's Stream and the acceptor's) and the
	// session tables that hold them. Measured: 655 B with 10,000 streams
	// on one session, 705 B with 100 x 100 (two Stream structs, a map
	// entry each, the accept backlog). 1 KiB leaves ~45 % headroom for
	// allocator size classes and map growth, and no room for any
	// per-stream buffer (the smallest worth having, 4 KiB, would break it).
	maxIdleStreamBytes = 1024

	// maxSessionPairBytes bounds the heap of an idle session pair (both
	// ends of one connection, the conn included), after one stream was
	// used and closed: issue #15's target, 16 KiB. No 32 KiB read buffer
	// fits in it: an idle read loop waits in its 512-byte small buffer.
	maxSessionPairBytes = 16 * 1024

	// maxIdleAfterBulkPairBytes bounds the heap of an idle session pair
	// that moved bulk data first: the same 16 KiB as an idle pair that
	// never did. The read buffer goes back to the pool at a stream's end
	// and the writer's batch buffers whenever it parks
	// (writer.releaseBuffers); measured over TCP after a 1 MiB echo:
	// 7.2-9.5 KB per pair (8.8-17.5 KB while the writer kept them).
	maxIdleAfterBulkPairBytes = maxSessionPairBytes

	// maxSessionPairGoroutines bounds the goroutines of an idle session
	// pair: a read loop and a writer per end.
	maxSessionPairGoroutines = 4
	// goroutineSettle is how long TestScaleIdleSessions lets transient
	// goroutines (a timer's function, an earlier test's closing session)
	// end before it counts for the last time. CI once counted 4.001 per
	// pair 100 ms after the first count, under the race detector; a
	// goroutine that belongs to every pair stays and adds 1.0.
	goroutineSettle = 5 * time.Second
	// goroutinePoll is how often the count is taken while it settles.
	goroutinePoll = 10 * time.Millisecond

	// minFairShare is the least share of the mean a stream may get when
	// many write at once: the writer serves streams round-robin.
	minFairShare = 0.5
)

// scaleStreamCount is the stream count of TestScaleManyStreams. Under the
// race detector it is 1,000: the detector allows at most 8128 live
// goroutines and the echo phase runs two per stream.
func scaleStreamCount() int {
	if race.WithRace() {
		return 1000
	}
	return 10000
}

// idleSessionCount is the idle session pairs of TestScaleIdleSessions;
// under the race detector 1,000, for its goroutine limit (four per pair).
func idleSessionCount() int {
	if race.WithRace() {
		return 1000
	}
	return 10000
}

// scaleSessionCount is sessions x streams of TestScaleManySessions; under
// the race detector 40 x 50, for the same goroutine limit.
func scaleSessionCount() (sessions, streams int) {
	if race.WithRace() {
		return 40, 50
	}
	return 100, 100
}

// openAccepted opens n streams from client and returns them with the
// streams server accepted for them, once every one is acknowledged.
func openAccepted(t testing.TB, client, server *Session, n int) (opened, accepted []*Stream) {
	t.Helper()
	acceptedc := make(chan []*Stream, 1)
	go func() {
		acc := make([]*Stream, 0, n)
		for len(acc) < n {
			st, err := server.AcceptStream()
			if err != nil {
				break
			}
			acc = append(acc, st)
		}
		acceptedc <- acc
	}()
	opened = make([]*Stream, 0, n)
	for range n {
		st, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		opened = append(opened, st)
	}
	select {
	case accepted = <-acceptedc:
	case <-time.After(eventually):
		t.Fatalf("%d streams not accepted within %v", n, eventually)
	}
	require.Len(t, accepted, n)
	require.Eventually(t, func() bool {
		client.mu.Lock()
		defer client.mu.Unlock()
		return client.unacked == 0
	}, eventually, time.Millisecond, "streams never acknowledged")
	return opened, accepted
}

// echoAll runs one echo of a distinct message on every pair of streams at
// once and checks each, then waits for both tables to empty.
func echoAll(t testing.TB, opened, accepted []*Stream, size int) {
	t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, len(opened))
	for _, st := range accepted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := io.Copy(st, st); err != nil {
				errc <- err
				return
			}
			if err := st.CloseWrite(); err != nil {
				errc <- err
			}
		}()
	}
	for i, st := range opened {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := faultPayload(uint64(st.ID()), i, size)
			werr := make(chan error, 1)
			go func() {
				_, err := st.Write(payload)
				if err == nil {
					err = st.CloseWrite()
				}
				werr <- err
			}()
			n, sum, err := readHashed(st)
			if err := <-werr; err != nil {
				errc <- fmt.Errorf("stream %d: write: %w", st.ID(), err)
				return
			}
			if err != io.EOF || n != int64(size) || !isPrefix(n, sum, payload) {
				errc <- fmt.Errorf("stream %d: echo %d of %d bytes, %v, intact %v", st.ID(), n, size, err, isPrefix(n, sum, payload))
				return
			}
			_ = st.Close()
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// Promise: 10,000 concurrent streams on one session all work, an idle one
// costs at most maxIdleStreamBytes (both ends), and the stream tables are
// empty once they are closed.
func TestScaleManyStreams(t *testing.T) {
	n := scaleStreamCount()
	cfg := DefaultConfig()
	cfg.MaxIncomingStreams = n // the default, 1000, would refuse the rest
	cfg.AcceptBacklog = n
	client, server := sessionPair(t, cfg)

	before := heapstat.Live()
	opened, accepted := openAccepted(t, client, server, n)
	perStream := float64(heapstat.Live()-before) / float64(n)
	t.Logf("%d idle streams: %.0f B of heap per stream, both ends (bound %d)", n, perStream, maxIdleStreamBytes)
	require.Equal(t, n, client.NumStreams())
	require.Equal(t, n, server.NumStreams())
	require.LessOrEqual(t, perStream, float64(maxIdleStreamBytes), "idle stream memory")

	start := time.Now()
	echoAll(t, opened, accepted, 1024)
	t.Logf("%d concurrent 1 KiB echoes in %v", n, time.Since(start))
	require.Eventually(t, func() bool { return client.NumStreams() == 0 && server.NumStreams() == 0 }, eventually, time.Millisecond,
		"stream tables not empty: client %d, server %d", client.NumStreams(), server.NumStreams())
	runtime.KeepAlive(opened)
	runtime.KeepAlive(accepted)
}

// useOneStream echoes a small message on one stream of the pair and waits
// until both tables are empty and the first pings are answered: what an
// idle session looks like after it was used.
func useOneStream(t testing.TB, client, server *Session) {
	t.Helper()
	opened, accepted := openAccepted(t, client, server, 1)
	echoAll(t, opened, accepted, 1024)
	require.Eventually(t, func() bool {
		return client.NumStreams() == 0 && server.NumStreams() == 0 && client.RTT() != 0 && server.RTT() != 0
	}, eventually, time.Millisecond)
}

// scalePair is a client session and the server session at the other end
// of its conn.
type scalePair struct{ client, server *Session }

// tcpSessionPairs makes n session pairs with cfg over loopback TCP, and
// returns them with the live heap measured after the conns were made and
// before the sessions were, so that what the caller measures against it
// is the sessions' alone.
func tcpSessionPairs(t *testing.T, n int, cfg *Config) ([]scalePair, uint64) {
	t.Helper()
	conns := make([][2]net.Conn, n)
	for i := range conns {
		conns[i][0], conns[i][1] = tcpPair(t)
	}
	before := heapstat.Live()
	pairs := make([]scalePair, n)
	for i, c := range conns {
		pairs[i].client, pairs[i].server = sessionPairOver(t, c[0], c[1], cfg)
	}
	return pairs, before
}

// Promise: 100 sessions x 100 streams in one process all work, and an idle
// session pair over TCP costs at most maxSessionPairBytes.
func TestScaleManySessions(t *testing.T) {
	sessions, streams := scaleSessionCount()
	pairs, before := tcpSessionPairs(t, sessions, nil)
	// The first pings and one stream's use are part of an idle session.
	for _, p := range pairs {
		useOneStream(t, p.client, p.server)
	}
	perSession := float64(int64(heapstat.Live())-int64(before)) / float64(sessions)
	t.Logf("%d idle session pairs: %.0f B of heap per pair (bound %d)", sessions, perSession, maxSessionPairBytes)
	require.LessOrEqual(t, perSession, float64(maxSessionPairBytes), "idle session pair memory")

	before = heapstat.Live()
	opened := make([][]*Stream, sessions)
	accepted := make([][]*Stream, sessions)
	for i, p := range pairs {
		opened[i], accepted[i] = openAccepted(t, p.client, p.server, streams)
	}
	perStream := float64(heapstat.Live()-before) / float64(sessions*streams)
	t.Logf("%d x %d idle streams: %.0f B of heap per stream, both ends", sessions, streams, perStream)
	require.LessOrEqual(t, perStream, float64(maxIdleStreamBytes), "idle stream memory")

	start := time.Now()
	var wg sync.WaitGroup
	for i := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			echoAll(t, opened[i], accepted[i], 1024)
		}()
	}
	wg.Wait()
	t.Logf("%d x %d concurrent 1 KiB echoes in %v", sessions, streams, time.Since(start))
	for _, p := range pairs {
		require.Eventually(t, func() bool { return p.client.NumStreams() == 0 && p.server.NumStreams() == 0 }, eventually, time.Millisecond)
		require.NoError(t, p.client.Close())
		require.NoError(t, p.server.Close())
	}
}

// Promise: a session pair that moved bulk data and then went idle holds
// no 32 KiB read buffer (maxIdleAfterBulkPairBytes): a read loop that saw
// the end of a bulk flow does not wait for the next frame in it (the
// stream's end releases it: readbuf.go). Two ends of a flow: an echo
// whose streams end with both FINs read, and a request of known length
// whose reader closes its stream once it has the bytes, so that the
// sender's FIN comes for a stream no longer in the table. Over TCP,
// keep-alive off (a keep-alive's ping would release the buffer within
// KeepAliveInterval; with it off nothing else arrives). Fails without the
// release at a stream's end: 70 KB per pair, both read buffers held; and
// without it for a FIN of a stream closed first, 34-44 KB.
func TestScaleIdleAfterBulk(t *testing.T) {
	const bulk = 1 << 20
	sessions := 100
	if race.WithRace() {
		sessions = 20 // the echoes are slow under the detector
	}
	flows := []struct {
		name string
		move func(t *testing.T, client, server *Session)
	}{
		{"echo", func(t *testing.T, client, server *Session) {
			opened, accepted := openAccepted(t, client, server, 1)
			echoAll(t, opened, accepted, bulk)
		}},
		{"closed before the peer's FIN", func(t *testing.T, client, server *Session) {
			opened, accepted := openAccepted(t, client, server, 1)
			sendClosedFirst(t, opened[0], accepted[0], bulk)
		}},
	}
	for _, flow := range flows {
		t.Run(flow.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DisableKeepAlive = true
			pairs, before := tcpSessionPairs(t, sessions, cfg)
			for _, p := range pairs {
				flow.move(t, p.client, p.server)
				require.Eventually(t, func() bool {
					return p.client.NumStreams() == 0 && p.server.NumStreams() == 0 && p.client.RTT() != 0 && p.server.RTT() != 0
				}, eventually, time.Millisecond)
			}
			// Idle for a while: grown windows shrink and the session drops its
			// set of grown streams and the shrink timer (path.go).
			time.Sleep(2*shrinkAfter + shrinkAfter/2)

			perPair := float64(int64(heapstat.Live())-int64(before)) / float64(sessions)
			t.Logf("%d session pairs idle after %d bytes (%s): %.0f B of heap per pair (bound %d)", sessions, bulk, flow.name, perPair, maxIdleAfterBulkPairBytes)
			require.LessOrEqual(t, perPair, float64(maxIdleAfterBulkPairBytes), "idle session pair memory after bulk")
		})
	}
}

// sendClosedFirst moves size bytes from opened to accepted as a request
// of known length: accepted reads exactly size bytes and closes its
// stream, and opened closes its own only once it has read accepted's FIN,
// so that its FIN reaches accepted's session after the stream left the
// table.
func sendClosedFirst(t *testing.T, opened, accepted *Stream, size int) {
	t.Helper()
	payload := faultPayload(uint64(opened.ID()), 0, size)
	werr := make(chan error, 1)
	go func() {
		_, err := opened.Write(payload)
		if err == nil {
			_, err = io.Copy(io.Discard, opened) // until accepted's FIN
		}
		if err == nil {
			err = opened.Close()
		}
		werr <- err
	}()
	got := make([]byte, size)
	_, err := io.ReadFull(accepted, got)
	require.NoError(t, err)
	require.Equal(t, payload, got, "the request's bytes")
	require.NoError(t, accepted.Close())
	require.NoError(t, <-werr)
}

// Promise: 10,000 idle session pairs in one process, each of which moved
// a stream's bytes once, cost at most maxSessionPairBytes of heap and
// maxSessionPairGoroutines goroutines each, and all still work. The
// pairs run over net.Pipe: 10,000 loopback TCP pairs would need more
// file descriptors than these machines allow (20,000);
// TestScaleManySessions measures the same over TCP with 100.
func TestScaleIdleSessions(t *testing.T) {
	n := idleSessionCount()
	pairs := make([]scalePair, n)
	goroutines := runtime.NumGoroutine()
	before := heapstat.Live()
	for i := range pairs {
		// No t.Cleanup: the sessions are closed below, and must be
		// garbage when the test ends (the next test measures the heap).
		c1, c2 := net.Pipe()
		var err error
		pairs[i].client, err = Client(c1, nil)
		require.NoError(t, err)
		pairs[i].server, err = Server(c2, nil)
		require.NoError(t, err)
	}
	defer func() {
		for _, p := range pairs {
			p.client.Close()
			p.server.Close()
		}
	}()
	for _, p := range pairs {
		useOneStream(t, p.client, p.server)
	}
	perPair := float64(int64(heapstat.Live())-int64(before)) / float64(n)
	// The goroutines once the transient ones are gone: a timer's function
	// runs on a goroutine of its own for a moment (an earlier test's
	// sessions' timers too), and CI once counted 4,001 for 1,000 pairs.
	// A goroutine that stays is counted.
	perPairG := func() float64 { return float64(runtime.NumGoroutine()-goroutines) / float64(n) }
	for settle := time.Now().Add(goroutineSettle); perPairG() > maxSessionPairGoroutines && time.Now().Before(settle); {
		time.Sleep(goroutinePoll)
	}
	t.Logf("%d idle session pairs (one stream used each): %.0f B of heap per pair (bound %d), %.3f goroutines per pair (bound %d)",
		n, perPair, maxSessionPairBytes, perPairG(), maxSessionPairGoroutines)
	require.LessOrEqual(t, perPair, float64(maxSessionPairBytes), "idle session pair memory")
	if perPairG() > maxSessionPairGoroutines {
		t.Logf("the goroutines beyond the bound are among these:\n%s", goroutineStacks())
	}
	require.LessOrEqual(t, perPairG(), float64(maxSessionPairGoroutines), "idle session pair goroutines")
	// Still working: a ping each way on every pair.
	for _, p := range pairs {
		_, err := p.client.Ping()
		require.NoError(t, err)
		_, err = p.server.Ping()
		require.NoError(t, err)
	}
	for _, p := range pairs {
		require.NoError(t, p.client.Close())
		require.NoError(t, p.server.Close())
	}
}

// Promise: streams writing at once share the connection fairly: over a
// fixed time, the slowest gets at least minFairShare of the mean.
func TestScaleFairness(t *testing.T) {
	const (
		streams = 16
		warmUp  = 200 * time.Millisecond
		measure = time.Second
	)
	slow := func(testing.TB) (net.Conn, net.Conn) {
		return slowconn.Pipe(slowconn.Link{Bandwidth: 100e6, Latency: time.Millisecond})
	}
	cases := []struct {
		name  string
		pair  func(testing.TB) (net.Conn, net.Conn)
		sizes []int // Write sizes, assigned round-robin to the streams
	}{
		// A link is the bottleneck: the writer decides who goes.
		{"slowconn-100Mbit/equal-writes", slow, []int{16 * 1024}},
		{"slowconn-100Mbit/equal-small-writes", slow, []int{1024}},
		// Large writes must not starve small ones, nor the reverse.
		{"slowconn-100Mbit/mixed-writes", slow, []int{1024, 1 << 20, 100, 64 * 1024}},
		// Only links: on loopback TCP the CPU is the bottleneck, and a
		// stream's share is then set by how often the scheduler runs its
		// writing goroutine, not by the muxer. That case failed 8 of 10
		// runs with two cores busy (the 4 KiB writers got 32-45 % of the
		// mean), so it is not a test: the benchmarks measure loopback.
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c1, c2 := c.pair(t)
			client, server := sessionPairOver(t, c1, c2, nil)
			var got [streams]atomic.Int64
			var wg sync.WaitGroup
			for i := range streams {
				st, err := client.OpenStream(context.Background())
				require.NoError(t, err)
				peer, err := acceptFrom(server, st.ID())
				require.NoError(t, err)
				wg.Add(2)
				go func() {
					defer wg.Done()
					buf := make([]byte, c.sizes[i%len(c.sizes)])
					for {
						if _, err := st.Write(buf); err != nil {
							return
						}
					}
				}()
				go func() {
					defer wg.Done()
					buf := make([]byte, 32*1024)
					for {
						n, err := peer.Read(buf)
						got[i].Add(int64(n))
						if err != nil {
							return
						}
					}
				}()
			}
			time.Sleep(warmUp)
			var start [streams]int64
			for i := range got {
				start[i] = got[i].Load()
			}
			time.Sleep(measure)
			deltas := make([]float64, streams)
			var sum float64
			for i := range got {
				deltas[i] = float64(got[i].Load() - start[i])
				sum += deltas[i]
			}
			// Stop: closing the sessions fails every Write and Read.
			require.NoError(t, client.Close())
			require.NoError(t, server.Close())
			wg.Wait()

			mean := sum / streams
			least := slices.Min(deltas)
			t.Logf("%d streams, %.1f MB/s in all; per stream: mean %.0f B, slowest %.0f B (%.0f %% of the mean), fastest %.0f B",
				streams, sum/measure.Seconds()/1e6, mean, least, 100*least/mean, slices.Max(deltas))
			if least < minFairShare*mean {
				for i, d := range deltas {
					t.Logf("stream %d (writes of %d B): %.0f B", i, c.sizes[i%len(c.sizes)], d)
				}
			}
			require.Positive(t, mean)
			require.GreaterOrEqual(t, least, minFairShare*mean, "the slowest stream got %.0f %% of the mean", 100*least/mean)
		})
	}
}

// goroutineStacks is every goroutine's stack, those with the same stack
// grouped under their count (runtime/pprof's debug=1 form), for a failure
// message to show which goroutine stayed.
func goroutineStacks() string {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return "goroutine profile: " + err.Error()
	}
	return b.String()
}
