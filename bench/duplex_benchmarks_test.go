package bench_test

import (
	"testing"

	"github.com/braidmux/braid/bench/internal/contenders"
)

// BenchmarkBulkDuplex: bulk both ways on one session, one stream each way
// writing 64 KiB, on TCP and over TLS: a libp2p connection exchanging
// blocks with its peer. One op is one write each way; MB/s counts both
// (SetBytes is the two writes). The writer's look at the socket after a
// bulk batch (readwake.go) and the in-flight budget's markers meet the
// peer's bulk here: its read loop is busy, its writer writes bulk
// beside the pongs. Raw: one conn per stream, so one each way.
func BenchmarkBulkDuplex(b *testing.B) {
	for _, t := range transports() {
		for _, c := range field() {
			b.Run("net="+t.name+"/impl="+c.Name, func(b *testing.B) { benchBulkDuplex(b, t.over(c)) })
		}
	}
}

// benchBulkDuplex is BenchmarkBulkDuplex of one contender.
func benchBulkDuplex(b *testing.B, c contenders.Contender) {
	p := newPair(b, c)
	out, outPeer := openPair(b, p) // the client writes
	in, inPeer := openPair(b, p)   // the server writes
	buf, peerBuf := make([]byte, bulkWriteSize), make([]byte, bulkWriteSize)
	n := int64(b.N) * bulkWriteSize
	done := make(chan error, 3)
	b.SetBytes(2 * bulkWriteSize)
	b.ReportAllocs()
	b.ResetTimer()
	go drain(outPeer, n, done)
	go drain(in, n, done)
	go func() {
		for i := 0; i < b.N; i++ {
			if _, err := inPeer.Write(peerBuf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 0; i < b.N; i++ {
		if _, err := out.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	for range 3 {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
