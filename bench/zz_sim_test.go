package bench_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
)

func TestZZSimPing(t *testing.T) {
	for _, l := range []slowconn.Profile{{Name: "LAN", Link: slowconn.LAN()}, {Name: "Broadband", Link: slowconn.Broadband()}, {Name: "Mobile", Link: slowconn.Mobile()}, {Name: "LongFat", Link: slowconn.LongFat()}} {
		for _, c := range []contenders.Contender{contenders.Braid(true), contenders.Yamux()} {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				r, err := slowdown.PingPongLink(context.Background(), c, l.Link, 100, 10, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s %s: p50 %v p99 %v bulk %.2f MB/s (goodput %.2f) sim %v", l.Name, c.Name, slowdown.Percentile(r.RTTs, 50), slowdown.Percentile(r.RTTs, 99), r.BulkMBps(), l.Link.Goodput()/1e6, time.Since(start))
			})
		}
	}
}
