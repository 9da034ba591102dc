package libp2pmux

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// countingScope is a network.PeerScope that accounts memory the way
// go-libp2p's resource manager does (a span forwards its reservations to
// the scope, refuses them once Done, ignores releases after Done, and
// releases what is left when Done), and records every misuse: releasing
// more than was reserved, ending a span twice, and ending a span that
// still holds memory, which means the muxer did not release all it
// reserved before the connection ended.
type countingScope struct {
	mu          sync.Mutex
	reserved    int // reserved now, over all spans
	reservedAll int // reserved ever
	spans       int // spans begun
	ended       int // spans ended
	problems    []string
}

var _ network.PeerScope = (*countingScope)(nil)

func (s *countingScope) problem(format string, args ...any) {
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func (s *countingScope) ReserveMemory(size int, _ uint8) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problem("memory reserved on the peer scope itself, not in a span: %d", size)
	return nil
}

func (s *countingScope) ReleaseMemory(size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problem("memory released on the peer scope itself, not in a span: %d", size)
}

func (s *countingScope) Stat() network.ScopeStat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return network.ScopeStat{Memory: int64(s.reserved)}
}

func (s *countingScope) Peer() peer.ID { return "" }

func (s *countingScope) BeginSpan() (network.ResourceScopeSpan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spans++
	return &countingSpan{parent: s}, nil
}

// check waits until every span has ended (a session that the peer closed
// ends its span on its own, shortly after), then fails t on any problem or
// memory still reserved. With wantReserved, it also fails when nothing was
// ever reserved, which would mean the memory hook is not wired.
func (s *countingScope) check(t testing.TB, wantReserved bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		done := s.ended == s.spans
		s.mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != s.spans {
		t.Errorf("%d of %d spans never ended", s.spans-s.ended, s.spans)
	}
	if s.reserved != 0 {
		t.Errorf("%d bytes still reserved", s.reserved)
	}
	for _, p := range s.problems {
		t.Error(p)
	}
	if wantReserved && s.reservedAll == 0 {
		t.Error("no memory was ever reserved")
	}
}

// countingSpan is a span of a countingScope.
type countingSpan struct {
	parent   *countingScope
	reserved int  // guarded by parent.mu
	done     bool // guarded by parent.mu
}

func (s *countingSpan) ReserveMemory(size int, _ uint8) error {
	p := s.parent
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.done {
		return network.ErrResourceScopeClosed
	}
	if size < 0 {
		p.problem("negative reservation: %d", size)
	}
	s.reserved += size
	p.reserved += size
	p.reservedAll += size
	return nil
}

func (s *countingSpan) ReleaseMemory(size int) {
	p := s.parent
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.done {
		p.problem("%d bytes released after the span ended", size)
		return
	}
	if size > s.reserved {
		p.problem("released %d bytes, only %d reserved", size, s.reserved)
	}
	s.reserved -= size
	p.reserved -= size
}

func (s *countingSpan) Stat() network.ScopeStat {
	s.parent.mu.Lock()
	defer s.parent.mu.Unlock()
	return network.ScopeStat{Memory: int64(s.reserved)}
}

func (s *countingSpan) BeginSpan() (network.ResourceScopeSpan, error) {
	return nil, fmt.Errorf("countingSpan: nested spans not supported")
}

func (s *countingSpan) Done() {
	p := s.parent
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.done {
		p.problem("span ended twice")
		return
	}
	s.done = true
	p.ended++
	if s.reserved != 0 {
		p.problem("span ended with %d bytes still reserved by the muxer", s.reserved)
		p.reserved -= s.reserved
		s.reserved = 0
	}
}

// scopedTransport gives every connection of tr, the suite's server side
// too (which gets a nil scope from the suite), the same countingScope in
// place of the scope it is given.
type scopedTransport struct {
	tr    network.Multiplexer
	scope *countingScope
}

func (s scopedTransport) NewConn(nc net.Conn, isServer bool, _ network.PeerScope) (network.MuxedConn, error) {
	return s.tr.NewConn(nc, isServer, s.scope)
}
