package bench_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
	yamux "github.com/libp2p/go-yamux/v5"
)

// The benchmarks compare braid with go-yamux and raw TCP in one run, over
// loopback TCP and over TLS 1.3 on loopback TCP (net=tls: every libp2p
// connection is secured, and a secured conn has no writev; the raw limit
// is then one TLS connection per stream). Sub-benchmark names carry
// impl=NAME so that
//
//	go tool benchstat -col /impl bench.txt
//
// puts the contenders side by side. SetBytes is always the bytes of one op.
// Run with -count 5 or more: each count runs every contender once, so the
// contenders interleave.

const (
	bulkWriteSize   = 64 * 1024 // one Write of the bulk benchmarks
	smallStreams    = 100       // streams of the small-message benchmark
	smallMsgSize    = 64        // bytes per small message
	bulkNeighbours  = 10        // bulk streams beside the ping-pong stream
	idleStreamCount = 10000     // streams of the idle-memory benchmark
)

// transport is a kind of conn the loopback benchmarks run over.
type transport struct {
	name string
	over func(contenders.Contender) contenders.Contender
}

// transports are loopback TCP and TLS 1.3 over it.
func transports() []transport {
	return []transport{
		{"tcp", func(c contenders.Contender) contenders.Contender { return c }},
		{"tls", contenders.TLS},
	}
}

// field is anchors and the other multiplexers that beat braid somewhere:
// the contenders of the latency benchmarks.
func field() []contenders.Contender {
	return append(anchors(), contenders.Smux(), contenders.Hashicorp())
}

// anchors are the contenders every benchmark runs.
func anchors() []contenders.Contender {
	return []contenders.Contender{
		contenders.Braid(true),
		contenders.Braid(false),
		contenders.Yamux(),
		contenders.RawTCP(),
	}
}

// newPair makes c's sessions over loopback TCP (the harness's pair,
// shared with braidbench), closed at the end of the benchmark.
func newPair(tb testing.TB, c contenders.Contender) *slowdown.Pair {
	tb.Helper()
	p, err := slowdown.LoopbackPair(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// openPair opens a stream on p's client and accepts it on its server.
func openPair(tb testing.TB, p *slowdown.Pair) (contenders.Stream, contenders.Stream) {
	tb.Helper()
	cs, ss, err := p.OpenPair(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return cs, ss
}

// drain reads n bytes from s and reports the error, if any, on done.
func drain(s io.Reader, n int64, done chan<- error) {
	_, err := io.CopyN(io.Discard, s, n)
	done <- err
}

// BenchmarkBulk: one stream, 64 KiB writes. MB/s and allocs per 64 KiB
// write+read (the reader runs beside the writer).
func BenchmarkBulk(b *testing.B) {
	for _, t := range transports() {
		for _, c := range anchors() {
			b.Run("net="+t.name+"/impl="+c.Name, func(b *testing.B) { benchBulk(b, t.over(c), bulkWriteSize) })
		}
	}
}

// benchBulk is BenchmarkBulk of one contender, in Writes of size bytes.
func benchBulk(b *testing.B, c contenders.Contender, size int) {
	cs, ss := openPair(b, newPair(b, c))
	buf := make([]byte, size)
	done := make(chan error, 1)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	go drain(ss, int64(b.N)*int64(size), done)
	for i := 0; i < b.N; i++ {
		if _, err := cs.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSmallMessages: 100 streams each writing 64 B messages, on TCP
// and over TLS; one op is one message. Reports msgs/s and conn writes per
// message.
func BenchmarkSmallMessages(b *testing.B) {
	for _, t := range transports() {
		for _, c := range anchors() {
			b.Run("net="+t.name+"/impl="+c.Name, func(b *testing.B) {
				p := newPair(b, t.over(c))
				client := p.Client
				streams := make([][2]contenders.Stream, smallStreams)
				for i := range streams {
					cs, ss := openPair(b, p)
					streams[i] = [2]contenders.Stream{cs, ss}
				}
				msg := make([]byte, smallMsgSize)
				b.SetBytes(smallMsgSize)
				b.ReportAllocs()
				writes0 := client.Writes()
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				done := make(chan error, smallStreams)
				for i := range streams {
					share := b.N / smallStreams
					if i < b.N%smallStreams {
						share++
					}
					go drain(streams[i][1], int64(share)*smallMsgSize, done)
					wg.Add(1)
					go func(s contenders.Stream, share int) {
						defer wg.Done()
						for j := 0; j < share; j++ {
							if _, err := s.Write(msg); err != nil {
								b.Error(err)
								return
							}
						}
					}(streams[i][0], share)
				}
				wg.Wait()
				for range streams {
					if err := <-done; err != nil {
						b.Fatal(err)
					}
				}
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
				b.ReportMetric(float64(client.Writes()-writes0)/float64(b.N), "writes/msg")
			})
		}
	}
}

// BenchmarkPingPong: round trips of 64 B on one stream, idle, idle with an
// Accept waiting on both sessions as in a go-libp2p host (load=accepting;
// slowdown.PingPongHost), beside 10
// bulk streams going the same way (load=bulk: issue #12's target 1;
// slowdown.PingPongLoad, as braidbench runs it) and beside one
// (load=one-bulk). One op is one round trip; reports p50, p99 and the
// mean (slowdown.Mean) in microseconds and, beside bulk, the bulk streams'
// goodput meanwhile (bulk-MB/s), so that no contender wins the latency by
// starving bulk.
//
// One bulk stream is the field's common case (a transfer and a peer's
// requests beside it) and the one that prices a lone stream's in-flight
// budget: between two round trips the bulk stream sends alone, so its
// budget is what the next request waits behind (before loneQuiet, session
// 16: braid's p50 here 206 µs on TCP at GOMAXPROCS 2, smux's 122).
func BenchmarkPingPong(b *testing.B) {
	loads := []struct {
		name       string
		neighbours int
		accepting  bool
	}{{"idle", 0, false}, {"accepting", 0, true}, {"bulk", bulkNeighbours, false}, {"one-bulk", 1, false}}
	for _, t := range transports() {
		for _, load := range loads {
			neighbours := load.neighbours
			for _, c := range field() {
				b.Run("net="+t.name+"/load="+load.name+"/impl="+c.Name, func(b *testing.B) {
					run := slowdown.PingPongLoad
					if load.accepting {
						run = func(ctx context.Context, c contenders.Contender, n, _ int, maxTime time.Duration) (slowdown.PingResult, error) {
							return slowdown.PingPongHost(ctx, c, n, maxTime)
						}
					}
					r, err := run(context.Background(), t.over(c), b.N, neighbours, pingPongMaxTime)
					if err != nil {
						b.Fatal(err)
					}
					reportPing(b, r, neighbours > 0)
				})
			}
		}
	}
}

// BenchmarkPingPongAfterQuiet: a 64 B request every RequestGap (10 ms)
// beside one stream writing 64 KiB, on TCP and over TLS: each request is
// the first small message after the transfer had the conn to itself, and
// waits behind what the transfer has in flight (its window, or an
// in-flight bound). One op is one round trip; reports p50, p99 and the
// mean in µs and the transfer's MB/s. -benchtime 100x takes about a
// second a run.
func BenchmarkPingPongAfterQuiet(b *testing.B) {
	for _, t := range transports() {
		for _, c := range field() {
			b.Run("net="+t.name+"/impl="+c.Name, func(b *testing.B) {
				r, err := slowdown.PingPongAfterQuiet(context.Background(), t.over(c), b.N, slowdown.RequestGap, pingPongMaxTime)
				if err != nil {
					b.Fatal(err)
				}
				reportPing(b, r, true)
			})
		}
	}
}

// BenchmarkPingPongSpaced: the 64 B round trip beside 10 bulk streams, as
// BenchmarkPingPong's load=bulk, with a random pause before each round
// trip (mean slowdown.SpacedGap, 1 ms; slowdown.PingPongSpaced), so that
// the requests come at random moments of the bulk traffic instead of
// back to back: a muxer whose bulk comes in bursts can't have its p50
// made of the round trips that fall between the bursts. One op is one
// round trip; reports p50, p99 and the mean in µs and the bulk streams'
// MB/s. -benchtime 2000x takes about 2.5 s a run.
func BenchmarkPingPongSpaced(b *testing.B) { benchPingPongSpaced(b, slowdown.SpacedGap) }

// benchPingPongSpaced runs the 64 B round trip beside bulkNeighbours bulk
// streams after random pauses of meanGap on average, on TCP and TLS, for
// every contender of the field.
func benchPingPongSpaced(b *testing.B, meanGap time.Duration) {
	for _, t := range transports() {
		for _, c := range field() {
			b.Run("net="+t.name+"/impl="+c.Name, func(b *testing.B) {
				r, err := slowdown.PingPongSpaced(context.Background(), t.over(c), b.N, bulkNeighbours, meanGap, pingPongMaxTime)
				if err != nil {
					b.Fatal(err)
				}
				reportPing(b, r, true)
			})
		}
	}
}

// sparseGap is BenchmarkPingPongSparse's mean pause before a round trip:
// longer than braid's loneQuiet (5 ms), shorter than its severalQuiet
// (50 ms), so that each request comes after a quiet a lone transfer
// would end and several transfers do not.
const sparseGap = 10 * time.Millisecond

// BenchmarkPingPongSparse: BenchmarkPingPongSpaced with a mean pause of
// sparseGap: a protocol's occasional small messages (requests, acks,
// heartbeats) beside 10 transfers. Each request waits behind what the
// transfers have in flight when it comes. -benchtime 200x takes about 2 s
// a run.
func BenchmarkPingPongSparse(b *testing.B) { benchPingPongSpaced(b, sparseGap) }

// reportPing reports a ping run's p50, p99 and mean round trip in µs and,
// with bulk (the run had bulk neighbours), their MB/s.
func reportPing(b *testing.B, r slowdown.PingResult, bulk bool) {
	sorted := r.Sorted()
	b.ReportMetric(float64(slowdown.Percentile(sorted, 50).Nanoseconds())/1e3, "p50-us")
	b.ReportMetric(float64(slowdown.Percentile(sorted, 99).Nanoseconds())/1e3, "p99-us")
	b.ReportMetric(float64(slowdown.Mean(r.RTTs).Nanoseconds())/1e3, "mean-us")
	if bulk {
		b.ReportMetric(r.BulkMBps(), "bulk-MB/s")
	}
}

// BenchmarkNotifications: Polkadot's notifications with backpressure, 2,000
// messages of 64 KiB and 500 of 256 KiB written at once on one stream
// (slowdown.Notify, as braidbench runs it). One op is the whole run, on a
// fresh session; reports msgs/s.
func BenchmarkNotifications(b *testing.B) {
	for _, t := range transports() {
		for _, r := range slowdown.NotifyTargetRuns() {
			for _, c := range anchors() {
				name := fmt.Sprintf("net=%s/msg=%dKiBx%d/impl=%s", t.name, r.Size>>10, r.Count, c.Name)
				b.Run(name, func(b *testing.B) { benchNotify(b, t.over(c), r) })
			}
		}
	}
}

// benchNotify is one contender's notification run r (slowdown.Notify) per
// op, reported in msgs/s.
func benchNotify(b *testing.B, c contenders.Contender, r slowdown.NotifyRun) {
	b.SetBytes(int64(r.Count * r.Size))
	var total time.Duration
	for i := 0; i < b.N; i++ {
		d, err := slowdown.Notify(context.Background(), c, r.Count, r.Size)
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	b.ReportMetric(float64(r.Count*b.N)/total.Seconds(), "msgs/s")
}

// pingPongMaxTime only guards against a hang: the benchmark sizes b.N.
const pingPongMaxTime = 10 * time.Minute

// BenchmarkIdleStreams: heap held per idle stream, both ends together, with
// 10,000 streams open. One op opens and accepts all of them.
func BenchmarkIdleStreams(b *testing.B) {
	many := []contenders.Contender{
		contenders.BraidConfig("braid", func(c *braid.Config) { c.MaxIncomingStreams = 2 * idleStreamCount }),
		contenders.YamuxConfig("yamux", func(c *yamux.Config) { c.MaxIncomingStreams = 2 * idleStreamCount }),
	}
	for _, c := range many {
		b.Run("impl="+c.Name, func(b *testing.B) {
			var perStream float64
			for i := 0; i < b.N; i++ {
				var err error
				if perStream, err = slowdown.IdleStreamHeap(context.Background(), c, idleStreamCount); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(perStream, "B/stream")
		})
	}
}

// BenchmarkLinks runs the slowdown workloads over the slowconn profiles for
// braid, go-yamux and a raw conn (one write per message). One op is the
// whole workload; SetBytes is its payload, so MB/s is goodput. Each muxer's
// slowdown is against a raw run of the same workload on the same link,
// measured in the same sub-benchmark. Run with -cpu 1,2,4 for the
// parallelism sweep. Workloads are sized to about linkBenchWork of the
// link's goodput.
func BenchmarkLinks(b *testing.B) {
	const linkBenchWork = 200 * time.Millisecond
	links := []slowconn.Profile{
		{Name: "LAN", Link: slowconn.LAN()},
		{Name: "Broadband", Link: slowconn.Broadband()},
		{Name: "Mobile", Link: slowconn.Mobile()},
		{Name: "LongFat", Link: slowconn.LongFat()},
	}
	workloads := []func(slowconn.Link) slowdown.Workload{
		func(l slowconn.Link) slowdown.Workload {
			w := slowdown.SmallPackets(1)
			w.Messages = slowdown.MessagesFor(w, l.Goodput(), linkBenchWork)
			return w
		},
		func(l slowconn.Link) slowdown.Workload {
			w := slowdown.LinearPackets(1)
			w.Messages = slowdown.MessagesFor(w, l.Goodput(), linkBenchWork)
			return w
		},
		func(l slowconn.Link) slowdown.Workload {
			return slowdown.BulkTransfer(int(l.Goodput() * linkBenchWork.Seconds() / 4))
		},
	}
	muxers := []contenders.Contender{contenders.Braid(true), contenders.Braid(false), contenders.Yamux()}
	for _, mk := range workloads {
		for _, p := range links {
			w := mk(p.Link)
			b.Run(w.Name+"/link="+p.Name+"/impl=tcp", func(b *testing.B) {
				b.SetBytes(w.Payload())
				var writes uint64
				for i := 0; i < b.N; i++ {
					r, err := slowdown.Raw(p.Link, w)
					if err != nil {
						b.Fatal(err)
					}
					writes = r.Writes
				}
				b.ReportMetric(float64(writes)/float64(w.Streams*w.Messages), "writes/msg")
			})
			for _, c := range muxers {
				b.Run(w.Name+"/link="+p.Name+"/impl="+c.Name, func(b *testing.B) {
					raw, err := slowdown.Raw(p.Link, w)
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(w.Payload())
					b.ResetTimer()
					var total time.Duration
					var writes uint64
					for i := 0; i < b.N; i++ {
						r, err := slowdown.Mux(p.Link, c, w)
						if err != nil {
							b.Fatal(err)
						}
						total += r.Time
						writes = r.Writes
					}
					mean := total / time.Duration(b.N)
					b.ReportMetric(float64(writes)/float64(w.Streams*w.Messages), "writes/msg")
					b.ReportMetric(100*(mean.Seconds()/raw.Time.Seconds()-1), "slowdown-%")
				})
			}
		}
	}
	b.Run("EchoRoundTrips/link=LAN", func(b *testing.B) {
		for _, c := range muxers {
			b.Run("impl="+c.Name, func(b *testing.B) {
				var rtt time.Duration
				for i := 0; i < b.N; i++ {
					r, err := slowdown.EchoRTT(slowconn.LAN(), c, 20)
					if err != nil {
						b.Fatal(err)
					}
					rtt += r
				}
				b.ReportMetric(float64((rtt / time.Duration(b.N)).Microseconds()), "rtt-us")
			})
		}
	})
}
