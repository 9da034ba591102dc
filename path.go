package braid

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// What a session knows of its path, and the connection-level receive
// budget. A new stream starts with the window the path needs (see
// pathEstimate.window), within Config.MaxStreamWindow, the budget and the
// memory manager, so that on a long link it does not pay the protocol's
// 256 KiB initial window as round trips, and on a fast local link it keeps
// no more in flight than the 256 KiB every yamux stream has.

const (
	// assumedRate is the rate of a path whose arrivals have not shown a
	// higher one: 1 Gbit/s, what a data-centre or fibre link carries.
	// Guessing low would cost a new stream on such a link round trips
	// (the chunk-delivery field report); guessing high costs only memory,
	// which MaxStreamWindow, MaxSessionWindow and the memory manager bound,
	// and on a fast local link nothing, since a window of rate x RTT is
	// below the initial window there.
	assumedRate = 125e6

	// rttHorizon is how long the smallest RTT sample stands before a
	// larger one may replace it (queueing inflates samples under load;
	// the smallest is the path's).
	rttHorizon = time.Minute

	// ownQueueSlack: a round trip longer than the least by the horizon's
	// end is taken as the path's only if it exceeds this many times the
	// time the sender's own bytes ahead of it take to read (rttSample).
	// The rate estimate is the best sample, a little above the rate got,
	// so a queued sample comes out at about 1-1.1 times own; 1.25 leaves
	// that room. A route whose round trip grew by more than 1.25 x
	// ackRateGain (2.2 times) is taken at the first sample after the
	// horizon; one that grew less keeps the budget of the round trip
	// before, which still covers at least 80 % of the new path's product.
	ownQueueSlack = 1.25

	// rateHorizon is how long the highest arrival rate stands before a
	// lower sample may replace it.
	rateHorizon = 10 * time.Second

	// rateSampleBytes is how many data bytes the read loop takes between
	// two clock reads for the arrival rate: about 2,000 a second at
	// 1 Gbit/s, none on an idle session.
	rateSampleBytes = 64 * 1024

	// shrinkAfter is how long a grown window's stream must receive
	// nothing before the window shrinks back to the initial one; the
	// session checks its grown streams this often, with one timer, armed
	// only while some stream has grown.
	shrinkAfter = time.Second
)

// pathState is the session's path knowledge. Samples come from the read
// loop (pongs, arrivals); estimates are read by streams.
type pathState struct {
	minRTT atomic.Int64  // ns; 0 until a pong came back
	probe  atomic.Int64  // unix ns of the first ping, while minRTT is 0
	rate   atomic.Uint64 // float64 bits, bytes/s; 0 until sampled

	mu          sync.Mutex // guards the fields below
	rttAt       time.Time  // when minRTT was sampled
	rateAt      time.Time  // when rate was sampled
	sampleStart time.Time  // the current arrival sample's start
	sampleBytes uint64     // data bytes in the current sample
	unsampled   uint64     // data bytes since the last clock read (read loop only)
}

// rttSample records a measured round trip. own is how long the peer takes
// to read what this side had in flight ahead of the ping or marker, at the
// rate learned (ackRate.drainTime; 0 when not known): the part of the
// round trip the sender's own queue may explain.
//
// A smaller sample replaces the least at once. A larger one replaces it
// only once the least is older than rttHorizon (the route may have
// changed), and only if own does not explain it (ownQueueSlack): while
// bulk streams keep the path full, every sample is the round trip plus
// the queue the budget keeps, 1.75 path round trips at ackRateGain, and
// taking one as the path's sized the next budget by it, a minute later
// the next, and so on. In synctest on Broadband, 10 bulk streams beside a
// ping-pong for three minutes, the ping's p50 was 28.2 ms over the first
// 500 round trips and 48.5 over the last 500 (the link's whole buffer,
// what it was without the budget); with the rule, 28.2 over both
// (TestLinkBudgetHoldsPastRTTHorizon).
func (p *pathState) rttSample(rtt, own time.Duration, now time.Time) {
	if rtt <= 0 {
		rtt = 1 // a zero would mean unknown
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := time.Duration(p.minRTT.Load())
	aged := now.Sub(p.rttAt) > rttHorizon
	ownQueueExplains := float64(rtt) <= ownQueueSlack*float64(own)
	if cur == 0 || rtt < cur || aged && !ownQueueExplains {
		p.minRTT.Store(int64(rtt))
		p.rttAt = now
	}
}

// leastRTT is the least round trip sampled within rttHorizon (pings' and
// the writer's markers'); 0 until a pong came back.
func (p *pathState) leastRTT() time.Duration { return time.Duration(p.minRTT.Load()) }

// arrived records n data bytes read by the read loop; every
// rateSampleBytes it reads the clock and, once a round trip has passed
// since the sample began, takes the rate of the sample.
func (p *pathState) arrived(n uint32) {
	p.unsampled += uint64(n)
	if p.unsampled < rateSampleBytes {
		return
	}
	bytes := p.unsampled
	p.unsampled = 0
	now := time.Now()
	rtt := p.leastRTT()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sampleStart.IsZero() || rtt == 0 {
		p.sampleStart, p.sampleBytes = now, 0
		return
	}
	p.sampleBytes += bytes
	elapsed := now.Sub(p.sampleStart)
	if elapsed < rtt {
		return
	}
	r := float64(p.sampleBytes) / elapsed.Seconds()
	if cur := math.Float64frombits(p.rate.Load()); r > cur || now.Sub(p.rateAt) > rateHorizon {
		p.rate.Store(math.Float64bits(r))
		p.rateAt = now
	}
	p.sampleStart, p.sampleBytes = now, 0
}

// estimate returns the path as known now. Before the first pong, the
// first ping's age stands in for the RTT: the round trip is at least that
// long (on a fast local link the pong is back within microseconds, so a
// stream opened that early keeps the initial window).
func (p *pathState) estimate() pathEstimate {
	rtt := p.leastRTT()
	if rtt == 0 {
		if sent := p.probe.Load(); sent != 0 {
			rtt = time.Duration(time.Now().UnixNano() - sent)
		}
	}
	return pathEstimate{rtt: rtt, rate: max(assumedRate, math.Float64frombits(p.rate.Load()))}
}

// recvBudget is the connection-level receive budget
// (Config.MaxSessionWindow): what the session's streams may hold in
// windows beyond InitialStreamWindow each, all together (rust-yamux's
// max_connection_receive_window). Lock-free: streams take and give from
// any goroutine.
type recvBudget struct {
	used  atomic.Int64
	limit int64
}

// take takes up to n bytes of budget and returns how many it got.
func (b *recvBudget) take(n uint32) uint32 {
	for {
		used := b.used.Load()
		got := min(int64(n), b.limit-used)
		if got <= 0 {
			return 0
		}
		if b.used.CompareAndSwap(used, used+got) {
			return uint32(got)
		}
	}
}

// give returns n bytes taken earlier.
func (b *recvBudget) give(n uint32) {
	if n > 0 {
		b.used.Add(-int64(n))
	}
}

// trackGrown adds st to the streams the session checks for idleness, and
// arms the check if it is not armed. The stream may have left the table
// since its caller marked it grown (joinGrownLocked, then st.mu released),
// with releaseStream's untrack before this add: so it looks at removed
// after the add and takes the entry out itself, as joinRides does for the
// ride list, rather than leave the closed stream to the next check. No
// lock held.
func (s *Session) trackGrown(st *Stream) {
	if s.addGrown(st) && st.isRemoved() {
		s.untrackGrown(st)
	}
}

// addGrown puts st in the set and arms the check; false once the session
// closed. No lock held.
func (s *Session) addGrown(st *Stream) bool {
	s.grownMu.Lock()
	defer s.grownMu.Unlock()
	if s.grownClosed {
		return false
	}
	if s.grown == nil {
		s.grown = make(map[*Stream]struct{})
	}
	s.grown[st] = struct{}{}
	if s.shrinkTimer == nil {
		s.shrinkTimer = time.AfterFunc(shrinkAfter, s.shrinkIdle)
	}
	return true
}

// untrackGrown takes st out of the checked streams. No lock held.
func (s *Session) untrackGrown(st *Stream) {
	s.grownMu.Lock()
	delete(s.grown, st)
	s.grownMu.Unlock()
}

// shrinkIdle runs on the shrink timer: every grown stream that received
// nothing since the last check shrinks back to InitialStreamWindow and
// returns its growth to the memory manager (and to the session budget
// what the peer's credit no longer needs). Streams back at the initial
// window leave the set; the timer is armed again while it is not empty.
func (s *Session) shrinkIdle() {
	s.grownMu.Lock()
	streams := make([]*Stream, 0, len(s.grown))
	for st := range s.grown {
		streams = append(streams, st)
	}
	s.grownMu.Unlock()
	var mem int
	var budget uint32
	for _, st := range streams {
		st.mu.Lock()
		m, b, shrunk := st.rw.idleCheck()
		if shrunk && !st.memGone {
			m = min(m, uint32(st.reserved))
			st.reserved -= int(m)
			mem += int(m)
		}
		budget += b
		done := !st.rw.grown()
		if done {
			st.grownIn = false
		}
		st.mu.Unlock()
		if done {
			s.untrackGrown(st)
			// A Read may have grown it again between the unlock and
			// the untrack (joinGrownLocked, then trackGrown, which the
			// untrack undid): then it goes back in the set, or no
			// check would ever shrink it again.
			st.mu.Lock()
			again := st.grownIn && !st.removed
			st.mu.Unlock()
			if again {
				s.trackGrown(st)
			}
		}
	}
	s.releaseMemory(mem)
	s.releaseBudget(budget)
	s.grownMu.Lock()
	defer s.grownMu.Unlock()
	if s.grownClosed || len(s.grown) == 0 {
		s.shrinkTimer = nil
		s.grown = nil // an idle session holds no set
		return
	}
	s.shrinkTimer.Reset(shrinkAfter)
}

// stopShrinking stops the shrink timer for good (the session closed).
func (s *Session) stopShrinking() {
	s.grownMu.Lock()
	defer s.grownMu.Unlock()
	s.grownClosed = true
	if s.shrinkTimer != nil {
		s.shrinkTimer.Stop()
		s.shrinkTimer = nil
	}
	s.grown = nil
}
