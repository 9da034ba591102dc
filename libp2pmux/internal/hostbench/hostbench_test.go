package hostbench

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/braidmux/braid/internal/appframe"
	"github.com/braidmux/braid/slowconn"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLatency is the one-way latency of the shaped runs: long enough that
// a run that bypassed the link would be far too fast.
const testLatency = 5 * time.Millisecond

// TestRun runs both scenarios for every muxer, on loopback and through a
// shaped link, and checks that every message arrived (Run fails
// otherwise) and that the shaped runs took the link's round trips.
func TestRun(t *testing.T) {
	link := slowconn.LAN()
	link.Latency = testLatency
	for _, m := range Muxers() {
		for _, shaped := range []bool{false, true} {
			var l slowconn.Link
			if shaped {
				l = link
			}
			specs := []Spec{
				{Scenario: Chunks, Muxer: m, Link: l, N: 30, Batched: false, Warmup: 1, Ops: 2},
				{Scenario: Chunks, Muxer: m, Link: l, N: 30, Batched: true, Ops: 1},
				{Scenario: Notify, Muxer: m, Link: l, Count: 20, Size: 64 << 10},
				{Scenario: Notify, Muxer: m, Link: l, Count: 20, Size: 64 << 10, Security: TLS},
				{Scenario: Ping, Muxer: m, Link: l, Count: 20, Size: 64, Warmup: 2},
				{Scenario: Ping, Muxer: m, Link: l, Count: 20, Size: 64, Security: TLS},
				{Scenario: Ping, Muxer: m, Link: l, Count: 20, Size: 64, Bulk: 2},
			}
			for _, s := range specs {
				t.Run(fmt.Sprintf("%s/%s/shaped=%v/batched=%v/bulk=%d/%s", s.Scenario, m, shaped, s.Batched, s.Bulk, s.Security), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					r, err := Run(ctx, s)
					if err != nil {
						t.Fatal(err)
					}
					wantOps := s.Ops
					if s.Scenario != Chunks {
						wantOps = s.Count
					}
					if (r.BulkBytes > 0) != (s.Bulk > 0) {
						t.Errorf("bulk streams wrote %d bytes during the round trips, want bytes iff bulk (%d)", r.BulkBytes, s.Bulk)
					}
					if s.Scenario == Ping && (r.P50 <= 0 || r.P99 < r.P50 || r.Elapsed < r.P99) {
						t.Errorf("round trips p50 %v, p99 %v of %v, want 0 < p50 <= p99 <= the whole", r.P50, r.P99, r.Elapsed)
					}
					// The ping's loop reuses its buffers: over raw TCP
					// it allocates nothing.
					// Beside bulk streams the round trips go on for
					// minBulkWindow at least.
					opsOK := r.Ops == wantOps
					if s.Bulk > 0 {
						opsOK = r.Ops >= wantOps && r.Elapsed >= minBulkWindow
					}
					if !opsOK || r.Elapsed <= 0 || (r.AllocBytes == 0 && s.Scenario != Ping) {
						t.Errorf("result %+v, want %d ops, a positive time and allocations", r, wantOps)
					}
					// Get, Offer, Want and the delivery are two round
					// trips per op at least; a notification one one-way
					// trip. The link's delay is simulated, so this bound
					// holds however loaded the machine is.
					least := time.Duration(s.Ops) * 4 * testLatency
					switch s.Scenario {
					case Notify:
						least = testLatency
					case Ping:
						least = time.Duration(s.Count) * 2 * testLatency
					}
					if shaped && r.Elapsed < least {
						t.Errorf("took %v through a link of %v one way, want at least %v", r.Elapsed, testLatency, least)
					}
				})
			}
		}
	}
}

// TestValidate checks that a bad spec is an ErrSpec, not a run.
func TestValidate(t *testing.T) {
	good := Spec{Scenario: Chunks, Muxer: Braid, N: 1, Ops: 1}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	bad := map[string]func(*Spec){
		"muxer":     func(s *Spec) { s.Muxer = "quic" },
		"scenario":  func(s *Spec) { s.Scenario = "gossip" },
		"n":         func(s *Spec) { s.N = 0 },
		"ops":       func(s *Spec) { s.Ops = 0 },
		"warmup":    func(s *Spec) { s.Warmup = -1 },
		"loss":      func(s *Spec) { s.Link.Loss = 1 },
		"latency":   func(s *Spec) { s.Link.Latency = -1 },
		"count":     func(s *Spec) { s.Scenario, s.Count, s.Size = Notify, 0, 1 },
		"size":      func(s *Spec) { s.Scenario, s.Count, s.Size = Notify, 1, appframe.MaxSize+1 },
		"security":  func(s *Spec) { s.Security = "plaintext" },
		"pings":     func(s *Spec) { s.Scenario, s.Count, s.Size = Ping, 0, 64 },
		"ping size": func(s *Spec) { s.Scenario, s.Count, s.Size = Ping, 1, maxPingSize+1 },
	}
	for name, f := range bad {
		s := good
		f(&s)
		if err := s.Validate(); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: Validate = %v, want ErrSpec", name, err)
		}
		if _, err := Run(context.Background(), s); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: Run = %v, want ErrSpec", name, err)
		}
	}
}
