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
// go-yamux, smux and hashicorp/yamux. Raw TCP is not among them: its
// streams are connections of their own, and a connection per call leaves
// each in TIME_WAIT for a minute, so that a few thousand calls a run
// exhaust the loopback port range (28,232 ports here) within a few runs;
// one run of 1,000 calls measured 9-20k calls a second over TCP and 1.1-2.4k
// over TLS, a handshake each (session 29).
func BenchmarkStreamRPC(b *testing.B) {
	impls := []contenders.Contender{contenders.Braid(true), contenders.Yamux(), contenders.Hashicorp(), contenders.Smux()}
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
