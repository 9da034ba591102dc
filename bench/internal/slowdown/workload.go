// Package slowdown measures how close a multiplexer comes to the raw
// network limit on a simulated link, with the definitions of braid's
// docs/design.md ("The slowdown harness and the benchmarks"):
//
//   - CPU-bound limit: the workload through the multiplexer over an
//     unlimited in-memory link.
//   - Network-bound limit: the same payload through one raw conn over the
//     same link, one write per message, as an application without a
//     multiplexer would write it; measured in the same run.
//   - Ideal: the payload over the link's goodput with full packets, plus one
//     latency.
//   - slowdown = T(muxer)/T(network-bound) - 1; efficiency = T(ideal)/T(muxer).
//
// Every figure is the best of a few repetitions of a fixed amount of work,
// and a run restores the GOMAXPROCS it changes. The tests and the report
// tool share this code.
package slowdown

import (
	"math/rand/v2"
	"time"
)

// Workload is a fixed amount of work: streams that each send messages.
type Workload struct {
	Name     string
	Streams  int
	Messages int // per stream
	// MinSize and MaxSize bound the message sizes, drawn uniformly with a
	// fixed seed so that every contender sends the same bytes.
	MinSize, MaxSize int
	// Linear makes the streams send one after another instead of all at
	// once.
	Linear bool
}

// workloadSeed fixes the message sizes of every workload.
const workloadSeed = 0xb4a1d

// sizes returns the message sizes of each stream.
func (w Workload) sizes() [][]int {
	r := rand.New(rand.NewPCG(workloadSeed, uint64(w.Streams)))
	out := make([][]int, w.Streams)
	for i := range out {
		out[i] = make([]int, w.Messages)
		for j := range out[i] {
			out[i][j] = w.MinSize + r.IntN(w.MaxSize-w.MinSize+1)
		}
	}
	return out
}

// Payload returns the bytes the workload sends.
func (w Workload) Payload() int64 {
	var n int64
	for _, s := range w.sizes() {
		for _, m := range s {
			n += int64(m)
		}
	}
	return n
}

// SmallPackets is 100 streams sending messages of random size 1..1024 B at
// once (the go-mplex benchmark of the same name).
func SmallPackets(messages int) Workload {
	return Workload{Name: "SmallPackets", Streams: 100, Messages: messages, MinSize: 1, MaxSize: 1024}
}

// LinearPackets is SmallPackets with the streams sending one after another.
func LinearPackets(messages int) Workload {
	w := SmallPackets(messages)
	w.Name, w.Linear = "LinearPackets", true
	return w
}

// TinyPackets is 100 streams sending 64 B messages at once: where per-packet
// overhead makes coalescing beat one write per message.
func TinyPackets(messages int) Workload {
	return Workload{Name: "TinyPackets", Streams: 100, Messages: messages, MinSize: 64, MaxSize: 64}
}

// BulkTransfer is 4 streams each sending size bytes in 64 KiB writes.
func BulkTransfer(size int) Workload {
	return Workload{Name: "BulkTransfer", Streams: 4, Messages: max(size/bulkWrite, 1), MinSize: bulkWrite, MaxSize: bulkWrite}
}

// bulkWrite is the write size of BulkTransfer.
const bulkWrite = 64 * 1024

// MessagesFor returns how many messages per stream make w last about d on a
// link with the given goodput (bytes/s), at least minMessages.
func MessagesFor(w Workload, goodput float64, d time.Duration) int {
	avg := float64(w.MinSize+w.MaxSize) / 2
	n := int(goodput * d.Seconds() / avg / float64(w.Streams))
	return max(n, minMessages)
}

// minMessages keeps a workload from being all setup and no work.
const minMessages = 1
