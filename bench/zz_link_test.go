package bench_test

import (
	"context"
	"testing"

	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
)

func BenchmarkZZPingLink(b *testing.B) {
	for _, l := range []slowconn.Profile{{Name: "LAN", Link: slowconn.LAN()}, {Name: "Broadband", Link: slowconn.Broadband()}, {Name: "LongFat", Link: slowconn.LongFat()}, {Name: "Mobile", Link: slowconn.Mobile()}} {
		for _, c := range field() {
			b.Run("link="+l.Name+"/impl="+c.Name, func(b *testing.B) {
				r, err := slowdown.PingPongLink(context.Background(), c, l.Link, b.N, bulkNeighbours, pingPongMaxTime)
				if err != nil {
					b.Fatal(err)
				}
				reportPing(b, r, true)
			})
		}
	}
}
