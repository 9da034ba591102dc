package bench_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
)

// BenchmarkManySessions: a host with many peers, all busy at once:
// slowdown.ManySessions (32) session pairs over loopback TCP and TLS.
//
//   - work=bulk: one stream per session, 64 KiB writes; one op is one
//     write (b.N spread over the sessions). Reports MB/s of all sessions.
//   - work=rpc: one caller per session, a new stream per call as
//     BenchmarkStreamRPC's; one op is one call. Reports calls a second
//     of all sessions (rpc/s). Raw TCP is left out, as there.
//
// With one session braid runs its writer and read loop beside the
// application on the machine's cores; here the cores are shared among
// the sessions, so these measure what a byte or a call costs.
func BenchmarkManySessions(b *testing.B) {
	rivals := []contenders.Contender{contenders.Braid(true), contenders.Yamux(), contenders.Smux(), contenders.Hashicorp()}
	for _, t := range transports() {
		for _, work := range []string{"bulk", "rpc"} {
			impls := rivals
			if work == "bulk" {
				impls = append(impls, contenders.RawTCP())
			}
			for _, c := range impls {
				b.Run(fmt.Sprintf("net=%s/work=%s/impl=%s", t.name, work, c.Name), func(b *testing.B) {
					ctx := context.Background()
					pairs, err := slowdown.LoopbackPairs(ctx, t.over(c), slowdown.ManySessions)
					if err != nil {
						b.Fatal(err)
					}
					each := max(1, b.N/len(pairs))
					b.ReportAllocs()
					b.ResetTimer()
					switch work {
					case "bulk":
						d, err := slowdown.SessionsBulk(ctx, pairs, int64(each)*bulkWriteSize)
						if err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(float64(each*len(pairs))*bulkWriteSize/d.Seconds()/1e6, "MB/s")
					case "rpc":
						d, err := slowdown.SessionsRPC(ctx, pairs, each)
						if err != nil {
							b.Fatal(err)
						}
						b.ReportMetric(float64(each*len(pairs))/d.Seconds(), "rpc/s")
					}
				})
			}
		}
	}
}
