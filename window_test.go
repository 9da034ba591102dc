package braid

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/braidmux/braid/slowconn"
	"github.com/stretchr/testify/require"
)

// Receive windows in a live session, on simulated time: what a new stream
// starts with on a known path, and how an idle one gives its memory back.

// longLink is 1 Gbit/s with 50 ms RTT: the path window is 12.5 MB.
func longLink() slowconn.Link { return slowconn.Link{Bandwidth: 1e9, Latency: 25 * time.Millisecond} }

// refusingMemory refuses every reservation of a priority below must.
type refusingMemory struct {
	countingMemory
	must uint8
}

func (m *refusingMemory) ReserveMemory(size int, prio uint8) error {
	if prio < m.must {
		return errors.New("refused")
	}
	return m.countingMemory.ReserveMemory(size, prio)
}

// transfer writes n bytes on a new stream of from and reads them on to;
// it returns both streams.
func transfer(t *testing.T, from, to *Session, n int) (*Stream, *Stream) {
	t.Helper()
	st, err := from.OpenStream(context.Background())
	require.NoError(t, err)
	werr := make(chan error, 1)
	go func() {
		_, err := st.Write(make([]byte, n))
		werr <- err
	}()
	peer, err := to.AcceptStream()
	require.NoError(t, err)
	_, err = io.ReadFull(peer, make([]byte, n))
	require.NoError(t, err)
	require.NoError(t, <-werr)
	return st, peer
}

// longLinkPair makes a client with the default configuration and a server
// with cfg over slowconn's long link (longLink), the receive-window tests'
// pair: the server's windows and memory manager are what they look at.
func longLinkPair(t *testing.T, cfg *Config) (client, server *Session) {
	t.Helper()
	c1, c2 := slowconn.Pipe(longLink())
	client, err := Client(c1, nil)
	require.NoError(t, err)
	server, err = Server(c2, cfg)
	require.NoError(t, err)
	return client, server
}

// Promise: on a path the session knows, a stream's receive window starts
// at the path's window (granted with the ACK; with the SYN for streams we
// open), reserved from the memory manager; an idle stream shrinks back to
// the initial window within two shrink checks and the manager sees the
// memory come back; the session budget keeps only what the peer's credit
// still allows; and the stream grows again when it is used.
func TestWindowPathStartAndIdleShrink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &countingMemory{}
		cfg := DefaultConfig()
		cfg.Memory = mem
		client, server := longLinkPair(t, cfg)
		defer client.Close()
		defer server.Close()
		time.Sleep(time.Second) // the RTT probes come back
		require.InDelta(t, 50*time.Millisecond, server.RTT(), float64(time.Millisecond))

		pathWindow := server.path.estimate().window(cfg.MaxStreamWindow)
		require.Greater(t, pathWindow, uint32(InitialStreamWindow))
		_, peer := transfer(t, client, server, 8<<20)
		peer.mu.Lock()
		window := peer.rw.window
		peer.mu.Unlock()
		require.GreaterOrEqual(t, window, pathWindow, "the stream started with the path's window")
		require.EqualValues(t, window, mem.reserved.Load(), "the window is reserved")

		time.Sleep(3 * shrinkAfter)
		peer.mu.Lock()
		window, credit := peer.rw.window, peer.rw.credit
		peer.mu.Unlock()
		require.EqualValues(t, InitialStreamWindow, window, "idle window shrank")
		require.EqualValues(t, InitialStreamWindow, mem.reserved.Load(), "the memory manager got the growth back")
		require.EqualValues(t, max(int64(credit)-InitialStreamWindow, 0), server.budget.used.Load(),
			"the budget holds the peer's remaining credit beyond the initial window")

		// Used again, it grows again.
		_, peer2 := transfer(t, client, server, 8<<20)
		require.Greater(t, mem.reserved.Load(), int64(2*InitialStreamWindow))
		require.NoError(t, peer.Close())
		require.NoError(t, peer2.Close())
		require.NoError(t, client.Close())
		require.NoError(t, server.Close())
		require.Zero(t, mem.reserved.Load(), "memory still reserved after close")
		require.Zero(t, server.budget.used.Load(), "budget still held after close")
	})
}

// Promise: a fresh session on a fast local link gives new streams the
// protocol's initial window and nothing more, and a memory manager that
// refuses growth keeps a long path's streams at the initial window too.
func TestWindowStartBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &refusingMemory{must: streamPriority}
		cfg := DefaultConfig()
		cfg.Memory = mem
		client, server := longLinkPair(t, cfg)
		time.Sleep(time.Second)
		_, peer := transfer(t, client, server, 1<<20)
		peer.mu.Lock()
		require.EqualValues(t, InitialStreamWindow, peer.rw.window, "growth refused")
		peer.mu.Unlock()
		require.NoError(t, client.Close())
		require.NoError(t, server.Close())
	})
	synctest.Test(t, func(t *testing.T) {
		c1, c2 := slowconn.Pipe(slowconn.Link{Bandwidth: 1e9, Latency: 20 * time.Microsecond})
		client, err := Client(c1, nil)
		require.NoError(t, err)
		server, err := Server(c2, nil)
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
		st, peer := transfer(t, client, server, 4<<20)
		for _, s := range []*Stream{st, peer} {
			s.mu.Lock()
			require.EqualValues(t, InitialStreamWindow, s.rw.window, "a local link keeps the initial window")
			s.mu.Unlock()
		}
		require.NoError(t, client.Close())
		require.NoError(t, server.Close())
	})
}

// Promise: the session budget bounds all windows together: with a budget
// of one stream's growth, two streams on a long path share it.
func TestWindowSessionBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.MaxSessionWindow = int(cfg.MaxStreamWindow) - InitialStreamWindow
		client, server := longLinkPair(t, cfg)
		time.Sleep(time.Second)
		var peers []*Stream
		for range 3 {
			_, p := transfer(t, client, server, 4<<20)
			peers = append(peers, p)
		}
		var grown int64
		for _, p := range peers {
			p.mu.Lock()
			grown += int64(p.rw.window) - InitialStreamWindow
			p.mu.Unlock()
		}
		require.LessOrEqual(t, grown, int64(cfg.MaxSessionWindow))
		require.LessOrEqual(t, server.budget.used.Load(), int64(cfg.MaxSessionWindow))
		require.NoError(t, client.Close())
		require.NoError(t, server.Close())
	})
}

// lockProbingMemory is a MemoryManager that, on every call, tries to
// take the session's locks and those of all its streams: a lock the
// caller holds never comes free, and the call is recorded as made under
// it. (On simulated time a lock held by another goroutine is let go
// before the clock moves, unless that goroutine waits while holding it,
// which braid never does.)
type lockProbingMemory struct {
	countingMemory
	sess   atomic.Pointer[Session]
	calls  atomic.Int64
	locked atomic.Int64 // calls made with a session or stream lock held
}

// lockProbeTries is how many times, a simulated microsecond apart, the
// probe tries a lock before it counts it as held by its caller.
const lockProbeTries = 100

func probeLock(mu interface {
	TryLock() bool
	Unlock()
}) bool {
	for range lockProbeTries {
		if mu.TryLock() {
			mu.Unlock()
			return true
		}
		time.Sleep(time.Microsecond)
	}
	return false
}

func (m *lockProbingMemory) probe() {
	m.calls.Add(1)
	s := m.sess.Load()
	if s == nil {
		return
	}
	if !probeLock(&s.mu) || !probeLock(&s.grownMu) {
		m.locked.Add(1)
		return
	}
	s.mu.Lock()
	streams := make([]*Stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	for _, st := range streams {
		if !probeLock(&st.mu) {
			m.locked.Add(1)
			return
		}
	}
}

func (m *lockProbingMemory) ReserveMemory(size int, prio uint8) error {
	m.probe()
	return m.countingMemory.ReserveMemory(size, prio)
}

func (m *lockProbingMemory) ReleaseMemory(size int) {
	m.probe()
	m.countingMemory.ReleaseMemory(size)
}

// Promise: the memory manager is called with no session or stream lock
// held (issue #15's Shape): on a new stream either way, the path's window
// granted with the SYN and the ACK, growth, the idle shrink and the
// streams' end.
func TestMemoryManagerOutsideLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &lockProbingMemory{}
		cfg := DefaultConfig()
		cfg.Memory = mem
		client, server := longLinkPair(t, cfg)
		mem.sess.Store(server)
		time.Sleep(time.Second)                         // the RTT probes come back: the path is known
		_, in := transfer(t, client, server, 8<<20)     // incoming, ACK grant, growth
		out, peer := transfer(t, server, client, 1<<20) // outgoing, SYN grant
		time.Sleep(3 * shrinkAfter)                     // idle: shrink
		require.EqualValues(t, 2*InitialStreamWindow, mem.reserved.Load(), "both idle windows shrank")
		for _, st := range []*Stream{in, out, peer} {
			require.NoError(t, st.Close())
		}
		require.NoError(t, client.Close())
		require.NoError(t, server.Close())
		require.Zero(t, mem.reserved.Load())
		require.Greater(t, mem.calls.Load(), int64(5))
		require.Zero(t, mem.locked.Load(), "memory manager calls made with a session or stream lock held")
	})
}
