package slowdown

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/slowconn"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The ideal is the payload at the link's goodput plus one latency.
func TestIdeal(t *testing.T) {
	link := slowconn.Link{Bandwidth: 8e6, Latency: 10 * time.Millisecond} // 1 MB/s raw
	// 1460 payload bytes per 1500-byte packet: goodput 973,333 B/s.
	got := Ideal(link, 973_333)
	if d := got - 1010*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
		t.Fatalf("Ideal = %v, want 1.01 s", got)
	}
	if got := Ideal(slowconn.Unlimited(), 1<<30); got != 0 {
		t.Fatalf("Ideal on an unlimited link = %v, want 0", got)
	}
}

// Every contender sees the same messages: sizes depend only on the
// workload.
func TestWorkloadSizesFixed(t *testing.T) {
	w := SmallPackets(10)
	a, b := w.sizes(), w.sizes()
	var n int64
	for i := range a {
		for j := range a[i] {
			if a[i][j] != b[i][j] || a[i][j] < w.MinSize || a[i][j] > w.MaxSize {
				t.Fatalf("size [%d][%d]: %d vs %d", i, j, a[i][j], b[i][j])
			}
			n += int64(a[i][j])
		}
	}
	if n != w.Payload() {
		t.Fatalf("Payload %d, sizes sum to %d", w.Payload(), n)
	}
}

// Raw and Mux deliver the whole workload and count conn writes: one per
// message for raw, far fewer for coalesced braid.
func TestRawAndMux(t *testing.T) {
	link := slowconn.Link{Bandwidth: 100e6, Latency: time.Millisecond}
	w := TinyPackets(20)
	raw, err := Raw(link, w)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Writes != uint64(w.Streams*w.Messages) {
		t.Fatalf("raw writes %d, want one per message (%d)", raw.Writes, w.Streams*w.Messages)
	}
	mux, err := Mux(link, contenders.Braid(true), w)
	if err != nil {
		t.Fatal(err)
	}
	if mux.Time <= 0 || mux.Writes == 0 || mux.Writes >= raw.Writes {
		t.Fatalf("braid: %v, %d writes (raw %d)", mux.Time, mux.Writes, raw.Writes)
	}
}

// Beside bulk neighbours the round trips go on until the neighbours have
// moved BulkMeasured bytes, so that the bulk rate is a rate even when the
// round trips alone are over before a bulk reader runs: raw TCP, where
// the ping has a connection of its own, with one round trip asked for.
func TestPingPongLoadMeasuresBulk(t *testing.T) {
	for _, c := range []contenders.Contender{contenders.RawTCP(), contenders.Braid(true)} {
		r, err := PingPongLoad(t.Context(), c, 1, 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if r.Bulk < BulkMeasured || !(r.BulkMBps() > 0) {
			t.Errorf("%s: bulk %d bytes (%.1f MB/s) over %d round trips, want at least %d bytes",
				c.Name, r.Bulk, r.BulkMBps(), len(r.RTTs), BulkMeasured)
		}
	}
}

// PingPongHost has an Accept waiting on both sessions through its round
// trips, and still measures them.
func TestPingPongHostAccepts(t *testing.T) {
	var client, server acceptCounter
	c := contenders.Braid(true)
	newPair := c.New
	c.New = func(c1, c2 net.Conn) (contenders.Session, contenders.Session, error) {
		cs, ss, err := newPair(c1, c2)
		client.Session, server.Session = cs, ss
		return &client, &server, err
	}
	r, err := PingPongHost(t.Context(), c, 20, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTTs) != 20 {
		t.Errorf("%d round trips, want 20", len(r.RTTs))
	}
	if client.calls.Load() == 0 || server.calls.Load() == 0 {
		t.Errorf("Accept calls: client %d, server %d; want an Accept waiting on each", client.calls.Load(), server.calls.Load())
	}
}

// acceptCounter is a contenders.Session that counts its Accept calls.
type acceptCounter struct {
	contenders.Session
	calls atomic.Int32
}

func (a *acceptCounter) Accept() (contenders.Stream, error) {
	a.calls.Add(1)
	return a.Session.Accept()
}

// Percentile and Mean of a bursty set of round trips: many fast ones and
// a few slow ones give a low p50 and a mean that counts the slow ones.
func TestPercentileAndMean(t *testing.T) {
	if Percentile(nil, 50) != 0 || Mean(nil) != 0 {
		t.Fatal("Percentile and Mean of no round trips must be 0")
	}
	rtts := make([]time.Duration, 0, 100)
	for range 90 {
		rtts = append(rtts, 100*time.Microsecond)
	}
	for range 10 {
		rtts = append(rtts, 1000*time.Microsecond)
	}
	if got := Percentile(rtts, 50); got != 100*time.Microsecond {
		t.Errorf("p50 = %v, want 100µs", got)
	}
	if got := Percentile(rtts, 99); got != 1000*time.Microsecond {
		t.Errorf("p99 = %v, want 1ms", got)
	}
	if got := Mean(rtts); got != 190*time.Microsecond {
		t.Errorf("mean = %v, want 190µs", got)
	}
}

// PingPongSpaced's pauses are the same on every call, within [0, 2*mean)
// and about mean on average, and the run takes them: its round trips
// take at least the pauses before them (on an idle session, which makes
// exactly the round trips asked for: 20 of them take well under a
// millisecond without the pauses' ~20 ms).
func TestPingPongSpacedPauses(t *testing.T) {
	const n, mean = 1000, time.Millisecond
	a, b := spacedGaps(mean), spacedGaps(mean)
	var sum time.Duration
	for i := range n {
		g := a()
		if g != b() {
			t.Fatalf("pause %d differs between two sequences", i)
		}
		if g < 0 || g >= 2*mean {
			t.Fatalf("pause %d is %v, want within [0, %v)", i, g, 2*mean)
		}
		sum += g
	}
	if avg := sum / n; avg < mean*9/10 || avg > mean*11/10 {
		t.Errorf("mean pause %v, want within 10%% of %v", avg, mean)
	}

	const rounds = 20
	var want time.Duration
	gaps := spacedGaps(mean)
	for range rounds {
		want += gaps()
	}
	r, err := PingPongSpaced(t.Context(), contenders.Braid(true), rounds, 0, mean, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTTs) < rounds || r.Duration < want {
		t.Errorf("%d round trips in %v, want at least %d after pauses of %v", len(r.RTTs), r.Duration, rounds, want)
	}
}
