package main

import (
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
)

// plan sizes every workload. The default plan makes the default run take
// about seven minutes on a small machine; the quick plan about 20 seconds.
type plan struct {
	BulkBytes      int64         `json:"bulk_bytes"`       // bytes of one bulk run
	SmallStreams   int           `json:"small_streams"`    // streams of the small-message run
	SmallPerStream int           `json:"small_per_stream"` // messages per stream
	SmallSize      int           `json:"small_size"`       // bytes per small message
	PingCount      int           `json:"ping_count"`       // round trips per ping-pong run
	PingMax        time.Duration `json:"ping_max_ns"`      // a ping-pong run stops after this long
	PingNeighbours int           `json:"ping_neighbours"`  // bulk streams beside the loaded ping-pong
	PingLinks      []string      `json:"ping_links"`       // links of the ping beside bulk over a link (measure_linkping.go)
	IdleStreams    int           `json:"idle_streams"`     // streams of the idle-memory run
	LinkWork       time.Duration `json:"link_work_ns"`     // link time of one slowdown run's payload
	SlowLinkWork   time.Duration `json:"slow_link_work_ns"`
	ChunkOps       int           `json:"chunk_ops"` // chunk-delivery ops per sample at 0 ms
	// Notify are the loopback notification runs (count messages of size
	// bytes): issue #12's own in the default plan.
	Notify []slowdown.NotifyRun `json:"notify"`
	// LoopProcs are the GOMAXPROCS the loopback cells that issue #12
	// judges run at (bulk, small messages, the ping-pong rows and the
	// notifications), each over TCP and over TLS: 1 and 2, as the issue
	// asks, in the default plan; 0 is the process's own.
	LoopProcs   []int `json:"loop_gomaxprocs"`
	ChunkCounts []int `json:"chunk_counts"`
	// The host rows (hostbench): chunks per op, whether the batched
	// variant runs over the link, the notification runs on loopback (the
	// issue's own counts in the default plan: at a tenth of them, a run
	// on a fresh connection between two hosts is mostly the first ~30
	// messages' warm-up, alike for both muxers), and the messages of the
	// notification run over the link.
	HostChunks          int                  `json:"host_chunks"`
	HostBatched         bool                 `json:"host_batched"`
	HostNotify          []slowdown.NotifyRun `json:"host_notify"`
	HostNotifyLinkCount int                  `json:"host_notify_link_count"`
	HostPings           int                  `json:"host_pings"`
	// The request-response rows (slowdown.StreamRPC): the calls of one
	// run, shared by its callers, and the callers at once of each row.
	RPCCalls   int   `json:"rpc_calls"`
	RPCCallers []int `json:"rpc_callers"`
}

// The published experiments' sizes.
const (
	chunkSize       = 4 * 1024 // a Swarm chunk
	chunkBatch      = 25       // chunks per batched delivery message
	chunkLatency    = 200 * time.Millisecond
	notifySmall     = 64 * 1024
	notifyLarge     = 256 * 1024
	slowLinkBits    = 100e3 // go-mplex's slow link: 100 kbit/s, 30 ms
	slowLinkLatency = 30 * time.Millisecond
)

// defaultSmallPerStream is the default plan's messages per stream of the
// small-message run: 100,000 messages in all, so that braid's run (~25 ms
// at 4 M msgs/s) outlasts its start. At 300 a stream it took 7-13 ms, and
// its rounds spread 1.8-3.7 M msgs/s over TLS at one P (session 28),
// against 3.0-4.6 M at 1,000 and 5.8 M in go test's runs of a million
// messages.
const defaultSmallPerStream = 1000

func defaultPlan() plan {
	return plan{
		BulkBytes:           128 << 20,
		SmallStreams:        100,
		SmallPerStream:      defaultSmallPerStream,
		SmallSize:           64,
		PingCount:           1000,
		PingMax:             500 * time.Millisecond,
		PingNeighbours:      10,
		PingLinks:           linkPingLinks(),
		IdleStreams:         10000,
		LinkWork:            60 * time.Millisecond,
		SlowLinkWork:        400 * time.Millisecond,
		ChunkOps:            defaultChunkOps,
		Notify:              slowdown.NotifyTargetRuns(),
		LoopProcs:           issueProcs(),
		ChunkCounts:         []int{25, 120},
		HostChunks:          120,
		HostBatched:         true,
		HostNotify:          slowdown.NotifyTargetRuns(),
		HostNotifyLinkCount: 100,
		HostPings:           2000,
		RPCCalls:            defaultRPCCalls,
		RPCCallers:          []int{1, 32},
	}
}

// defaultChunkOps is the default plan's chunk-delivery ops per sample on
// loopback: 50, 20-150 ms of one contender's. At 10 (4 ms of a 25-chunk
// op's) a sample was mostly its fresh session's first ops and the
// scheduler's moment: in session 33's default run the rounds of braid's
// 25 chunks batched spread 0.52-1.00 ms and go-yamux's 0.28-0.43, and a
// run of the chunk rows alone right after it measured 0.45-0.80 and
// 0.19-0.49.
const defaultChunkOps = 50

// defaultRPCCalls is the default plan's calls of a request-response run:
// 2,000, about 70 ms of braid's at one caller and 30 ms at 32, and half a
// second of the slowest contender's at one caller.
const defaultRPCCalls = 2000

// quickPlan is the default plan with smaller workloads.
func quickPlan() plan {
	p := defaultPlan()
	p.BulkBytes = 32 << 20
	p.SmallPerStream = 100
	p.PingCount = 300
	p.PingMax = 200 * time.Millisecond
	p.PingLinks = []string{"LAN"}
	p.LinkWork = 20 * time.Millisecond
	p.SlowLinkWork = 150 * time.Millisecond
	p.ChunkOps = 3
	p.Notify = []slowdown.NotifyRun{{Count: 50, Size: notifySmall}}
	p.LoopProcs = []int{0}
	p.HostBatched = false
	p.HostNotify = []slowdown.NotifyRun{{Count: 20, Size: notifySmall}}
	p.HostNotifyLinkCount = 20
	p.HostPings = 200
	p.RPCCalls = 100
	p.RPCCallers = []int{8}
	return p
}

// Link profiles.

// slowLink is go-mplex's slow benchmark link.
func slowLink() slowconn.Link {
	return slowconn.Link{Bandwidth: slowLinkBits, Latency: slowLinkLatency}
}

// chunkLink is the Swarm experiment's injected latency on a fast link.
func chunkLink() slowconn.Link {
	l := slowconn.LAN()
	l.Latency = chunkLatency
	return l
}

// linkByName finds a slowconn profile.
func linkByName(name string) (slowconn.Link, bool) {
	for _, p := range slowconn.Profiles() {
		if p.Name == name {
			return p.Link, true
		}
	}
	return slowconn.Link{}, false
}

// linkNames lists the slowconn profiles.
func linkNames() []string {
	var out []string
	for _, p := range slowconn.Profiles() {
		out = append(out, p.Name)
	}
	return out
}

// defaultLinks are the links of the slowdown workload.
func defaultLinks(quick bool) []string {
	if quick {
		return []string{"LAN", "Mobile"}
	}
	return []string{"LAN", "Broadband", "Mobile", "LongFat"}
}
