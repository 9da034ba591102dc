package braid

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid/slowconn"
	"github.com/stretchr/testify/require"
)

// Promise: the ledger passes reservations and releases on, refuses a
// reservation the manager refuses, and once closed returns all it holds
// in one release, refuses every reservation with ErrSessionClosed and
// drops every release.
func TestMemoryLedger(t *testing.T) {
	mem := &refusingMemory{must: streamPriority}
	l := memoryLedger{m: mem}
	require.NoError(t, l.reserve(100, streamPriority))
	require.Error(t, l.reserve(50, windowPriority), "the manager's refusal")
	require.NoError(t, l.reserve(30, streamPriority))
	l.release(20)
	require.EqualValues(t, 110, mem.reserved.Load())
	l.close()
	require.Zero(t, mem.reserved.Load(), "close returns all that is held")
	require.ErrorIs(t, l.reserve(10, streamPriority), ErrSessionClosed)
	l.release(40)
	l.close()
	require.Zero(t, mem.reserved.Load(), "nothing reaches the manager after close")

	var none memoryLedger // no manager: nothing to account
	require.NoError(t, none.reserve(10, streamPriority))
	none.release(10)
	none.close()
}

// gatedMemory is a MemoryManager that tracks what is reserved and
// records any call made after closed is set. While armed, the first
// release waits inside the manager, before it is counted, until gate is
// closed: entered is closed when it starts waiting.
type gatedMemory struct {
	mu       sync.Mutex
	reserved int
	armed    bool
	closed   bool     // the session's Close has returned
	late     []string // calls made after closed
	entered  chan struct{}
	gate     chan struct{}
}

func newGatedMemory() *gatedMemory {
	return &gatedMemory{entered: make(chan struct{}), gate: make(chan struct{})}
}

func (m *gatedMemory) ReserveMemory(size int, _ uint8) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		m.late = append(m.late, fmt.Sprintf("reserve %d", size))
	}
	m.reserved += size
	return nil
}

func (m *gatedMemory) ReleaseMemory(size int) {
	m.mu.Lock()
	wait := m.armed
	m.armed = false
	m.mu.Unlock()
	if wait {
		close(m.entered)
		<-m.gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		m.late = append(m.late, fmt.Sprintf("release %d", size))
	}
	m.reserved -= size
}

func (m *gatedMemory) held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reserved
}

// Promise: Close returns only when all memory the session reserved is
// back with the manager, and the manager hears nothing from the session
// after that, even when a release is in passing as Close runs: here the
// idle shrink's (the shrink timer's goroutine outlives the shutdown),
// held inside the manager while Close starts. Before the ledger, Close
// returned with the shrink's bytes still reserved and the release came
// after it (go-libp2p's conformance suite with a strict peer scope saw
// it: "span ended with 8259499 bytes still reserved").
func TestCloseWaitsForMemoryInPassing(t *testing.T) {
	mem := newGatedMemory()
	cfg := DefaultConfig()
	cfg.Memory = mem
	// 1 Gbit/s with a 20 ms round trip: a 2.5 MB path window, so a
	// stream's window grows beyond the initial one.
	c1, c2 := slowconn.Pipe(slowconn.Link{Bandwidth: 1e9, Latency: 10 * time.Millisecond})
	client, err := Client(c1, nil)
	require.NoError(t, err)
	defer client.Close()
	server, err := Server(c2, cfg)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond) // the RTT probes come back: the path is known
	transfer(t, client, server, 8<<20)
	require.Greater(t, mem.held(), InitialStreamWindow, "the stream's window grew")

	mem.mu.Lock()
	mem.armed = true
	mem.mu.Unlock()
	go func() {
		server.shrinkIdle() // the stream was active: this marks it idle
		server.shrinkIdle() // this shrinks it: the release waits at the gate
	}()
	select {
	case <-mem.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle shrink released nothing")
	}
	closed := make(chan struct{})
	go func() {
		_ = server.Close()
		mem.mu.Lock()
		mem.closed = true
		mem.mu.Unlock()
		close(closed)
	}()
	select {
	case <-closed:
		t.Error("Close returned while a release was in passing")
	case <-time.After(200 * time.Millisecond):
	}
	close(mem.gate)
	<-closed
	mem.mu.Lock()
	defer mem.mu.Unlock()
	require.Zero(t, mem.reserved, "memory still reserved after Close")
	require.Empty(t, mem.late, "manager calls after Close returned")
}

// errNoMemory is the refusal of noMemory.
var errNoMemory = errors.New("no memory for you")

// noMemory refuses every reservation.
type noMemory struct{}

func (noMemory) ReserveMemory(int, uint8) error { return errNoMemory }
func (noMemory) ReleaseMemory(int)              {}

// Promise: OpenStream returns the memory manager's refusal as it is (the
// session is not closed: errors.Is finds no ErrSessionClosed), and once
// the session is closed it returns the session's end, not the ledger's.
func TestOpenStreamMemoryRefusal(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Memory = noMemory{}
	client, _ := sessionPair(t, cfg)
	_, err := client.OpenStream(context.Background())
	require.ErrorIs(t, err, errNoMemory)
	require.NotErrorIs(t, err, ErrSessionClosed)

	cfg.Memory = &countingMemory{}
	client, _ = sessionPair(t, cfg)
	require.NoError(t, client.Close())
	_, err = client.OpenStream(context.Background())
	require.ErrorIs(t, err, ErrSessionClosed)
}

// TestMplexBufferReserved: an mplex stream's receive buffer, which no
// window bounds (only MaxReceiveBuffer), is reserved from Config.Memory as
// it fills: with streams whose reader has not read yet, the manager holds
// at least what they buffer, and it all goes back with the session.
func TestMplexBufferReserved(t *testing.T) {
	const streams, each = 4, 2 << 20 // within MaxReceiveBuffer: no push-back
	mem := &countingMemory{}
	c1, c2 := tcpPair(t)
	client, err := Client(c1, &Config{Protocol: Mplex})
	require.NoError(t, err)
	defer client.Close()
	server, err := Server(c2, &Config{Protocol: Mplex, Memory: mem})
	require.NoError(t, err)
	var accepted []*Stream
	for range streams {
		st, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		_, err = st.Write(make([]byte, each))
		require.NoError(t, err)
		a, err := server.AcceptStream()
		require.NoError(t, err)
		accepted = append(accepted, a)
	}
	buffered := func() int {
		n := 0
		for _, a := range accepted {
			a.mu.Lock()
			n += a.recv.size
			a.mu.Unlock()
		}
		return n
	}
	require.Eventually(t, func() bool { return buffered() == streams*each }, 5*time.Second, time.Millisecond, "every byte buffered")
	require.GreaterOrEqual(t, int(mem.reserved.Load()), streams*each, "reserved against buffered")
	require.NoError(t, server.Close())
	require.Zero(t, mem.reserved.Load(), "all of it back with the session")
}

// cappedMemory grants reservations while the total stays within limit.
type cappedMemory struct {
	mu          sync.Mutex
	held, limit int
}

func (m *cappedMemory) ReserveMemory(size int, _ uint8) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held+size > m.limit {
		return errNoMemory
	}
	m.held += size
	return nil
}

func (m *cappedMemory) ReleaseMemory(size int) {
	m.mu.Lock()
	m.held -= size
	m.mu.Unlock()
}

// TestMplexCloseReadNeedsNoMemory: after CloseRead an mplex stream drops
// what comes and its Writes keep working, so a message arriving then
// reserves nothing: before, the read loop reserved a buffer for bytes it
// was about to drop, and the manager's refusal reset the stream, write
// side and all.
func TestMplexCloseReadNeedsNoMemory(t *testing.T) {
	cfg := mplexConfig()
	mem := &cappedMemory{limit: 2 * InitialStreamWindow} // the stream's opening reservation and one more
	cfg.Memory = mem
	p, s := newMplexRawPeer(t, cfg)
	p.send(rawMplex(0, mplexNewStream, nil))
	st := acceptWithin(t, s)
	require.NoError(t, st.CloseRead())
	held := func() int {
		mem.mu.Lock()
		defer mem.mu.Unlock()
		return mem.held
	}
	before := held()
	p.send(rawMplex(0, mplexMessageInitiator, make([]byte, MplexMaxMessage)))
	p.send(rawMplex(1, mplexNewStream, nil))
	acceptWithin(t, s) // the read loop is past the message
	require.Equal(t, before+InitialStreamWindow, held(), "only stream 1's opening reservation, none for dropped bytes")
	_, err := st.Write([]byte("still writing"))
	require.NoError(t, err, "Write after CloseRead and a message")
	f := p.await("stream 0's next frame", func(f mplexRawFrame) bool { return f.id == 0 })
	require.Equal(t, uint64(mplexMessageReceiver), f.tag, "a Message, not a Reset")
}
