package bench_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/internal/heapstat"
	"github.com/braidmux/braid/slowconn"
	yamux "github.com/libp2p/go-yamux/v5"
)

// Flow-control benchmarks (issue #15): what a receiver's windows cost a
// request/response protocol and a new stream on a long link. Each runs
// braid, go-yamux, go-yamux sending to a braid receiver (braid's windows
// govern), and a raw conn over the same simulated link, in one run.

// yamuxToBraid is go-yamux as the client (which, in these benchmarks,
// opens the stream; the server sends the bulk) or the server, and braid
// on the other end: whoever receives the bulk is braid.
func yamuxToBraid(braidClient bool) contenders.Contender {
	name := "yamux-sends-to-braid"
	return contenders.Contender{Name: name, New: func(c1, c2 net.Conn) (contenders.Session, contenders.Session, error) {
		ycfg := yamux.DefaultConfig()
		ycfg.LogOutput = io.Discard
		if braidClient {
			bc, err := braid.Client(c1, nil)
			if err != nil {
				return nil, nil, err
			}
			ys, err := yamux.Server(c2, ycfg, nil)
			if err != nil {
				bc.Close()
				return nil, nil, err
			}
			return braidSess{bc}, yamuxSess{ys}, nil
		}
		yc, err := yamux.Client(c1, ycfg, nil)
		if err != nil {
			return nil, nil, err
		}
		bs, err := braid.Server(c2, nil)
		if err != nil {
			yc.Close()
			return nil, nil, err
		}
		return yamuxSess{yc}, braidSess{bs}, nil
	}}
}

type braidSess struct{ s *braid.Session }

func (b braidSess) Open(ctx context.Context) (contenders.Stream, error) { return b.s.OpenStream(ctx) }
func (b braidSess) Accept() (contenders.Stream, error)                  { return b.s.AcceptStream() }
func (b braidSess) Close() error                                        { return b.s.Close() }
func (b braidSess) Writes() uint64                                      { return b.s.Stats().Writes }

type yamuxSess struct{ s *yamux.Session }

func (y yamuxSess) Open(ctx context.Context) (contenders.Stream, error) { return y.s.OpenStream(ctx) }
func (y yamuxSess) Accept() (contenders.Stream, error)                  { return y.s.AcceptStream() }
func (y yamuxSess) Close() error                                        { return y.s.Close() }
func (y yamuxSess) Writes() uint64                                      { return 0 }

// rawOne is a raw conn as a "session" with exactly one stream each way:
// the conn itself. Open and Accept hand it out once.
func rawOne() contenders.Contender {
	return contenders.Contender{Name: "raw", New: func(c1, c2 net.Conn) (contenders.Session, contenders.Session, error) {
		return &rawOneSess{c: c1.(halfCloser)}, &rawOneSess{c: c2.(halfCloser)}, nil
	}}
}

type halfCloser interface {
	net.Conn
	CloseWrite() error
}

type rawOneSess struct {
	c    halfCloser
	used bool
}

func (r *rawOneSess) take() (contenders.Stream, error) {
	if r.used {
		return nil, errors.New("raw: one stream only")
	}
	r.used = true
	return r.c, nil
}
func (r *rawOneSess) Open(context.Context) (contenders.Stream, error) { return r.take() }
func (r *rawOneSess) Accept() (contenders.Stream, error)              { return r.take() }
func (r *rawOneSess) Close() error                                    { return r.c.Close() }
func (r *rawOneSess) Writes() uint64                                  { return 0 }

// Chunk delivery, as braidbench's chunks scenario (Swarm pullsync): the
// client opens a stream, sends Get (16 B), the server offers n addresses
// (32 B each), the client wants them all, and the server delivers n
// chunks of 4 KiB plus address, one message per chunk or 25 per message.
const (
	chunkGet     = 16
	chunkAddr    = 32
	chunkData    = 4 * 1024
	chunkPerMsg  = 25
	chunkLatency = 200 * time.Millisecond
)

func chunkFrame(n int) []byte {
	b := make([]byte, 4+n)
	binary.BigEndian.PutUint32(b, uint32(n))
	return b
}

func readChunkFrame(r io.Reader) (int, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(h[:])
	_, err := io.CopyN(io.Discard, r, int64(n))
	return int(n), err
}

// chunkRun is one chunk-delivery op on a fresh pair of c over link; it
// returns the client's time from open to the last chunk.
func chunkRun(c contenders.Contender, link slowconn.Link, n int, batched bool) (time.Duration, error) {
	c1, c2 := slowconn.Pipe(link)
	client, server, err := c.New(c1, c2)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	defer server.Close()
	per := 1
	if batched {
		per = chunkPerMsg
	}
	served := make(chan error, 1)
	go func() {
		st, err := server.Accept()
		if err != nil {
			served <- err
			return
		}
		defer st.Close()
		if _, err := readChunkFrame(st); err != nil {
			served <- err
			return
		}
		if _, err := st.Write(chunkFrame(n * chunkAddr)); err != nil {
			served <- err
			return
		}
		if _, err := readChunkFrame(st); err != nil {
			served <- err
			return
		}
		for i := 0; i < n; i += per {
			if _, err := st.Write(chunkFrame(min(per, n-i) * (chunkAddr + chunkData))); err != nil {
				served <- err
				return
			}
		}
		served <- nil
	}()
	start := time.Now()
	st, err := client.Open(context.Background())
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if _, err := st.Write(chunkFrame(chunkGet)); err != nil {
		return 0, err
	}
	if _, err := readChunkFrame(st); err != nil {
		return 0, err
	}
	if _, err := st.Write(chunkFrame((n + 7) / 8)); err != nil {
		return 0, err
	}
	for got := 0; got < n; {
		m, err := readChunkFrame(st)
		if err != nil {
			return 0, fmt.Errorf("after %d chunks: %w", got, err)
		}
		got += m / (chunkAddr + chunkData)
	}
	elapsed := time.Since(start)
	return elapsed, <-served
}

// BenchmarkChunks: chunk delivery over a 1 Gbit/s link with 200 ms one
// way, on a fresh session per op. One op is one delivery; ms/op is its
// time, x-raw its ratio to the raw conn's time measured in the same
// sub-benchmark (issue #15: braid <= 1.1x raw at 120 single chunks).
func BenchmarkChunks(b *testing.B) {
	link := slowconn.LAN()
	link.Latency = chunkLatency
	impls := []contenders.Contender{contenders.Braid(true), contenders.Yamux(), yamuxToBraid(true)}
	for _, n := range []int{25, 120} {
		for _, batched := range []bool{false, true} {
			mode := "single"
			if batched {
				mode = "batched"
			}
			for _, c := range append([]contenders.Contender{rawOne()}, impls...) {
				b.Run(fmt.Sprintf("n=%d/%s/impl=%s", n, mode, c.Name), func(b *testing.B) {
					raw, err := chunkRun(rawOne(), link, n, batched)
					if err != nil {
						b.Fatal(err)
					}
					var total time.Duration
					for i := 0; i < b.N; i++ {
						d, err := chunkRun(c, link, n, batched)
						if err != nil {
							b.Fatal(err)
						}
						total += d
					}
					mean := total / time.Duration(b.N)
					b.ReportMetric(float64(mean.Microseconds())/1e3, "ms/op")
					b.ReportMetric(mean.Seconds()/raw.Seconds(), "x-raw")
				})
			}
		}
	}
}

// BenchmarkNewStreamKnownPath: on a 1 Gbit/s link with 50 ms RTT, a first
// stream moves 8 MiB (the session learns its path), then a new stream
// moves 32 MiB. Reports the new stream's time against the link's ideal
// (x-ideal; issue #15: <= 1.3) and when its goodput, over 10 ms
// intervals, first reached 90 % of the link's (rtts-to-90; <= 4).
func BenchmarkNewStreamKnownPath(b *testing.B) {
	const (
		warm  = 8 << 20
		bulk  = 32 << 20
		slice = 10 * time.Millisecond
	)
	link := slowconn.Link{Bandwidth: 1e9, Latency: 25 * time.Millisecond}
	rtt := 2 * link.Latency
	ideal := link.Latency + time.Duration(float64(bulk)/link.Goodput()*float64(time.Second))
	impls := []contenders.Contender{rawTwo(), contenders.Braid(true), contenders.Yamux(), yamuxToBraid(false)}
	for _, c := range impls {
		b.Run("impl="+c.Name, func(b *testing.B) {
			var total, to90 time.Duration
			for i := 0; i < b.N; i++ {
				d, t90, err := newStreamRun(c, link, warm, bulk, slice)
				if err != nil {
					b.Fatal(err)
				}
				total += d
				to90 += t90
			}
			mean := total / time.Duration(b.N)
			b.ReportMetric(float64(mean.Microseconds())/1e3, "ms/op")
			b.ReportMetric(mean.Seconds()/ideal.Seconds(), "x-ideal")
			b.ReportMetric((to90/time.Duration(b.N)).Seconds()/rtt.Seconds(), "rtts-to-90")
		})
	}
}

// rawTwo is a raw conn carrying both "streams" of newStreamRun, one after
// the other.
func rawTwo() contenders.Contender {
	return contenders.Contender{Name: "raw", New: func(c1, c2 net.Conn) (contenders.Session, contenders.Session, error) {
		return &rawSeq{c: c1}, &rawSeq{c: c2}, nil
	}}
}

type rawSeq struct{ c net.Conn }

type rawSeqStream struct{ net.Conn }

func (rawSeqStream) Close() error      { return nil }
func (rawSeqStream) CloseWrite() error { return nil }

func (r *rawSeq) Open(context.Context) (contenders.Stream, error) { return rawSeqStream{r.c}, nil }
func (r *rawSeq) Accept() (contenders.Stream, error)              { return rawSeqStream{r.c}, nil }
func (r *rawSeq) Close() error                                    { return r.c.Close() }
func (r *rawSeq) Writes() uint64                                  { return 0 }

// newStreamRun moves warm bytes on a first stream and then bulk bytes on
// a new one, client to server; it returns the new stream's time from open
// to its last byte and the start of the first slice in which it carried
// 90 % of the link's goodput.
func newStreamRun(c contenders.Contender, link slowconn.Link, warm, bulk int64, slice time.Duration) (time.Duration, time.Duration, error) {
	c1, c2 := slowconn.Pipe(link)
	client, server, err := c.New(c1, c2)
	if err != nil {
		return 0, 0, err
	}
	defer client.Close()
	defer server.Close()
	send := func(n int64) error {
		st, err := client.Open(context.Background())
		if err != nil {
			return err
		}
		buf := make([]byte, 64*1024)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := st.Write(buf[:k]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
	// The first stream: the session learns the path.
	sent := make(chan error, 1)
	go func() { sent <- send(warm) }()
	st, err := server.Accept()
	if err != nil {
		return 0, 0, err
	}
	if _, err := io.CopyN(io.Discard, st, warm); err != nil {
		return 0, 0, err
	}
	if err := <-sent; err != nil {
		return 0, 0, err
	}
	// The new stream, timed from its open.
	start := time.Now()
	go func() { sent <- send(bulk) }()
	st, err = server.Accept()
	if err != nil {
		return 0, 0, err
	}
	want := link.Goodput() * slice.Seconds() * 0.9
	var got, mark int64
	var to90 time.Duration
	next := start.Add(slice)
	buf := make([]byte, 256*1024)
	for got < bulk {
		n, err := st.Read(buf[:min(int64(len(buf)), bulk-got)])
		got += int64(n)
		if err != nil {
			return 0, 0, err
		}
		if now := time.Now(); !now.Before(next) {
			if to90 == 0 && float64(got-mark) >= want*float64(now.Sub(next.Add(-slice)))/float64(slice) {
				to90 = next.Add(-slice).Sub(start)
			}
			mark = got
			next = now.Add(slice)
		}
	}
	elapsed := time.Since(start)
	if to90 == 0 {
		to90 = elapsed
	}
	return elapsed, to90, <-sent
}

// A burst of small frames, as a raw yamux peer sends it: the read path's
// fast case (issue #15, target 3). An idle braid session waits in a
// 512-byte buffer (readbuf.go); a burst must still come in through one
// large buffer, many frames per conn read.
const (
	burstFrames  = 1000
	burstPayload = 64
)

// readCounter counts the Read calls that reach a conn.
type readCounter struct {
	net.Conn
	reads *atomic.Uint64
}

func (c readCounter) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

// rawYamuxPeer is a hand-written yamux client on conn: it answers pings
// and drops everything else it receives, and writes bursts of frames.
type rawYamuxPeer struct {
	conn   net.Conn
	mu     sync.Mutex // serializes writes on conn
	nextID uint32
	done   chan error // the responder's end
}

func newRawYamuxPeer(conn net.Conn) *rawYamuxPeer {
	p := &rawYamuxPeer{conn: conn, nextID: 1, done: make(chan error, 1)}
	go p.respond()
	return p
}

func yamuxHeader(b []byte, typ uint8, flags uint16, id, length uint32) {
	b[0], b[1] = 0, typ
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint32(b[4:], id)
	binary.BigEndian.PutUint32(b[8:], length)
}

// respond reads frames until the conn closes; a ping request gets its
// pong, data is dropped.
func (p *rawYamuxPeer) respond() {
	const typeData, typePing, flagSYN, flagACK = 0, 2, 1, 2
	var h [12]byte
	for {
		if _, err := io.ReadFull(p.conn, h[:]); err != nil {
			p.done <- err
			return
		}
		typ, flags, length := h[1], binary.BigEndian.Uint16(h[2:]), binary.BigEndian.Uint32(h[8:])
		switch {
		case typ == typeData && length > 0:
			if _, err := io.CopyN(io.Discard, p.conn, int64(length)); err != nil {
				p.done <- err
				return
			}
		case typ == typePing && flags&flagSYN != 0:
			var pong [12]byte
			yamuxHeader(pong[:], typePing, flagACK, 0, length)
			p.mu.Lock()
			_, err := p.conn.Write(pong[:])
			p.mu.Unlock()
			if err != nil {
				p.done <- err
				return
			}
		}
	}
}

// burst writes, in one conn write, a new stream: frames data frames of
// payload bytes each, SYN on the first, and an empty window update with
// FIN, as go-yamux ends a stream. (A FIN on the last data frame would do,
// but go-yamux's receiver can then return io.EOF before that frame's
// payload: its Read sees the FIN before the data is buffered.) buf is the
// burst's memory, kept between calls.
func (p *rawYamuxPeer) burst(buf *[]byte, frames, payload int) error {
	const typeData, typeWindowUpdate, flagSYN, flagFIN = 0, 1, 1, 4
	id := p.nextID
	p.nextID += 2
	size := frames*(12+payload) + 12
	if len(*buf) != size {
		*buf = make([]byte, size)
	}
	for i := range frames {
		var flags uint16
		if i == 0 {
			flags = flagSYN
		}
		yamuxHeader((*buf)[i*(12+payload):], typeData, flags, id, uint32(payload))
	}
	yamuxHeader((*buf)[size-12:], typeWindowUpdate, flagFIN, id, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.conn.Write(*buf)
	return err
}

// BenchmarkBurstRead: a raw yamux peer writes a new stream's 1,000 frames
// of 64 B in one conn write, and the receiver, braid or go-yamux over
// loopback TCP, reads the stream to its FIN. One op is one burst on an
// idle session; reads/op is the conn reads the receiver made for it (the
// burst is 76,012 bytes) and frames/read the frames one read brought in.
func BenchmarkBurstRead(b *testing.B) {
	receivers := []struct {
		name string
		new  func(net.Conn) (contenders.Session, error)
	}{
		{"braid", func(c net.Conn) (contenders.Session, error) {
			s, err := braid.Server(c, nil)
			return braidSess{s}, err
		}},
		{"yamux", func(c net.Conn) (contenders.Session, error) {
			cfg := yamux.DefaultConfig()
			cfg.LogOutput = io.Discard
			s, err := yamux.Server(c, cfg, nil)
			return yamuxSess{s}, err
		}},
	}
	for _, r := range receivers {
		b.Run("impl="+r.name, func(b *testing.B) {
			c1, c2, err := slowdown.TCPPair()
			if err != nil {
				b.Fatal(err)
			}
			reads := new(atomic.Uint64)
			server, err := r.new(readCounter{c2, reads})
			if err != nil {
				b.Fatal(err)
			}
			peer := newRawYamuxPeer(c1)
			defer func() {
				server.Close()
				c1.Close()
				<-peer.done
			}()
			buf := make([]byte, 64*1024)
			var burst []byte
			b.SetBytes(burstFrames * burstPayload)
			b.ReportAllocs()
			b.ResetTimer()
			reads0 := reads.Load()
			for range b.N {
				if err := peer.burst(&burst, burstFrames, burstPayload); err != nil {
					b.Fatal(err)
				}
				st, err := server.Accept()
				if err != nil {
					b.Fatal(err)
				}
				var got int
				for {
					n, err := st.Read(buf)
					got += n
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if got != burstFrames*burstPayload {
					b.Fatalf("read %d bytes of %d", got, burstFrames*burstPayload)
				}
				st.Close()
			}
			b.StopTimer()
			perOp := float64(reads.Load()-reads0) / float64(b.N)
			b.ReportMetric(perOp, "reads/op")
			b.ReportMetric(burstFrames/perOp, "frames/read")
		})
	}
}

// idleSessionPairs is how many session pairs BenchmarkIdleSessions holds
// at once (as the issue #15 figures were taken; 2,000 loopback TCP
// sockets fit the machine's file-descriptor limit).
const idleSessionPairs = 1000

// BenchmarkIdleSessions: idleSessionPairs idle session pairs of each
// contender over loopback TCP, each of which moved 1 KiB on one stream
// that was then closed at both ends. Reports the heap one pair costs,
// both ends and the TCP conns' Go objects included (raw: the conns
// alone, the 1 KiB written on the conn itself), and its goroutines.
// Issue #15: braid <= 16 KiB and <= 4 goroutines.
func BenchmarkIdleSessions(b *testing.B) {
	impls := []contenders.Contender{rawOne(), contenders.Braid(true), contenders.Yamux(), contenders.Hashicorp()}
	for _, c := range impls {
		b.Run("impl="+c.Name, func(b *testing.B) {
			reportIdleSessions(b, c, idleFlow{pairs: idleSessionPairs, size: 1024})
		})
	}
}

// idleAfterBulkPairs and idleAfterBulkBytes shape
// BenchmarkIdleSessionsAfterBulk: fewer pairs than BenchmarkIdleSessions,
// each moving enough that every contender's buffers grow to what a bulk
// flow makes them (braid's 32 KiB read buffer after its first large
// read, crypto/tls's input buffer).
const (
	idleAfterBulkPairs = 100
	idleAfterBulkBytes = 4 << 20
)

// BenchmarkIdleSessionsAfterBulk: idleAfterBulkPairs session pairs of
// each contender, over loopback TCP and over TLS, each of which moved
// idleAfterBulkBytes one way as a request of known length, the way a
// request-response protocol does: the receiver reads exactly that many
// bytes and closes its stream, and the sender closes its own once it has
// read that close, so its FIN comes for a stream its peer's session has
// already let go of. Reports the heap and goroutines per pair while the
// pairs sit idle (raw: the conn is the stream, and stays open). What a
// finished flow leaves behind in a session that goes idle, which
// BenchmarkIdleSessions's 1 KiB does not show.
func BenchmarkIdleSessionsAfterBulk(b *testing.B) {
	impls := []contenders.Contender{rawOne(), contenders.Braid(true), contenders.Yamux(), contenders.Hashicorp(), contenders.Smux()}
	for _, t := range transports() {
		for _, c := range impls {
			b.Run(fmt.Sprintf("net=%s/impl=%s", t.name, c.Name), func(b *testing.B) {
				reportIdleSessions(b, t.over(c), idleFlow{pairs: idleAfterBulkPairs, size: idleAfterBulkBytes, readerClosesFirst: true})
			})
		}
	}
}

// idleFlow is what each pair of an idle-sessions benchmark does before it
// sits idle: pairs pairs, each moving size bytes on one stream from the
// client to the server. The client closes first (after its Write), unless
// readerClosesFirst: then the server closes once it has the bytes.
type idleFlow struct {
	pairs             int
	size              int
	readerClosesFirst bool
}

// reportIdleSessions runs idleSessions for each op and reports the means
// per pair: heap, goroutines, and the goroutines' stacks, which are not
// heap.
func reportIdleSessions(b *testing.B, c contenders.Contender, f idleFlow) {
	var sum idleCost
	for range b.N {
		cost, err := idleSessions(c, f, c.Name == "raw")
		if err != nil {
			b.Fatal(err)
		}
		sum.heap += cost.heap
		sum.goroutines += cost.goroutines
		sum.stack += cost.stack
	}
	b.ReportMetric(sum.heap/float64(b.N), "B/pair")
	b.ReportMetric(sum.goroutines/float64(b.N), "goroutines/pair")
	b.ReportMetric(sum.stack/float64(b.N), "stack-B/pair")
}

// idleCost is what one idle session pair holds: heap bytes, goroutines,
// and the bytes of their stacks.
type idleCost struct {
	heap, goroutines, stack float64
}

// idleSessions makes f.pairs session pairs of c over loopback TCP, moves
// f.size bytes on one stream of each and closes it at both ends (raw: the
// conn is the stream, and stays open), and returns what a pair holds
// while they sit idle.
func idleSessions(c contenders.Contender, f idleFlow, raw bool) (idleCost, error) {
	type pair struct{ client, server contenders.Session }
	pairs := make([]pair, 0, f.pairs)
	defer func() {
		for _, p := range pairs {
			p.client.Close()
			p.server.Close()
		}
	}()
	goroutines := runtime.NumGoroutine()
	before := heapstat.Settled()
	msg := make([]byte, f.size)
	got := make([]byte, f.size)
	for range f.pairs {
		c1, c2, err := slowdown.TCPPair()
		if err != nil {
			return idleCost{}, err
		}
		client, server, err := c.New(c1, c2)
		if err != nil {
			c1.Close()
			c2.Close()
			return idleCost{}, err
		}
		pairs = append(pairs, pair{client, server})
		st, err := client.Open(context.Background())
		if err != nil {
			return idleCost{}, err
		}
		sent := make(chan error, 1)
		go func() { _, err := st.Write(msg); sent <- err }()
		peer, err := server.Accept()
		if err != nil {
			return idleCost{}, err
		}
		if _, err := io.ReadFull(peer, got); err != nil {
			return idleCost{}, err
		}
		if err := <-sent; err != nil {
			return idleCost{}, err
		}
		if raw {
			continue
		}
		first, second := contenders.Stream(st), contenders.Stream(peer)
		if f.readerClosesFirst {
			first, second = second, first
		}
		if err := first.Close(); err != nil {
			return idleCost{}, err
		}
		if _, err := io.Copy(io.Discard, second); err != nil {
			return idleCost{}, err
		}
		if err := second.Close(); err != nil {
			return idleCost{}, err
		}
	}
	time.Sleep(100 * time.Millisecond) // the closing frames cross and the streams leave their tables
	after := heapstat.Settled()
	n := float64(f.pairs)
	return idleCost{
		heap:       float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n,
		goroutines: float64(runtime.NumGoroutine()-goroutines) / n,
		// Goroutine stacks are not heap: StackInuse.
		stack: float64(int64(after.StackInuse)-int64(before.StackInuse)) / n,
	}, nil
}
