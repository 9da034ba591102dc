package braid

import "sync"

// memoryLedger passes a session's reservations on to Config.Memory and
// keeps their sum, so that a session that ends returns in one release all
// it still holds, and later calls never reach the manager: a reservation
// is refused and a release dropped (what it returns went back already).
//
// Streams release their memory as they leave the table, but some code
// that reserves or releases can outlive the session's shutdown: the
// shrink timer's run (path.go) that took bytes off a stream before the
// shutdown released it, or a Read that reserved a window growth just
// before. Without the ledger their releases would reach the manager
// after Close returned, when go-libp2p's span has ended.
type memoryLedger struct {
	m MemoryManager // nil: nothing is accounted; set once

	mu     sync.Mutex // guards the fields below; a leaf lock, held while calling m
	held   int        // reserved from m and not yet released
	closed bool       // the session ended: held went back to m
}

// reserve reserves n bytes with priority prio; after the session ended
// it is ErrSessionClosed. No lock held.
func (l *memoryLedger) reserve(n int, prio uint8) error {
	if l.m == nil || n <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrSessionClosed
	}
	if err := l.m.ReserveMemory(n, prio); err != nil {
		return err
	}
	l.held += n
	return nil
}

// release returns n bytes reserved earlier. No lock held.
func (l *memoryLedger) release(n int) {
	if l.m == nil || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	n = min(n, l.held) // never more than was reserved
	l.held -= n
	l.m.ReleaseMemory(n)
}

// close returns everything still held, once, and turns away all later
// calls. The session's shutdown calls it last. No lock held.
func (l *memoryLedger) close() {
	if l.m == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if l.held > 0 {
		l.m.ReleaseMemory(l.held)
	}
	l.held = 0
}

// reserveBuffered accounts an mplex stream's receive buffer once n more
// bytes are in it. Without flow control no window bounds the buffer, only
// Config.MaxReceiveBuffer (4 MiB by default, and one frame more into an
// empty buffer), while a stream reserves InitialStreamWindow when it
// opens: so what the buffer would hold beyond the stream's reservation is
// reserved first, in steps of InitialStreamWindow, and stays reserved
// until the stream is removed. Bytes the stream drops (its read side
// closed: CloseRead, a reset) are reserved nothing: a refusal for them
// would reset a stream whose Writes must keep working. It reports false
// when the memory manager refuses (the caller resets the stream, as for a
// full buffer). Only the read loop calls it; no lock held.
func (s *Stream) reserveBuffered(n uint32) bool {
	sess := s.session
	if sess.cfg.Memory == nil {
		return true
	}
	s.mu.Lock()
	need := s.recv.size + int(n) - s.reserved
	gone := s.memGone || s.readState != halfOpen // bytes about to be dropped (receivedLocked) need none
	s.mu.Unlock()
	if need <= 0 || gone {
		return true
	}
	step := (need + InitialStreamWindow - 1) / InitialStreamWindow * InitialStreamWindow
	if sess.mem.reserve(step, streamPriority) != nil {
		return false
	}
	s.mu.Lock()
	mem, budget := s.keepReservedLocked(uint32(step)) // removed meanwhile: handed back
	s.mu.Unlock()
	sess.releaseMemory(int(mem))
	sess.releaseBudget(budget)
	return true
}
