package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
)

// The host rows run the seed scenarios where their authors ran them,
// and a ping-pong: between two real go-libp2p hosts (TCP + noise, and
// TCP + TLS, which go-libp2p hosts negotiate first), braid's libp2pmux
// against go-libp2p's stock yamux. go-libp2p may only be imported by the
// libp2pmux module, so its command hostbench does the work: braidbench
// builds it once per run from the workspace and runs it once per
// measurement, each in a fresh process.

// hostPackage is the command that measures between two hosts.
const hostPackage = "github.com/braidmux/braid/libp2pmux/cmd/hostbench"

// hostContenders are the contenders a host row has, by braidbench name;
// hostbench names them the same.
func hostContenders() []string { return []string{rawName, "braid", "braid-nocoalesce", yamuxName} }

// hostRunner builds hostbench once and runs it. It is safe for concurrent
// use; start and stop are called by run, before and after the rounds.
type hostRunner struct {
	once sync.Once
	dir  string // temporary directory of the binary; removed by stop
	bin  string
	err  error // why the binary could not be built
}

// start builds hostbench, once.
func (h *hostRunner) start(ctx context.Context) error {
	h.once.Do(func() {
		h.dir, h.err = os.MkdirTemp("", "braidbench-hostbench-")
		if h.err != nil {
			return
		}
		h.bin = filepath.Join(h.dir, "hostbench")
		// The go command that runs braidbench: on PATH, or under
		// $GOROOT, which go run sets.
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		cmd := exec.CommandContext(ctx, goBin, "build", "-o", h.bin, hostPackage)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			h.err = fmt.Errorf("building %s (run braidbench inside the braid workspace, where go.work is): %v: %s",
				hostPackage, err, strings.TrimSpace(out.String()))
		}
	})
	return h.err
}

// stop removes the binary.
func (h *hostRunner) stop() {
	if h.dir != "" {
		os.RemoveAll(h.dir)
	}
}

// hostResult is hostbench's output.
type hostResult struct {
	Elapsed    time.Duration `json:"elapsed_ns"`
	Ops        int           `json:"ops"`
	AllocBytes uint64        `json:"alloc_bytes"`
	Allocs     uint64        `json:"allocs"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	BulkBytes  int64         `json:"bulk_bytes"`
}

// run runs hostbench with args for contender name.
func (h *hostRunner) run(ctx context.Context, name string, timeout time.Duration, args ...string) (hostResult, error) {
	if h.err != nil || h.bin == "" {
		return hostResult{}, errors.Join(errors.New("hostbench not built"), h.err)
	}
	args = append([]string{"-muxer", name, "-timeout", timeout.String()}, args...)
	cmd := exec.CommandContext(ctx, h.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return hostResult{}, ctxErr(ctx, fmt.Errorf("hostbench %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String())))
	}
	var r hostResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return hostResult{}, fmt.Errorf("hostbench output %q: %w", stdout.String(), err)
	}
	if r.Ops <= 0 || r.Elapsed <= 0 {
		return hostResult{}, fmt.Errorf("hostbench measured %+v", r)
	}
	return r, nil
}

// linkArgs are hostbench's flags for link l.
func linkArgs(l slowconn.Link) []string {
	return []string{"-bandwidth", strconv.FormatInt(l.Bandwidth, 10), "-latency", l.Latency.String(),
		"-jitter", l.Jitter.String(), "-loss", strconv.FormatFloat(l.Loss, 'g', -1, 64), "-seed", strconv.FormatInt(l.Seed, 10)}
}

// hostNA says why contender e has no host row.
func hostNA(e entry) string {
	for _, n := range hostContenders() {
		if e.Name == n {
			return ""
		}
	}
	return "the host rows compare go-libp2p's muxers: braid's libp2pmux and stock yamux"
}

// hostWhere describes the two hosts' connection.
const hostWhere = "two go-libp2p hosts, TCP + noise"

// The hosts' securities, as hostbench's -security names them.
const (
	hostNoise = "noise"
	hostTLS   = "tls"
)

// hostWhereOver describes the two hosts' connection over security sec.
func hostWhereOver(sec string) string {
	if sec == hostTLS {
		return "two go-libp2p hosts, TCP + TLS 1.3"
	}
	return hostWhere
}

// hostPingCell is the ping-pong between two hosts over security sec on
// loopback: p.HostPings round trips of slowdown.PingPongSize bytes on one
// stream, after a tenth as many untimed. Each host accepts streams
// throughout, as every host does; issue #12's idle ping target holds it
// to stock yamux. With bulk streams beside it (a transfer on the same
// connection), a quarter as many round trips, and #12's loaded target.
func hostPingCell(h *hostRunner, p plan, sec string, bulk int, timeout time.Duration) cell {
	count, id, beside := p.HostPings, "host/ping/"+sec, ""
	if bulk > 0 {
		count = max(p.HostPings/4, 1)
		id = fmt.Sprintf("host/ping/bulk=%d/%s", bulk, sec)
		beside = fmt.Sprintf(", beside %d streams writing %d KiB at a time", bulk, hostBulkMessage>>10)
	}
	c := cell{
		ID:       id,
		Workload: wHostPing, Groups: []string{wHosts, wPing},
		Title: fmt.Sprintf("Ping-pong between %s, loopback: %d round trips of %d B on one stream%s",
			hostWhereOver(sec), count, slowdown.PingPongSize, beside),
		Params:  map[string]string{"security": sec, "count": strconv.Itoa(count), "neighbours": strconv.Itoa(bulk)},
		Metrics: pingMetrics(bulk > 0),
		Note:    "tcp is one raw TCP connection, no libp2p, no security (and one more per bulk stream).",
		na:      hostNA,
		start:   h.start,
		stop:    h.stop,
	}
	args := []string{"-scenario", "ping", "-security", sec, "-count", strconv.Itoa(count),
		"-warmup", strconv.Itoa(count / 10), "-size", strconv.Itoa(slowdown.PingPongSize), "-bulk", strconv.Itoa(bulk)}
	c.measure = func(ctx context.Context, e entry, _ int) (sample, error) {
		r, err := h.run(ctx, e.Name, timeout, args...)
		if err != nil {
			return nil, err
		}
		s := sample{mP50: us(r.P50), mP99: us(r.P99)}
		if bulk > 0 {
			s[mBulkMBps] = float64(r.BulkBytes) / 1e6 / r.Elapsed.Seconds()
		}
		return s, nil
	}
	return c
}

// hostPingLoaded tells whether c is a host ping with bulk streams beside.
func hostPingLoaded(c *cellResult) bool {
	n := c.Params["neighbours"]
	return c.Workload == wHostPing && n != "" && n != "0"
}

// hostBulkMessage is hostbench's write size on a bulk stream
// (hostbench.BulkMessage, which the bench module can't import).
const hostBulkMessage = 64 << 10

// hostChunkCell is the chunk-delivery scenario between two hosts: on
// loopback (warmup and ops per sample) or over link, one op per sample
// on fresh hosts, the contenders side by side.
func hostChunkCell(h *hostRunner, p plan, n int, batched bool, link *slowconn.Link, timeout time.Duration) cell {
	mode := map[bool]string{false: "single", true: "batched"}[batched]
	lat, where := "0ms", hostWhere+", loopback"
	if link != nil {
		lat, where = link.Latency.String(), fmt.Sprintf("%s, through a simulated link (%s)", hostWhere, describeLink(*link))
	}
	c := cell{
		ID:       fmt.Sprintf("host/chunks/n=%d/%s/%s", n, mode, lat),
		Workload: wHostChunks, Groups: []string{wHosts, wChunks},
		Title: fmt.Sprintf("Chunk delivery (Swarm pullsync) between %s: Get/Offer/Want, then %d chunks of 4 KiB %s",
			where, n, map[bool]string{false: "one message per chunk", true: "batched 25 per message"}[batched]),
		Params: map[string]string{"n": strconv.Itoa(n), "mode": mode, "latency": lat},
		na:     hostNA,
		start:  h.start,
		stop:   h.stop,
	}
	args := []string{"-scenario", "chunks", "-n", strconv.Itoa(n), "-batched=" + strconv.FormatBool(batched)}
	if link != nil {
		c.Side = true
		c.Metrics = []metric{{Key: mTimeOp, Unit: "ms"}}
		c.Note = "One op per sample on fresh hosts, after their handshake and identify; the contenders run side by side, each through its own link. tcp is one raw TCP connection per op through the same link, no libp2p, no noise."
		c.measure = func(ctx context.Context, e entry, round int) (sample, error) {
			l := *link
			l.Seed = int64(round + 1)
			r, err := h.run(ctx, e.Name, timeout, append(append(args, "-ops", "1"), linkArgs(l)...)...)
			if err != nil {
				return nil, err
			}
			return sample{mTimeOp: ms(r.Elapsed) / float64(r.Ops)}, nil
		}
		return c
	}
	c.Metrics = []metric{{Key: mTimeOp, Unit: "ms"}, {Key: mBytesOp, Unit: "B"}, {Key: mAllocsOp, Unit: "allocs"}}
	c.Note = "B/op and allocs/op count the hostbench process (both hosts). tcp is one raw TCP connection per op, no libp2p, no noise."
	c.measure = func(ctx context.Context, e entry, _ int) (sample, error) {
		r, err := h.run(ctx, e.Name, timeout, append(args, "-warmup", strconv.Itoa(chunkWarmup), "-ops", strconv.Itoa(p.ChunkOps))...)
		if err != nil {
			return nil, err
		}
		k := float64(r.Ops)
		return sample{mTimeOp: ms(r.Elapsed) / k, mBytesOp: float64(r.AllocBytes) / k, mAllocsOp: float64(r.Allocs) / k}, nil
	}
	return c
}

// hostNotifyCell is the notification scenario between two hosts over
// security sec, on loopback or over link (the contenders side by side).
func hostNotifyCell(h *hostRunner, count, size int, sec, linkName string, link *slowconn.Link, timeout time.Duration) cell {
	where, linkID := hostWhereOver(sec)+", loopback", "loopback"
	if link != nil {
		where, linkID = fmt.Sprintf("%s, through the %s link (%s)", hostWhereOver(sec), linkName, describeLink(*link)), linkName
	}
	id := fmt.Sprintf("host/notify/%dKiB/%d/%s", size>>10, count, linkID)
	if sec != hostNoise {
		id += "/" + sec // the verdict names a cell whose ID says tls a TLS one
	}
	c := cell{
		ID:       id,
		Workload: wHostNotify, Groups: []string{wHosts, wNotify},
		Title:   fmt.Sprintf("Notifications with backpressure (Polkadot) between %s: %d messages of %d KiB at once on one stream", where, count, size>>10),
		Params:  map[string]string{"count": strconv.Itoa(count), "size": strconv.Itoa(size), "link": linkID, "security": sec},
		Metrics: []metric{{Key: mMsgps, Unit: "msgs/s", Higher: true}, {Key: mTimeMsg, Unit: "µs"}},
		Note:    "tcp is one raw TCP connection, no libp2p, no noise.",
		na:      hostNA,
		start:   h.start,
		stop:    h.stop,
	}
	args := []string{"-scenario", "notify", "-security", sec, "-count", strconv.Itoa(count), "-size", strconv.Itoa(size)}
	if link != nil {
		c.Side = true
	}
	c.measure = func(ctx context.Context, e entry, round int) (sample, error) {
		a := args
		if link != nil {
			l := *link
			l.Seed = int64(round + 1)
			a = append(append([]string(nil), args...), linkArgs(l)...)
		}
		r, err := h.run(ctx, e.Name, timeout, a...)
		if err != nil {
			return nil, err
		}
		return sample{mMsgps: float64(r.Ops) / r.Elapsed.Seconds(), mTimeMsg: us(r.Elapsed) / float64(r.Ops)}, nil
	}
	return c
}

// hostNotifyLink is the link of the host notification row over a link:
// a long fat path, where the window decides the rate (seed 002).
const hostNotifyLink = "LongFat"

// hostCells are the host rows of opts's plan, sharing one hostRunner.
func hostCells(opts options) []cell {
	p := opts.Plan
	if p.HostChunks == 0 && len(p.HostNotify) == 0 && p.HostNotifyLinkCount == 0 && p.HostPings == 0 {
		return nil
	}
	h := &hostRunner{}
	var out []cell
	link := chunkLink()
	batched := []bool{false}
	if p.HostBatched {
		batched = append(batched, true)
	}
	if p.HostChunks > 0 {
		// On loopback one message per chunk; over the link also batched,
		// the comparison of the seeds' 200 ms runs.
		out = append(out, hostChunkCell(h, p, p.HostChunks, false, nil, opts.Timeout))
		for _, b := range batched {
			out = append(out, hostChunkCell(h, p, p.HostChunks, b, &link, opts.Timeout))
		}
	}
	for _, sec := range []string{hostNoise, hostTLS} {
		for _, r := range p.HostNotify {
			out = append(out, hostNotifyCell(h, r.Count, r.Size, sec, "", nil, opts.Timeout))
		}
	}
	if p.HostNotifyLinkCount > 0 {
		lf, _ := linkByName(hostNotifyLink)
		out = append(out, hostNotifyCell(h, p.HostNotifyLinkCount, notifySmall, hostNoise, hostNotifyLink, &lf, opts.Timeout))
	}
	if p.HostPings > 0 {
		// Idle, and beside as many bulk streams as the loopback ping's.
		bulks := []int{0}
		if p.PingNeighbours > 0 {
			bulks = append(bulks, p.PingNeighbours)
		}
		for _, bulk := range bulks {
			for _, sec := range []string{hostNoise, hostTLS} {
				out = append(out, hostPingCell(h, p, sec, bulk, opts.Timeout))
			}
		}
	}
	return out
}
