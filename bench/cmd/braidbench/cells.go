package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
)

// metric is one figure a measurement produces.
type metric struct {
	Key    string `json:"key"`
	Unit   string `json:"unit"`
	Higher bool   `json:"higher_is_better"`
}

// sample is one measurement's figures, by metric key.
type sample map[string]float64

// measureFunc measures contender e once. round numbers the rounds from 0,
// to seed a link's jitter and loss: every contender of a round sees the
// same link. When ctx is done the measurement should return soon.
type measureFunc func(ctx context.Context, e entry, round int) (sample, error)

// cell is one workload with its parameters: one row group of the report.
type cell struct {
	ID       string            `json:"id"`
	Workload string            `json:"workload"`
	Groups   []string          `json:"groups"` // the -only names that select it
	Title    string            `json:"title"`
	Params   map[string]string `json:"params"`
	Metrics  []metric          `json:"metrics"`
	// Procs is the GOMAXPROCS the cell runs at; 0 leaves it.
	Procs int `json:"gomaxprocs,omitempty"`
	// Side runs the contenders side by side, each on its own simulated
	// link: for workloads the link's latency bounds, not the CPU.
	Side    bool   `json:"side_by_side,omitempty"`
	Note    string `json:"note,omitempty"`
	measure measureFunc
	// na says why a contender does not apply, or "".
	na func(e entry) string
	// start, if set, prepares what measure needs before the first round
	// (an error fails the cell for every contender); stop, if set, undoes
	// it after the last. Cells may share them: both must be idempotent.
	start func(context.Context) error
	stop  func()
}

// Workload names, as -only takes them.
const (
	wBulk     = "bulk"
	wSmall    = "small"
	wPing     = "pingpong"
	wIdle     = "idle"
	wSlowdown = "slowdown"
	wPackets  = "packets"
	wChunks   = "chunks"
	wNotify   = "notify"
	wHosts    = "hosts" // the -only name of the host rows
	// The host rows' workloads.
	wHostChunks = "host-chunks"
	wHostNotify = "host-notify"
	wHostPing   = "host-ping"
	// wPingSpaced is the ping beside bulk streams at random moments
	// (slowdown.PingPongSpaced), a workload of the pingpong rows.
	wPingSpaced = "ping-spaced"
	// wPingLink is the ping beside bulk streams over a simulated link
	// (slowdown.PingPongLink), a workload of the pingpong rows.
	wPingLink = "ping-link"
	// wRPC is the request-response pattern, a new stream per call
	// (slowdown.StreamRPC).
	wRPC = "rpc"
)

// workloadNames lists the workloads in report order.
func workloadNames() []string {
	return []string{wBulk, wSmall, wPing, wRPC, wIdle, wSlowdown, wPackets, wChunks, wNotify, wHosts}
}

// Metric keys.
const (
	mMBps      = "MB/s"
	mMsgps     = "msgs/s"
	mWritesMsg = "writes/msg"
	mP50       = "p50 µs"
	mP99       = "p99 µs"
	mHeap      = "B/stream"
	mTime      = "ms"
	mTimeOp    = "ms/op"
	mBytesOp   = "B/op"
	mAllocsOp  = "allocs/op"
	mTimeMsg   = "µs/msg"
	mBulkMBps  = "bulk MB/s"
	mCallsps   = "calls/s"
)

// buildCells returns the cells opts asks for, in report order.
func buildCells(opts options) []cell {
	p := opts.Plan
	var cells []cell
	add := func(c cell) {
		if i := slices.IndexFunc(cells, func(x cell) bool { return x.ID == c.ID }); i >= 0 {
			cells[i].Groups = append(cells[i].Groups, c.Groups...)
			return
		}
		cells = append(cells, c)
	}
	transports := []transport{tcpTransport(), tlsTransport()}
	for _, t := range transports {
		for _, procs := range p.LoopProcs {
			add(bulkCell(p, t, procs))
		}
	}
	for _, t := range transports {
		for _, procs := range p.LoopProcs {
			add(smallCell(p, t, procs))
		}
	}
	for _, neighbours := range []int{0, p.PingNeighbours} {
		for _, t := range transports {
			for _, procs := range p.LoopProcs {
				add(pingCell(p, neighbours, t, procs))
			}
		}
	}
	for _, t := range transports {
		for _, procs := range p.LoopProcs {
			add(acceptingPingCell(p, t, procs))
		}
	}
	for _, t := range transports {
		for _, procs := range p.LoopProcs {
			add(spacedPingCell(p, t, procs))
		}
	}
	for _, name := range p.PingLinks {
		add(linkPingCell(p, name))
	}
	for _, t := range transports {
		for _, procs := range p.LoopProcs {
			for _, callers := range p.RPCCallers {
				add(rpcCell(p, t, procs, callers))
			}
		}
	}
	add(idleCell(p))
	for _, name := range opts.Links {
		link, _ := linkByName(name)
		for _, procs := range opts.CPUs {
			add(packetsCell(wSlowdown, slowdown.SmallPackets(1), name, link, procs, p.LinkWork, false))
		}
	}
	for _, procs := range opts.CPUs {
		for _, w := range []slowdown.Workload{slowdown.SmallPackets(1), slowdown.LinearPackets(1)} {
			add(packetsCell(wPackets, w, "100kbit/s-30ms", slowLink(), procs, p.SlowLinkWork, true))
			add(packetsCell(wPackets, w, "Broadband", slowconn.Broadband(), procs, p.LinkWork, false))
		}
	}
	for _, lat := range []bool{false, true} {
		for _, n := range p.ChunkCounts {
			for _, batched := range []bool{false, true} {
				add(chunkCell(p, n, batched, lat))
			}
		}
	}
	for _, t := range transports {
		for _, r := range p.Notify {
			for _, procs := range p.LoopProcs {
				add(notifyCell(r.Count, r.Size, t, procs))
			}
		}
	}
	for _, c := range hostCells(opts) {
		add(c)
	}
	return selectCells(cells, opts.Only)
}

// selectCells keeps the cells of the workloads named in only; with no
// workload named, all.
func selectCells(cells []cell, only []string) []cell {
	var want []string
	for _, o := range only {
		if slices.Contains(workloadNames(), o) {
			want = append(want, o)
		}
	}
	if len(want) == 0 {
		return cells
	}
	var out []cell
	for _, c := range cells {
		for _, g := range c.Groups {
			if slices.Contains(want, g) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// selectEntries keeps the contenders named in only; with none named, all.
// The references (raw TCP and go-yamux) stay: every ratio needs them.
func selectEntries(only []string) []entry {
	all := allEntries()
	var named bool
	for _, o := range only {
		named = named || slices.Contains(contenderNames(), o)
	}
	if !named {
		return all
	}
	var out []entry
	for _, e := range all {
		if e.Name == rawName || e.Name == yamuxName || slices.Contains(only, e.Name) {
			out = append(out, e)
		}
	}
	return out
}

// unlimitedMessages sizes a packets workload on a link without a bandwidth
// limit, where no link time can size it.
const unlimitedMessages = 50

// maxPacketStreams is the stream count of go-mplex's packet benchmarks.
const maxPacketStreams = 100

// packetsCell is w (SmallPackets or LinearPackets) on link at GOMAXPROCS
// procs, sized to about work of link time: the slowdown against one raw
// conn that writes every message itself. On a link too slow for one message
// per stream within work, the stream count shrinks.
func packetsCell(group string, w slowdown.Workload, linkName string, link slowconn.Link, procs int, work time.Duration, side bool) cell {
	avg := float64(w.MinSize+w.MaxSize) / 2
	g := link.Goodput()
	switch {
	case math.IsInf(g, 1):
		w.Messages = unlimitedMessages
	default:
		budget := g * work.Seconds()
		if budget < avg*float64(w.Streams) {
			w.Streams = max(1, min(maxPacketStreams, int(budget/avg)))
			w.Messages = 1
		} else {
			w.Messages = max(1, int(budget/avg/float64(w.Streams)))
		}
	}
	params := map[string]string{
		"link": linkName, "gomaxprocs": strconv.Itoa(procs),
		"streams": strconv.Itoa(w.Streams), "messages": strconv.Itoa(w.Messages),
		"payload": strconv.FormatInt(w.Payload(), 10),
	}
	c := cell{
		ID:       fmt.Sprintf("%s/%s/p%d", w.Name, linkName, procs),
		Workload: w.Name,
		Groups:   []string{group},
		Title: fmt.Sprintf("%s on %s (%s), GOMAXPROCS %d: %d streams x %d msgs of %d-%d B",
			w.Name, linkName, describeLink(link), procs, w.Streams, w.Messages, w.MinSize, w.MaxSize),
		Params:  params,
		Metrics: []metric{{Key: mTime, Unit: "ms"}, {Key: mWritesMsg, Unit: "writes"}},
		Procs:   procs,
		Side:    side,
		Note:    "tcp is the network-bound limit: one raw conn over the same link, one write per message; slowdown = T/T(tcp) - 1.",
	}
	msgs := float64(w.Streams * w.Messages)
	c.measure = func(ctx context.Context, e entry, round int) (sample, error) {
		l := link
		l.Seed = int64(round + 1)
		var r slowdown.Result
		var err error
		if e.raw {
			r, err = slowdown.Raw(l, w)
		} else {
			r, err = slowdown.Mux(l, e.c, w)
		}
		if err != nil {
			return nil, err
		}
		return sample{mTime: ms(r.Time), mWritesMsg: float64(r.Writes) / msgs}, nil
	}
	return c
}

// describeLink is a short description of a link.
func describeLink(l slowconn.Link) string {
	s := "unlimited"
	if l.Bandwidth > 0 {
		s = formatBits(float64(l.Bandwidth))
	}
	s += ", " + l.Latency.String() + " one way"
	if l.Jitter > 0 {
		s += fmt.Sprintf(", jitter %v", l.Jitter)
	}
	if l.Loss > 0 {
		s += fmt.Sprintf(", loss %.1f%%", 100*l.Loss)
	}
	switch b := l.SendBuffer; {
	case b >= 1<<20 && b%(1<<20) == 0:
		s += fmt.Sprintf(", a %d MiB buffer", b>>20)
	case b > 0:
		s += fmt.Sprintf(", a %d B buffer", b)
	}
	return s
}

// formatBits formats a bit rate.
func formatBits(b float64) string {
	switch {
	case b >= 1e9:
		return strconv.FormatFloat(b/1e9, 'f', -1, 64) + " Gbit/s"
	case b >= 1e6:
		return strconv.FormatFloat(b/1e6, 'f', -1, 64) + " Mbit/s"
	default:
		return strconv.FormatFloat(b/1e3, 'f', -1, 64) + " kbit/s"
	}
}
