package bench_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
)

// rpcCallers are the concurrent callers of BenchmarkStreamRPC: one, for
// the round trip of a stream's life, and 32, for a host serving many
// peers' queries at once.
var rpcCallers = []int{1, 32}

// BenchmarkStreamRPC: the request-response pattern of libp2p's
// protocols, a new stream per call (slowdown.StreamRPC). One op is one
// call; the callers run at once, each making its share of b.N calls.
// Reports calls a second (rpc/s), over loopback TCP and TLS, beside
// go-yamux, smux, hashicorp/yamux and raw TCP, whose streams are
// connections of their own: a connection per call (over TLS, a handshake
// per call), what a muxer saves.
func BenchmarkStreamRPC(b *testing.B) {
	impls := []contenders.Contender{contenders.Braid(true), contenders.Yamux(), contenders.Hashicorp(), contenders.Smux(), contenders.RawTCP()}
	for _, t := range transports() {
		for _, callers := range rpcCallers {
			for _, c := range impls {
				b.Run(fmt.Sprintf("net=%s/callers=%d/impl=%s", t.name, callers, c.Name), func(b *testing.B) {
					calls := max(1, b.N/callers)
					d, err := slowdown.StreamRPC(context.Background(), t.over(c), callers, calls)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(calls*callers)/d.Seconds(), "rpc/s")
				})
			}
		}
	}
}
