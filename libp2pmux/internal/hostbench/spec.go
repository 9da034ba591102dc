// Package hostbench runs braidbench's seed scenarios where their authors
// ran them, and a ping-pong: between two real go-libp2p hosts in one
// process, over TCP and noise or TLS, on loopback or through a shaped
// link. It compares braid's
// libp2pmux with go-libp2p's stock yamux, and both with a raw TCP
// connection that carries the same messages without libp2p.
//
// The package lives in the libp2pmux module because it imports go-libp2p;
// braidbench (in the bench module, which must not) runs it as a separate
// program, cmd/hostbench, and reads its result.
package hostbench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/braidmux/braid/internal/appframe"
	"github.com/braidmux/braid/slowconn"
)

// Muxer names the stream multiplexer a host pair uses.
type Muxer string

// The muxers a Spec can name.
const (
	// Braid is libp2pmux.DefaultTransport: braid with coalescing on.
	Braid Muxer = "braid"
	// BraidNoCoalesce is braid with write coalescing off.
	BraidNoCoalesce Muxer = "braid-nocoalesce"
	// Yamux is go-libp2p's default muxer, yamux.DefaultTransport.
	Yamux Muxer = "yamux"
	// RawTCP is no libp2p at all: a TCP connection per stream carrying
	// the same messages, unencrypted. It is the limit.
	RawTCP Muxer = "tcp"
)

// Muxers lists every Muxer.
func Muxers() []Muxer { return []Muxer{RawTCP, Braid, BraidNoCoalesce, Yamux} }

// Scenario names a workload.
type Scenario string

// The scenarios.
const (
	// Chunks is Swarm bee's pullsync delivery (seeds 000 and 001): per op
	// the client opens a stream and sends Get, the server answers with an
	// Offer of N chunk addresses, the client sends Want, and the server
	// delivers N chunks of 4 KiB, one message per chunk or batched 25 per
	// message.
	Chunks Scenario = "chunks"
	// Notify is Polkadot's notifications with backpressure (seed 002):
	// Count messages of Size bytes written at once on one stream.
	Notify Scenario = "notify"
	// Ping is request-response on one stream: Warmup untimed and then
	// Count timed round trips of Size bytes each way, the client waiting
	// for each echo before the next. A host's stream handler and its
	// accept loop run throughout, as they do in every host. With Bulk,
	// that many more streams send bulk data to the server all the while
	// (a transfer beside the host's small protocols).
	Ping Scenario = "ping"
)

// Security names the security protocol of the hosts' connection.
type Security string

// The securities; the zero Security is Noise.
const (
	// Noise is go-libp2p's noise (p2p/security/noise).
	Noise Security = "noise"
	// TLS is go-libp2p's TLS 1.3 (p2p/security/tls), which go-libp2p
	// hosts offer first: two of them settle on it.
	TLS Security = "tls"
)

// Spec is one measurement.
type Spec struct {
	Scenario Scenario
	Muxer    Muxer
	// Link shapes both directions between the hosts; the zero Link is
	// plain loopback.
	Link slowconn.Link
	// Chunks: chunks per op, batched delivery, untimed and timed ops.
	N       int
	Batched bool
	Warmup  int
	Ops     int
	// Notify: messages and their size. Ping: timed round trips and the
	// bytes each way (Warmup: untimed round trips first); with Bulk, the
	// timed round trips go on past Count until minBulkWindow has passed.
	Count int
	Size  int
	// Bulk is the ping's bulk streams: each writes BulkMessage bytes at
	// a time to the server, which discards them, from before the first
	// round trip (once as many messages as streams were written) to
	// after the last.
	Bulk int
	// Security is the hosts' security (RawTCP has none); "" is Noise.
	Security Security
}

// Result is what one measurement took: wall time of the timed work, and
// the heap allocations of the whole process (both hosts) meanwhile.
type Result struct {
	Elapsed time.Duration `json:"elapsed_ns"`
	// Ops is the timed ops (Chunks), messages (Notify) or round trips
	// (Ping).
	Ops        int    `json:"ops"`
	AllocBytes uint64 `json:"alloc_bytes"`
	Allocs     uint64 `json:"allocs"`
	// P50 and P99 are the round trips' median and 99th percentile
	// (Ping only).
	P50 time.Duration `json:"p50_ns,omitempty"`
	P99 time.Duration `json:"p99_ns,omitempty"`
	// BulkBytes is what the ping's bulk streams wrote during the timed
	// round trips: over Elapsed, their throughput beside the ping.
	BulkBytes int64 `json:"bulk_bytes,omitempty"`
}

// minBulkWindow is the least time the timed round trips of a ping with
// bulk streams beside it last. The bulk's rate is what its writers
// completed in that window, a BulkMessage at a time, and a window of a few
// round trips measures scheduling, not a rate: braidbench's quick run, 50
// round trips of raw TCP (~20 µs each), once measured no bulk write
// completed at all. Two of the Go scheduler's 10 ms time slices give every
// runnable writer a turn.
const minBulkWindow = 20 * time.Millisecond

// BulkMessage is the size of a bulk stream's writes, as in the bench
// module's BenchmarkPingPong beside bulk streams (a quarter of yamux's
// initial stream window).
const BulkMessage = 64 << 10

// Limits of a Spec, so that a mistyped flag is an error rather than a
// run that never ends.
const (
	maxChunks   = 10000
	maxOps      = 100000
	maxMessages = 1000000
	maxMsgSize  = appframe.MaxSize
	maxPingSize = 64 << 10
	maxBulk     = 64
)

// ErrSpec is the error of an invalid Spec.
var ErrSpec = errors.New("hostbench: invalid spec")

// Validate checks s.
func (s Spec) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrSpec, fmt.Sprintf(f, a...)) }
	switch s.Muxer {
	case Braid, BraidNoCoalesce, Yamux, RawTCP:
	default:
		return bad("unknown muxer %q", s.Muxer)
	}
	switch s.Security {
	case "", Noise, TLS:
	default:
		return bad("unknown security %q", s.Security)
	}
	if s.Link.Bandwidth < 0 || s.Link.Latency < 0 || s.Link.Jitter < 0 || s.Link.Loss < 0 || s.Link.Loss >= 1 {
		return bad("link %+v", s.Link)
	}
	switch s.Scenario {
	case Chunks:
		if s.N < 1 || s.N > maxChunks || s.Ops < 1 || s.Ops > maxOps || s.Warmup < 0 || s.Warmup > maxOps {
			return bad("chunks needs 1 <= n <= %d, 1 <= ops <= %d, 0 <= warmup <= %d", maxChunks, maxOps, maxOps)
		}
	case Notify:
		if s.Count < 1 || s.Count > maxMessages || s.Size < 1 || s.Size > maxMsgSize {
			return bad("notify needs 1 <= count <= %d, 1 <= size <= %d", maxMessages, maxMsgSize)
		}
	case Ping:
		if s.Count < 1 || s.Count > maxMessages || s.Size < 1 || s.Size > maxPingSize || s.Warmup < 0 || s.Warmup > maxMessages || s.Bulk < 0 || s.Bulk > maxBulk {
			return bad("ping needs 1 <= count <= %d, 1 <= size <= %d, 0 <= warmup <= %d, 0 <= bulk <= %d", maxMessages, maxPingSize, maxMessages, maxBulk)
		}
	default:
		return bad("unknown scenario %q", s.Scenario)
	}
	return nil
}

// shaped tells whether s runs through a link rather than plain loopback.
func (s Spec) shaped() bool { return s.Link != (slowconn.Link{}) }

// Run measures s once. Everything it starts has ended when it returns.
func Run(ctx context.Context, s Spec) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	switch s.Scenario {
	case Chunks:
		return runChunks(ctx, s)
	case Ping:
		return runPing(ctx, s)
	default:
		return runNotify(ctx, s)
	}
}

// measure runs f and returns its wall time and the process's heap
// allocations meanwhile.
func measure(ops int, f func() error) (Result, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	if err := f(); err != nil {
		return Result{}, err
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return Result{Elapsed: elapsed, Ops: ops,
		AllocBytes: after.TotalAlloc - before.TotalAlloc, Allocs: after.Mallocs - before.Mallocs}, nil
}
