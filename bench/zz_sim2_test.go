package bench_test

import (
	"context"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/slowconn"
)

func TestZZSimMobile(t *testing.T) {
	if os.Getenv("ZZ_MOBILE") == "" {
		t.Skip()
	}
	for seed := int64(1); seed <= 6; seed++ {
		l := slowconn.Mobile()
		l.Seed = seed
		synctest.Test(t, func(t *testing.T) {
			r, err := slowdown.PingPongLink(context.Background(), contenders.Braid(true), l, 100, 10, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("seed %d: p50 %v p99 %v bulk %.3f", seed, slowdown.Percentile(r.RTTs, 50), slowdown.Percentile(r.RTTs, 99), r.BulkMBps())
		})
	}
}
