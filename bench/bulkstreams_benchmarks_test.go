package bench_test

import (
	"fmt"
	"testing"

	"github.com/braidmux/braid/bench/internal/contenders"
)

// bulkStreams is how many streams BenchmarkBulkStreams sends on: as many
// as the ping-pong's bulk load (BenchmarkPingPong, load=bulk), without the
// ping.
const bulkStreams = 10

// BenchmarkBulkStreams: bulkStreams streams of one session each writing 64
// KiB at once, on TCP and over TLS, and nothing else: a host sending
// several transfers to one peer, with no Read waiting on the sending side.
// One op is one 64 KiB write on one of the streams; MB/s counts them all.
// Raw: one conn per stream. Opening the streams writes a byte on each
// (slowdown.Pair.OpenPair), a small frame, and braid's transfers then
// run at one in-flight budget for severalQuiet (50 ms) before they get
// the lone budgets: -benchtime 20000x (1.3 GB, about a second) measures
// the transfers, 3000x mostly that quiet.
func BenchmarkBulkStreams(b *testing.B) {
	for _, t := range transports() {
		for _, c := range field() {
			b.Run(fmt.Sprintf("net=%s/streams=%d/impl=%s", t.name, bulkStreams, c.Name), func(b *testing.B) {
				benchBulkStreams(b, t.over(c), bulkStreams, bulkWriteSize)
			})
		}
	}
}

// benchBulkStreams is BenchmarkBulkStreams of one contender on n streams
// writing size bytes at a time; one op is one write.
func benchBulkStreams(b *testing.B, c contenders.Contender, n, size int) {
	p := newPair(b, c)
	writers := make([]contenders.Stream, n)
	readers := make([]contenders.Stream, n)
	for i := range n {
		writers[i], readers[i] = openPair(b, p)
	}
	// Stream i writes its share of b.N writes; the first b.N%n write one
	// more.
	share := func(i int) int {
		if i < b.N%n {
			return b.N/n + 1
		}
		return b.N / n
	}
	done := make(chan error, 2*n)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range n {
		go drain(readers[i], int64(share(i)*size), done)
		go func() {
			buf := make([]byte, size)
			for range share(i) {
				if _, err := writers[i].Write(buf); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 2 * n {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
