package braid_test

import (
	"context"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/internal/contenders"
	"github.com/braidmux/braid/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
	yamux "github.com/libp2p/go-yamux/v5"
)

// The benchmarks compare braid with go-yamux and raw TCP in one run, over
// loopback TCP. Sub-benchmark names carry impl=NAME so that
//
//	go tool benchstat -col /impl bench.txt
//
// puts the contenders side by side. SetBytes is always the bytes of one op.

const (
	bulkWriteSize   = 64 * 1024 // one Write of the bulk benchmarks
	smallStreams    = 100       // streams of the small-message benchmark
	smallMsgSize    = 64        // bytes per small message
	pingSize        = 64        // bytes per ping-pong request and reply
	bulkNeighbours  = 10        // bulk streams beside the ping-pong stream
	idleStreamCount = 10000     // streams of the idle-memory benchmark
)

// anchors are the contenders every benchmark runs.
func anchors() []contenders.Contender {
	return []contenders.Contender{
		contenders.Braid(true),
		contenders.Braid(false),
		contenders.Yamux(),
		contenders.RawTCP(),
	}
}

// tcpConns returns both ends of a loopback TCP connection.
func tcpConns(tb testing.TB) (net.Conn, net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	c2 := <-accepted
	if c2 == nil {
		tb.Fatal("accept failed")
	}
	return c1, c2
}

// newPair makes a client and server of c over loopback TCP, closed at the
// end of the benchmark.
func newPair(tb testing.TB, c contenders.Contender) (contenders.Session, contenders.Session) {
	tb.Helper()
	c1, c2 := tcpConns(tb)
	client, server, err := c.New(c1, c2)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server
}

// openPair opens a stream from client and accepts it on server.
func openPair(tb testing.TB, client, server contenders.Session) (contenders.Stream, contenders.Stream) {
	tb.Helper()
	type res struct {
		s   contenders.Stream
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := server.Accept()
		ch <- res{s, err}
	}()
	cs, err := client.Open(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	// Some muxers only tell the peer about a stream with its first frame.
	if _, err := cs.Write([]byte{0}); err != nil {
		tb.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		tb.Fatal(r.err)
	}
	var one [1]byte
	if _, err := io.ReadFull(r.s, one[:]); err != nil {
		tb.Fatal(err)
	}
	return cs, r.s
}

// drain reads n bytes from s and reports the error, if any, on done.
func drain(s io.Reader, n int64, done chan<- error) {
	_, err := io.CopyN(io.Discard, s, n)
	done <- err
}

// BenchmarkBulk: one stream, 64 KiB writes. MB/s and allocs per 64 KiB
// write+read (the reader runs beside the writer).
func BenchmarkBulk(b *testing.B) {
	for _, c := range anchors() {
		b.Run("impl="+c.Name, func(b *testing.B) {
			client, server := newPair(b, c)
			cs, ss := openPair(b, client, server)
			buf := make([]byte, bulkWriteSize)
			done := make(chan error, 1)
			b.SetBytes(bulkWriteSize)
			b.ReportAllocs()
			b.ResetTimer()
			go drain(ss, int64(b.N)*bulkWriteSize, done)
			for i := 0; i < b.N; i++ {
				if _, err := cs.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkSmallMessages: 100 streams each writing 64 B messages; one op is
// one message. Reports msgs/s and conn writes per message.
func BenchmarkSmallMessages(b *testing.B) {
	for _, c := range anchors() {
		b.Run("impl="+c.Name, func(b *testing.B) {
			client, server := newPair(b, c)
			streams := make([][2]contenders.Stream, smallStreams)
			for i := range streams {
				cs, ss := openPair(b, client, server)
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

// BenchmarkPingPong: round trips of 64 B on one stream, idle and beside 10
// bulk streams going the same way. Reports p50 and p99 in microseconds.
func BenchmarkPingPong(b *testing.B) {
	for _, load := range []string{"idle", "bulk"} {
		for _, c := range anchors() {
			b.Run("load="+load+"/impl="+c.Name, func(b *testing.B) {
				client, server := newPair(b, c)
				cs, ss := openPair(b, client, server)
				stop := make(chan struct{})
				var wg sync.WaitGroup
				if load == "bulk" {
					for i := 0; i < bulkNeighbours; i++ {
						bc, bs := openPair(b, client, server)
						wg.Add(2)
						go func() {
							defer wg.Done()
							_, _ = io.Copy(io.Discard, bs)
						}()
						go func() {
							defer wg.Done()
							defer bc.Close()
							buf := make([]byte, bulkWriteSize)
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
				}
				go func() {
					buf := make([]byte, pingSize)
					for {
						if _, err := io.ReadFull(ss, buf); err != nil {
							return
						}
						if _, err := ss.Write(buf); err != nil {
							return
						}
					}
				}()
				buf := make([]byte, pingSize)
				rtts := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					if _, err := cs.Write(buf); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(cs, buf); err != nil {
						b.Fatal(err)
					}
					rtts = append(rtts, time.Since(t0))
				}
				b.StopTimer()
				close(stop)
				client.Close()
				server.Close()
				wg.Wait()
				slices.Sort(rtts)
				b.ReportMetric(float64(rtts[len(rtts)/2].Nanoseconds())/1e3, "p50-us")
				b.ReportMetric(float64(rtts[len(rtts)*99/100].Nanoseconds())/1e3, "p99-us")
			})
		}
	}
}

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
				perStream = idleStreamHeap(b, c)
			}
			b.ReportMetric(perStream, "B/stream")
		})
	}
}

func idleStreamHeap(b *testing.B, c contenders.Contender) float64 {
	client, server := newPair(b, c)
	defer client.Close()
	defer server.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	accepted := make(chan []contenders.Stream, 1)
	go func() {
		ss := make([]contenders.Stream, 0, idleStreamCount)
		for len(ss) < idleStreamCount {
			s, err := server.Accept()
			if err != nil {
				break
			}
			ss = append(ss, s)
		}
		accepted <- ss
	}()
	cs := make([]contenders.Stream, 0, idleStreamCount)
	for len(cs) < idleStreamCount {
		s, err := client.Open(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, s)
	}
	ss := <-accepted
	if len(ss) != idleStreamCount {
		b.Fatalf("accepted %d streams", len(ss))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	// The two slices of stream handles are the benchmark's, not the muxer's.
	used -= 2 * float64(cap(cs)) * 16
	runtime.KeepAlive(cs)
	runtime.KeepAlive(ss)
	return used / idleStreamCount
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
