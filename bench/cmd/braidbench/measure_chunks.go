package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/internal/appframe"
	"github.com/braidmux/braid/slowconn"
)

// The chunk-delivery scenario reproduces Swarm bee's pullsync analysis
// (seeds 000 and 001): per op the client opens a stream and sends Get, the
// server answers with an Offer of n chunk addresses, the client sends Want
// (a bit vector), and the server delivers the n chunks of 4 KiB, either one
// message per chunk or batched 25 chunks per message.

// Sizes of the pullsync messages.
const (
	addrSize   = 32 // a chunk address
	getSize    = 16 // a Get request: bin, start, end
	chunkEntry = addrSize + chunkSize
)

func chunkCell(p plan, n int, batched, latency bool) cell {
	mode := "single"
	if batched {
		mode = "batched"
	}
	lat := "0ms"
	where := "loopback TCP"
	if latency {
		lat = chunkLatency.String()
		where = fmt.Sprintf("simulated link (%s)", describeLink(chunkLink()))
	}
	c := cell{
		ID:       fmt.Sprintf("chunks/n=%d/%s/%s", n, mode, lat),
		Workload: wChunks, Groups: []string{wChunks},
		Title: fmt.Sprintf("Chunk delivery (Swarm pullsync): Get/Offer/Want, then %d chunks of 4 KiB %s, %s",
			n, map[bool]string{false: "one message per chunk", true: "batched 25 per message"}[batched], where),
		Params: map[string]string{"n": strconv.Itoa(n), "mode": mode, "latency": lat},
	}
	if latency {
		c.Side = true
		c.Metrics = []metric{{Key: mTimeOp, Unit: "ms"}}
		c.Note = "One op per sample; the contenders run side by side, each on its own link (the latency, not the CPU, sets the time), so B/op and allocs/op come from the 0 ms rows."
		c.measure = func(ctx context.Context, e entry, round int) (sample, error) {
			l := chunkLink()
			l.Seed = int64(round + 1)
			mc := e.c
			if e.raw {
				mc = rawLink(l)
			}
			c1, c2 := slowconn.Pipe(l)
			s, err := chunkOps(ctx, mc, c1, c2, n, batched, 0, 1)
			if err != nil {
				return nil, err
			}
			delete(s, mBytesOp)
			delete(s, mAllocsOp)
			return s, nil
		}
		return c
	}
	c.Metrics = []metric{{Key: mTimeOp, Unit: "ms"}, {Key: mBytesOp, Unit: "B"}, {Key: mAllocsOp, Unit: "allocs"}}
	c.Note = "B/op and allocs/op count the whole process (both peers), as go test -benchmem does."
	c.measure = func(ctx context.Context, e entry, _ int) (sample, error) {
		c1, c2, err := slowdown.TCPPair()
		if err != nil {
			return nil, err
		}
		return chunkOps(ctx, e.c, c1, c2, n, batched, chunkWarmup, p.ChunkOps)
	}
	return c
}

// chunkWarmup is the untimed ops before the timed ones on loopback.
const chunkWarmup = 1

// chunkOps runs warmup and then ops chunk-delivery ops of mc over c1, c2,
// one after another, and returns the time, heap bytes and allocations per
// timed op.
func chunkOps(ctx context.Context, mc contenders.Contender, c1, c2 net.Conn, n int, batched bool, warmup, ops int) (sample, error) {
	p, err := slowdown.NewPair(ctx, mc, c1, c2)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	served := make(chan error, 1)
	go func() { served <- serveChunks(p.Server, n, batched) }()
	fail := func(err error) (sample, error) {
		p.Close()
		if serr := <-served; serr != nil && !errors.Is(serr, errSessionDone) {
			err = fmt.Errorf("%w (server: %v)", err, serr)
		}
		return nil, ctxErr(ctx, err)
	}
	for range warmup {
		if err := chunkOp(ctx, p.Client, n); err != nil {
			return fail(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range ops {
		if err := chunkOp(ctx, p.Client, n); err != nil {
			return fail(err)
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	p.Close()
	// Every op completed: a server error now is only its last write
	// learning of the close (hashicorp/yamux waits for its send loop).
	<-served
	k := float64(ops)
	return sample{
		mTimeOp:   ms(elapsed) / k,
		mBytesOp:  float64(after.TotalAlloc-before.TotalAlloc) / k,
		mAllocsOp: float64(after.Mallocs-before.Mallocs) / k,
	}, nil
}

// errSessionDone ends serveChunks when the session closes.
var errSessionDone = errors.New("session closed")

// chunkOp is the client's side of one op.
func chunkOp(ctx context.Context, s contenders.Session, n int) error {
	st, err := s.Open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Write(appframe.New(getSize)); err != nil {
		return err
	}
	offer, err := appframe.Read(st)
	if err != nil {
		return fmt.Errorf("offer: %w", err)
	}
	if len(offer) != n*addrSize {
		return fmt.Errorf("offer of %d bytes, want %d", len(offer), n*addrSize)
	}
	want := appframe.New((n + 7) / 8)
	for i := appframe.HeaderSize; i < len(want); i++ {
		want[i] = 0xff
	}
	if _, err := st.Write(want); err != nil {
		return err
	}
	for got := 0; got < n; {
		m, err := appframe.Read(st)
		if err != nil {
			return fmt.Errorf("delivery after %d chunks: %w", got, err)
		}
		if len(m) == 0 || len(m)%chunkEntry != 0 {
			return fmt.Errorf("delivery of %d bytes", len(m))
		}
		got += len(m) / chunkEntry
	}
	return nil
}

// serveChunks is the server: it serves one op per accepted stream until
// the session closes.
func serveChunks(s contenders.Session, n int, batched bool) error {
	for {
		st, err := s.Accept()
		if err != nil {
			return errSessionDone
		}
		if err := serveChunkOp(st, n, batched); err != nil {
			st.Close()
			return err
		}
		st.Close()
	}
}

func serveChunkOp(st contenders.Stream, n int, batched bool) error {
	if _, err := appframe.Read(st); err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if _, err := st.Write(appframe.New(n * addrSize)); err != nil {
		return err
	}
	if _, err := appframe.Read(st); err != nil {
		return fmt.Errorf("want: %w", err)
	}
	per := 1
	if batched {
		per = chunkBatch
	}
	for i := 0; i < n; i += per {
		k := min(per, n-i)
		// A fresh message per delivery, as marshalling one allocates it.
		if _, err := st.Write(appframe.New(k * chunkEntry)); err != nil {
			return err
		}
	}
	return nil
}
