package slowconn

import (
	"math/rand/v2"
	"time"
)

// scheduler computes when each packet of one direction arrives. Times are
// durations since the direction's epoch. It is not safe for concurrent use;
// the half that owns it guards it.
type scheduler struct {
	bandwidth int64 // bits per second; 0 = unlimited
	latency   time.Duration
	jitter    time.Duration
	overhead  int
	loss      float64
	rto       time.Duration
	rng       *rand.Rand

	lastDepart time.Duration // when the previous packet's last bit left
	lastArrive time.Duration // when the previous packet arrived
	// carry is the remainder of the previous serialization-time division
	// (bit-nanoseconds), so rounding never accumulates over a transfer.
	carry int64
}

// newScheduler returns a scheduler for l; stream selects an independent
// random stream for the same Seed (one per direction).
func newScheduler(l Link, stream uint64) scheduler {
	return scheduler{
		bandwidth: l.Bandwidth,
		latency:   l.Latency,
		jitter:    l.Jitter,
		overhead:  l.Overhead(),
		loss:      l.Loss,
		rto:       l.RTO(),
		rng:       rand.New(rand.NewPCG(uint64(l.Seed), stream)),
	}
}

// next schedules a packet carrying payload bytes queued at now and returns
// its arrival time.
func (s *scheduler) next(now time.Duration, payload int) time.Duration {
	depart := max(now, s.lastDepart)
	if s.bandwidth > 0 {
		bitNanos := int64(payload+s.overhead)*8*int64(time.Second) + s.carry
		depart += time.Duration(bitNanos / s.bandwidth)
		s.carry = bitNanos % s.bandwidth
	}
	s.lastDepart = depart
	arrive := depart + s.latency
	if s.jitter > 0 {
		arrive += time.Duration(s.rng.Int64N(int64(s.jitter) + 1))
	}
	if s.loss > 0 && s.rng.Float64() < s.loss {
		arrive += s.rto
	}
	arrive = max(arrive, s.lastArrive)
	s.lastArrive = arrive
	return arrive
}
