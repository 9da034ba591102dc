package bench_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/braidmux/braid/bench/internal/slowdown"
)

// Write sizes beside the 64 KiB: the sizes where braid's send path
// changes how it takes a Write. Below 16 KiB a Write is copied and
// coalesced; from 16 KiB it goes by reference, except below 32 KiB while
// its stream is the only one sending (alone.go). Session 49 found 16 KiB
// Writes of one stream at 0.53-0.64x a raw conn here, stop-and-wait by
// reference, which no benchmark of 64 KiB Writes showed.

// sizeWrites are the Write sizes of BenchmarkBulkSizes: small (copied),
// the by-reference threshold, between it and loneCopyMax, at it, above it.
var sizeWrites = []int{4 << 10, 16 << 10, 24 << 10, 32 << 10, 48 << 10}

// sizeNotifyRuns are BenchmarkNotificationSizes' runs: 128 MiB each, as
// the target runs of 64 KiB (2,000 messages), in messages of 16 and 32 KiB.
var sizeNotifyRuns = []slowdown.NotifyRun{{Count: 8000, Size: 16 << 10}, {Count: 4000, Size: 32 << 10}}

// BenchmarkBulkSizes: one stream, Writes of sizeWrites bytes, on TCP and
// over TLS. MB/s of the Writes (the reader runs beside the writer).
func BenchmarkBulkSizes(b *testing.B) {
	for _, t := range transports() {
		for _, size := range sizeWrites {
			for _, c := range anchors() {
				b.Run(fmt.Sprintf("net=%s/size=%dKiB/impl=%s", t.name, size>>10, c.Name), func(b *testing.B) {
					benchBulk(b, t.over(c), size)
				})
			}
		}
	}
}

// BenchmarkNotificationSizes: BenchmarkNotifications in messages of 16 and
// 32 KiB (sizeNotifyRuns). One op is the whole run, on a fresh session;
// reports msgs/s.
func BenchmarkNotificationSizes(b *testing.B) {
	for _, t := range transports() {
		for _, r := range sizeNotifyRuns {
			for _, c := range anchors() {
				b.Run(fmt.Sprintf("net=%s/msg=%dKiBx%d/impl=%s", t.name, r.Size>>10, r.Count, c.Name), func(b *testing.B) {
					benchNotify(b, t.over(c), r)
				})
			}
		}
	}
}

// pingWrites are the neighbours' Write sizes of BenchmarkPingPongSizes: a
// bufio.Writer's 4 KiB (copied by braid), and io.Copy's 32 KiB (by
// reference).
var pingWrites = []int{4 << 10, 32 << 10}

// BenchmarkPingPongSizes: BenchmarkPingPong's load=bulk and load=one-bulk
// (the 64 B round trip beside 10 bulk streams, and beside one) with the
// bulk streams writing pingWrites bytes at a time instead of 64 KiB. One
// op is one round trip; reports p50, p99 and the mean in µs and the bulk
// streams' MB/s.
func BenchmarkPingPongSizes(b *testing.B) {
	for _, t := range transports() {
		for _, neighbours := range []int{bulkNeighbours, 1} {
			for _, size := range pingWrites {
				for _, c := range field() {
					b.Run(fmt.Sprintf("net=%s/streams=%d/write=%dKiB/impl=%s", t.name, neighbours, size>>10, c.Name), func(b *testing.B) {
						r, err := slowdown.PingPongBesideWrites(context.Background(), t.over(c), b.N, neighbours, size, pingPongMaxTime)
						if err != nil {
							b.Fatal(err)
						}
						reportPing(b, r, true)
					})
				}
			}
		}
	}
}

// BenchmarkBulkStreamsSizes: BenchmarkBulkStreams with the streams writing
// 4 KiB at a time (copied by braid), and nothing else beside them. One op
// is one write on one of the streams; MB/s counts them all.
func BenchmarkBulkStreamsSizes(b *testing.B) {
	const size = 4 << 10
	for _, t := range transports() {
		for _, c := range anchors() {
			b.Run(fmt.Sprintf("net=%s/streams=%d/write=%dKiB/impl=%s", t.name, bulkStreams, size>>10, c.Name), func(b *testing.B) {
				benchBulkStreams(b, t.over(c), bulkStreams, size)
			})
		}
	}
}
