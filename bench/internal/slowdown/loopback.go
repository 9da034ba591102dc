package slowdown

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/slowconn"
)

// The loopback measurements: the benchmarks of benchmarks_test.go as
// functions of a fixed amount of work, for the report tool. Each takes a
// context; when it is done, the sessions are closed, which unblocks any
// read or write of a contender that hangs.

// LoopbackWrite is the write size of Bulk and of PingPong's bulk
// neighbours.
const LoopbackWrite = 64 * 1024

// TCPPair returns both ends of a loopback TCP connection.
func TCPPair() (net.Conn, net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		if c := <-accepted; c != nil {
			c.Close()
		}
		return nil, nil, err
	}
	c2 := <-accepted
	if c2 == nil {
		c1.Close()
		return nil, nil, errors.New("loopback accept failed")
	}
	return c1, c2, nil
}

// Pair is a client and a server session of one contender.
type Pair struct {
	Client, Server contenders.Session
	stop           func() bool
}

// NewPair makes c's client over c1 and server over c2. The sessions are
// closed by Close or when ctx is done, whichever comes first.
func NewPair(ctx context.Context, c contenders.Contender, c1, c2 net.Conn) (*Pair, error) {
	client, server, err := c.New(c1, c2)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	p := &Pair{Client: client, Server: server}
	p.stop = context.AfterFunc(ctx, p.closeSessions)
	return p, nil
}

// LoopbackPair makes c's sessions over a loopback TCP connection.
func LoopbackPair(ctx context.Context, c contenders.Contender) (*Pair, error) {
	c1, c2, err := TCPPair()
	if err != nil {
		return nil, err
	}
	return NewPair(ctx, c, c1, c2)
}

func (p *Pair) closeSessions() {
	p.Client.Close()
	p.Server.Close()
}

// Close closes both sessions.
func (p *Pair) Close() {
	p.stop()
	p.closeSessions()
}

// OpenPair opens a stream on the client and accepts it on the server. A
// one-byte hello makes every multiplexer announce the stream.
func (p *Pair) OpenPair(ctx context.Context) (client, server contenders.Stream, err error) {
	type accepted struct {
		s   contenders.Stream
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		s, err := p.Server.Accept()
		if err == nil {
			var one [1]byte
			_, err = io.ReadFull(s, one[:])
		}
		ch <- accepted{s, err}
	}()
	cs, err := p.Client.Open(ctx)
	if err == nil {
		_, err = cs.Write([]byte{0})
	}
	if err != nil {
		p.Close() // unblocks the accept
		<-ch
		return nil, nil, err
	}
	a := <-ch
	if a.err != nil {
		return nil, nil, a.err
	}
	return cs, a.s, nil
}

// LoopResult is one timed loopback run.
type LoopResult struct {
	Time   time.Duration
	Writes uint64 // conn writes of the client session during the run
	// Mallocs is the heap allocations the whole process made during the
	// run (both ends, and the run's own goroutines, which make none):
	// set by Bulk only.
	Mallocs uint64
}

// Bulk sends total bytes on one stream of c over loopback TCP in
// LoopbackWrite-byte writes and returns the time until the last byte was
// read.
func Bulk(ctx context.Context, c contenders.Contender, total int64) (LoopResult, error) {
	p, err := LoopbackPair(ctx, c)
	if err != nil {
		return LoopResult{}, err
	}
	defer p.Close()
	cs, ss, err := p.OpenPair(ctx)
	if err != nil {
		return LoopResult{}, err
	}
	buf := make([]byte, LoopbackWrite)
	done := make(chan error, 1)
	w0 := p.Client.Writes()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	go drain(ss, total, done)
	for left := total; left > 0; left -= int64(len(buf)) {
		if _, err := cs.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			return LoopResult{}, ctxErr(ctx, err)
		}
	}
	if err := <-done; err != nil {
		return LoopResult{}, ctxErr(ctx, err)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	return LoopResult{Time: elapsed, Writes: p.Client.Writes() - w0, Mallocs: m1.Mallocs - m0.Mallocs}, nil
}

// SmallMessages has each of streams streams of c write perStream messages
// of size bytes at once over loopback TCP, and returns the time until the
// last byte was read.
func SmallMessages(ctx context.Context, c contenders.Contender, streams, perStream, size int) (LoopResult, error) {
	p, err := LoopbackPair(ctx, c)
	if err != nil {
		return LoopResult{}, err
	}
	defer p.Close()
	pairs := make([][2]contenders.Stream, streams)
	for i := range pairs {
		cs, ss, err := p.OpenPair(ctx)
		if err != nil {
			return LoopResult{}, ctxErr(ctx, err)
		}
		pairs[i] = [2]contenders.Stream{cs, ss}
	}
	msg := make([]byte, size)
	done := make(chan error, 2*streams)
	w0 := p.Client.Writes()
	start := time.Now()
	for _, s := range pairs {
		go drain(s[1], int64(perStream*size), done)
		go func(s contenders.Stream) {
			for range perStream {
				if _, err := s.Write(msg); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}(s[0])
	}
	for range 2 * streams {
		if err := <-done; err != nil {
			return LoopResult{}, ctxErr(ctx, err)
		}
	}
	return LoopResult{Time: time.Since(start), Writes: p.Client.Writes() - w0}, nil
}

// PingPongSize is the request and reply size of PingPong.
const PingPongSize = 64

// PingPong measures n round trips of PingPongSize bytes on one stream of c
// over loopback TCP, beside neighbours streams that send bulk data the
// same way, and returns them sorted. It stops early after maxTime, with at
// least one round trip; beside neighbours it goes on past n until they
// have moved BulkMeasured bytes (or maxTime ends it).
func PingPong(ctx context.Context, c contenders.Contender, n, neighbours int, maxTime time.Duration) ([]time.Duration, error) {
	r, err := PingPongLoad(ctx, c, n, neighbours, maxTime)
	return r.Sorted(), err
}

// PingResult is one PingPongLoad run.
type PingResult struct {
	RTTs     []time.Duration // in the order they ran; Sorted for percentiles
	Bulk     int64           // bytes the neighbours' readers read while the round trips ran
	Duration time.Duration   // time of the round trips
}

// Sorted returns a sorted copy of the round trips, for Percentile.
func (r PingResult) Sorted() []time.Duration { return slices.Sorted(slices.Values(r.RTTs)) }

// BulkMBps is the neighbours' goodput during the round trips, in MB/s.
func (r PingResult) BulkMBps() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Bulk) / r.Duration.Seconds() / 1e6
}

// PingPongLoad is PingPong that also reports what the neighbours moved
// meanwhile, so that a muxer can't win the latency by starving bulk.
func PingPongLoad(ctx context.Context, c contenders.Contender, n, neighbours int, maxTime time.Duration) (PingResult, error) {
	return pingPongLoad(ctx, c, n, pingLoad{neighbours: neighbours}, maxTime)
}

// PingPongLink is PingPongLoad over a simulated link instead of loopback
// TCP: a small message beside bulk streams where the link, not the CPU,
// is the bottleneck, and whatever the sender keeps in flight queues in
// the link's buffer ahead of it.
func PingPongLink(ctx context.Context, c contenders.Contender, link slowconn.Link, n, neighbours int, maxTime time.Duration) (PingResult, error) {
	return pingPongLoad(ctx, c, n, pingLoad{neighbours: neighbours, link: &link}, maxTime)
}

// PingPongHost is the idle PingPong as a go-libp2p host runs it: both
// sessions always have an Accept waiting (a host's swarm accepts every
// stream the peer opens, from the moment the connection is up), so a
// muxer's read loop must be ready to take a new stream's frames at any
// moment, not only when a Read waits. Accepted streams are closed. A
// contender without a session to accept on (raw TCP's client) runs as
// PingPong does.
func PingPongHost(ctx context.Context, c contenders.Contender, n int, maxTime time.Duration) (PingResult, error) {
	return pingPongLoad(ctx, c, n, pingLoad{accepting: true}, maxTime)
}

// PingPongBesideWrites is PingPongLoad with the neighbours writing write
// bytes at a time instead of LoopbackWrite: bulk as a stream wrapped in a
// bufio.Writer (4 KiB) or fed by io.Copy (32 KiB) sends it, which a
// muxer may take by copy where it takes 64 KiB by reference.
func PingPongBesideWrites(ctx context.Context, c contenders.Contender, n, neighbours, write int, maxTime time.Duration) (PingResult, error) {
	return pingPongLoad(ctx, c, n, pingLoad{neighbours: neighbours, write: write}, maxTime)
}

// pingLoad is what runs beside a pingPongLoad's round trips.
type pingLoad struct {
	neighbours int                  // streams writing bulk data beside the pings
	gap        func() time.Duration // the pause before each round trip that counts; nil: none
	accepting  bool                 // an Accept waits on both sessions throughout (PingPongHost)
	link       *slowconn.Link       // the sessions' conn: a simulated link; nil: loopback TCP
	write      int                  // the neighbours' Write size; 0: LoopbackWrite
}

// RequestGap is the pause before each round trip of
// PingPongAfterQuiet: longer than any muxer's notion of a stream sending
// alone (braid's loneQuiet is 5 ms), so that each request is the first
// small message beside a transfer that had the conn to itself.
const RequestGap = 10 * time.Millisecond

// PingPongAfterQuiet is PingPongLoad beside one bulk stream with gap
// between the round trips: a request now and then beside a download, where
// the request waits behind whatever the transfer has in flight when it
// comes, not behind what a ping-pong's steady presence leaves it.
func PingPongAfterQuiet(ctx context.Context, c contenders.Contender, n int, gap, maxTime time.Duration) (PingResult, error) {
	return pingPongLoad(ctx, c, n, pingLoad{neighbours: 1, gap: func() time.Duration { return gap }}, maxTime)
}

// SpacedGap is the mean pause before each round trip of PingPongSpaced:
// a few loaded round trips, so that each request comes at a moment of the
// bulk streams' own choosing rather than right after the last reply;
// below braid's loneQuiet (5 ms), so that the ping stream stays a
// neighbour of the bulk streams; and short beside a bursty muxer's cycle
// (hashicorp/yamux's 10 windows of 256 KiB take ~2.5 ms over TLS on
// loopback), which the pauses spread the requests across. 2,000 round
// trips take about 2.5 s.
const SpacedGap = time.Millisecond

// PingPongSpaced is PingPongLoad with a random pause before each round
// trip, uniform in [0, 2*meanGap) from a fixed seed (every contender gets
// the same pauses): requests that come at random moments beside the bulk
// streams, as an RPC beside a transfer does.
//
// PingPongLoad's back-to-back round trips sample the bulk streams by
// count, not by time: where a muxer's bulk comes in bursts, the round
// trips that fall between bursts are fast and, being fast, are most of
// the round trips, so its p50 is the p50 of its quiet moments. A request
// that comes at a random moment sees each moment as often as it lasts.
func PingPongSpaced(ctx context.Context, c contenders.Contender, n, neighbours int, meanGap, maxTime time.Duration) (PingResult, error) {
	return pingPongLoad(ctx, c, n, pingLoad{neighbours: neighbours, gap: spacedGaps(meanGap)}, maxTime)
}

// spacedGaps returns PingPongSpaced's pauses, uniform in [0, 2*mean), the
// same sequence on every call.
func spacedGaps(mean time.Duration) func() time.Duration {
	rng := rand.New(rand.NewPCG(spacedSeed, spacedSeed))
	return func() time.Duration { return time.Duration(rng.Int64N(int64(2 * mean))) }
}

// spacedSeed seeds spacedGaps: any fixed value, so that every contender and
// every run waits the same pauses.
const spacedSeed = 12

// pingPongLoad is PingPongLoad with load beside the round trips.
func pingPongLoad(ctx context.Context, c contenders.Contender, n int, load pingLoad, maxTime time.Duration) (PingResult, error) {
	neighbours, gap := load.neighbours, load.gap
	var p *Pair
	var err error
	if load.link != nil {
		c1, c2 := slowconn.Pipe(*load.link)
		p, err = NewPair(ctx, c, c1, c2)
	} else {
		p, err = LoopbackPair(ctx, c)
	}
	if err != nil {
		return PingResult{}, err
	}
	defer p.Close()
	cs, ss, err := p.OpenPair(ctx)
	if err != nil {
		return PingResult{}, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bulk atomic.Int64
	defer wg.Wait()
	defer p.Close() // before wg.Wait: unblocks the bulk streams
	defer close(stop)
	if load.accepting {
		sessions := []contenders.Session{p.Client, p.Server}
		calling := make(chan struct{}, len(sessions))
		for _, s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				calling <- struct{}{}
				for {
					st, err := s.Accept()
					if err != nil {
						return // closed, or no Accept on this side
					}
					st.Close()
				}
			}()
		}
		for range sessions {
			<-calling // each Accept is called before the first round trip
		}
	}
	for range neighbours {
		bc, bs, err := p.OpenPair(ctx)
		if err != nil {
			return PingResult{}, err
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			buf := make([]byte, LoopbackWrite)
			for {
				n, err := bs.Read(buf)
				bulk.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			buf := make([]byte, cmp.Or(load.write, LoopbackWrite))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := bc.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, PingPongSize)
		for {
			if _, err := io.ReadFull(ss, buf); err != nil {
				return
			}
			if _, err := ss.Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, PingPongSize)
	// Round trips that don't count until the neighbours have moved
	// bulkWarmup: their windows grow and their queues fill first.
	for neighbours > 0 && bulk.Load() < bulkWarmup {
		if _, err := cs.Write(buf); err != nil {
			return PingResult{}, ctxErr(ctx, err)
		}
		if _, err := io.ReadFull(cs, buf); err != nil {
			return PingResult{}, ctxErr(ctx, err)
		}
	}
	rtts := make([]time.Duration, 0, n)
	bulk0 := bulk.Load()
	start := time.Now()
	// More round trips than n while the neighbours have not yet moved
	// BulkMeasured: a rate needs bytes, and on a loaded machine the n
	// round trips of a muxer that gives each stream a connection (raw
	// TCP) can end before a bulk reader has run at all (CI, session 16:
	// 20 round trips under the race detector read as 0 MB/s of bulk).
	needMore := func(i int) bool {
		return i < n || (neighbours > 0 && bulk.Load()-bulk0 < BulkMeasured)
	}
	for i := 0; needMore(i) && (i == 0 || time.Since(start) < maxTime); i++ {
		if gap != nil {
			time.Sleep(gap())
		}
		t0 := time.Now()
		if _, err := cs.Write(buf); err != nil {
			return PingResult{}, ctxErr(ctx, err)
		}
		if _, err := io.ReadFull(cs, buf); err != nil {
			return PingResult{}, ctxErr(ctx, err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	d := time.Since(start)
	moved := bulk.Load() - bulk0
	return PingResult{RTTs: rtts, Bulk: moved, Duration: d}, nil
}

// bulkWarmup is what the bulk neighbours move before the first round trip
// that counts: a few windows each, so that they are in their steady state.
const bulkWarmup = 16 << 20

// BulkMeasured is the least PingPongLoad's neighbours move while the
// round trips that count run (unless maxTime ends them first): sixteen of
// their 64 KiB reads, so that one read more or less moves the rate by
// under 7 %.
const BulkMeasured = 16 * LoopbackWrite

// Percentile returns the p-th percentile (0 < p < 100) of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)) * p / 100)
	return sorted[min(i, len(sorted)-1)]
}

// Mean returns the mean of d, 0 for none. A muxer whose bulk traffic
// comes in bursts has many fast round trips between the bursts and a few
// slow ones inside them: a low p50 that leaves the slow ones out, and a
// p99 that shows only the slowest. The mean counts each by how long it
// took.
func Mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

// IdleStreamHeap opens n streams of c over loopback TCP, accepts them all,
// and returns the heap they hold per stream, both ends together. The
// contender must allow n incoming streams. The heap is the process's: run
// nothing else meanwhile.
func IdleStreamHeap(ctx context.Context, c contenders.Contender, n int) (float64, error) {
	p, err := LoopbackPair(ctx, c)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	// Warm up: one stream carries a byte each way, so the session's own
	// start-up buffers (the first batch, an RTT probe, the read loop's
	// buffer) are made and released before the baseline, not counted
	// against, or for, the idle streams.
	if err := warmUp(ctx, p); err != nil {
		return 0, err
	}
	var before, after runtime.MemStats
	settleHeap()
	runtime.ReadMemStats(&before)
	accepted := make(chan []contenders.Stream, 1)
	go func() {
		ss := make([]contenders.Stream, 0, n)
		for len(ss) < n {
			s, err := p.Server.Accept()
			if err != nil {
				break
			}
			ss = append(ss, s)
		}
		accepted <- ss
	}()
	cs := make([]contenders.Stream, 0, n)
	for len(cs) < n {
		s, err := p.Client.Open(ctx)
		if err != nil {
			p.Close()
			<-accepted
			return 0, ctxErr(ctx, err)
		}
		cs = append(cs, s)
	}
	ss := <-accepted
	if len(ss) != n {
		return 0, ctxErr(ctx, fmt.Errorf("accepted %d of %d streams", len(ss), n))
	}
	settleHeap()
	runtime.ReadMemStats(&after)
	used := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	// The two slices of stream handles are the caller's, not the muxer's.
	used -= float64(cap(cs)+cap(ss)) * interfaceSize
	runtime.KeepAlive(cs)
	runtime.KeepAlive(ss)
	return used / float64(n), nil
}

// settleHeap collects twice: a sync.Pool keeps its contents through one
// collection (its victim cache), so only the second frees what pools hold.
func settleHeap() {
	runtime.GC()
	runtime.GC()
}

// warmUp opens one stream of p (OpenPair sends a byte to the server), sends
// a byte back and closes it.
func warmUp(ctx context.Context, p *Pair) error {
	c, s, err := p.OpenPair(ctx)
	if err != nil {
		return ctxErr(ctx, err)
	}
	one := make([]byte, 1) // OpenPair sent the client's byte
	if _, err := s.Write(one); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, one); err != nil {
		return err
	}
	c.Close()
	s.Close()
	return nil
}

// interfaceSize is the size of an interface value.
const interfaceSize = 16

// drain reads n bytes from s and reports the error, if any, on done.
func drain(s io.Reader, n int64, done chan<- error) {
	_, err := io.CopyN(io.Discard, s, n)
	done <- err
}

// ctxErr prefers ctx's error: once ctx is done the sessions are closed, and
// the error a contender returns then says less than why it was closed.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	}
	return err
}

// notifyHeader is the length prefix of a notification, as a delimited
// protobuf writer sends it.
const notifyHeader = 4

// NotifyRun is one notification run: Count messages of Size bytes.
type NotifyRun struct {
	Count int `json:"count"`
	Size  int `json:"size"`
}

// NotifyTargetRuns are the notification runs issue #12's third target
// names: 2,000 x 64 KiB and 500 x 256 KiB on one stream. The benchmarks
// and braidbench's host rows run them.
func NotifyTargetRuns() []NotifyRun {
	return []NotifyRun{{Count: 2000, Size: 64 << 10}, {Count: 500, Size: 256 << 10}}
}

// Notify sends count messages of size bytes (plus a 4-byte length prefix,
// one Write each) at once on one stream of c over loopback TCP, the sender
// held back only by the transport, and returns the time until the receiver
// has read them all: the notification scenario of Polkadot's libp2p vs
// litep2p benchmark "with backpressure".
func Notify(ctx context.Context, c contenders.Contender, count, size int) (time.Duration, error) {
	p, err := LoopbackPair(ctx, c)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	cs, ss, err := p.OpenPair(ctx)
	if err != nil {
		return 0, err
	}
	msg := make([]byte, notifyHeader+size)
	binary.BigEndian.PutUint32(msg, uint32(size))
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		buf := make([]byte, len(msg))
		for range count {
			if _, err := io.ReadFull(ss, buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range count {
		if _, err := cs.Write(msg); err != nil {
			return 0, ctxErr(ctx, err)
		}
	}
	if err := <-done; err != nil {
		return 0, ctxErr(ctx, err)
	}
	return time.Since(start), nil
}
