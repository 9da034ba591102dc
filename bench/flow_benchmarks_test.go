package bench_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/bench/internal/contenders"
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
