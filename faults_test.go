package braid

// The reliability suite: what braid promises when the network, the peer or
// the load misbehaves, and the test that keeps each promise. A muxer sits
// on every connection of a node that faces the open internet, so these are
// the promises that node relies on.
//
// Faults (this file):
//
//   - A cut link (the conn closed, its writes failing, or its reads failing
//     at a random byte offset, over TCP and slowconn) during 100 concurrent
//     transfers fails every blocked Read, Write, OpenStream and AcceptStream
//     within 1 s; both sessions close on their own; every byte delivered is
//     a correct prefix (SHA-256); a stream cut short never ends in a plain
//     io.EOF but in an error matching ErrStreamReset; no goroutine is left
//     and nothing panics.                            TestFaultLinkCut
//   - A peer that stops reading (window exhausted, or TCP buffers full)
//     blocks writers until their deadline, then Write returns
//     os.ErrDeadlineExceeded with exactly the bytes it reports delivered;
//     the stream and session stay usable.   TestFaultStalledPeerDeadline
//   - A conn that accepts no byte for Config.ConnectionWriteTimeout closes
//     the session with an error matching ErrConnectionWriteTimeout (via
//     Session.Err and on the streams); a slow conn that keeps accepting
//     bytes does not.                          TestFaultConnectionWriteTimeout
//   - Keep-alive detects a silent peer (reads and discards, never answers
//     pings): the session closes with ErrKeepAliveTimeout; a healthy idle
//     peer is never closed.                          TestFaultKeepAlive
//   - Two peers echoing large (4 MiB) messages at each other through a low
//     bandwidth-delay-product link (rust-yamux #102), a zero-buffer
//     net.Pipe and TCP never deadlock.            TestFaultEchoLowBDP
//   - Go-away during transfers: existing streams finish intact; the peer's
//     OpenStream fails with ErrRemoteGoAway (*GoAwayError, Remote true);
//     the sender refuses incoming streams (a SYN that raced the go-away is
//     reset) and its own OpenStream fails with ErrLocalGoAway; both sides
//     then close cleanly and leave no goroutine.    TestFaultGoAwayMidTransfer
//
// Scale (scale_test.go):
//
//   - 10,000 concurrent streams on one session work (every one echoes) and
//     an idle stream costs at most maxIdleStreamBytes of heap counting both
//     ends; the stream tables drain to zero after close.
//     TestScaleManyStreams
//   - 100 sessions x 100 streams in one process work; a session pair costs
//     at most maxSessionPairBytes of heap.          TestScaleManySessions
//   - Throughput is fair: N streams writing at once for a fixed time, the
//     slowest gets at least 50 % of the mean.       TestScaleFairness
//
// Soak (soak_test.go):
//
//   - Mixed traffic with random resets and session closes for -soak=D:
//     zero corrupted bytes (every completed stream hash-checked, every cut
//     one prefix-checked), resets surface as ErrStreamReset, zero leaked
//     goroutines.                        TestSoak (TestSoakSmoke runs it 1 s)
//
// Hostile peers, raw bytes (attacks_test.go):
//
//   - Each of 30 attacks (stream floods, duplicate/wrong-parity SYNs, data
//     after FIN or RST, window overflow and wrap, ping/go-away/empty-frame
//     floods, slowloris, a peer that never reads, malformed headers, ...)
//     ends in its stated outcome: stays up (answers a ping, accepts and
//     opens a stream), RST with its code, go-away 1 with ErrProtocol, or a
//     close with ErrKeepAliveTimeout / ErrConnectionWriteTimeout; heap
//     growth stays within the row's bound (<= 1 MiB) and no goroutine is
//     left after Close.                               TestAttacks
//
// Malformed input and fuzzing are kept by hostile_test.go and fuzz_test.go.
//
// Under the race detector the sizes shrink where the detector's cost (or its
// limit of 8128 live goroutines) would make a test meaningless or slow; each
// place says so. Timing bounds are the ones the promises state (1 s), with
// everything else waited for "eventually, within 5 s".

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/braidmux/braid/internal/tlstest"
	"github.com/braidmux/braid/slowconn"
	"github.com/libp2p/go-libp2p-testing/race"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// cutReturnBound is how long after a cut every blocked call may take to
// return: the promise states 1 s. Braid needs a few milliseconds (the read
// loop sees the failure and fails every stream at once).
const cutReturnBound = time.Second

// eventually is the bound for everything whose timing no promise states.
const eventually = 5 * time.Second

// faultSeed returns the seed of a randomized test and logs it; set
// BRAID_SEED to replay a failure.
func faultSeed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BRAID_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "BRAID_SEED")
		seed = v
	}
	t.Logf("seed %d (replay with BRAID_SEED=%d)", seed, seed)
	return seed
}

// faultPayload returns the deterministic payload of transfer idx: random
// bytes from (seed, idx), starting with idx and size so that a receiver can
// regenerate what it should have got.
func faultPayload(seed uint64, idx, size int) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[0:], seed)
	binary.LittleEndian.PutUint64(key[8:], uint64(idx))
	b := make([]byte, size)
	_, _ = rand.NewChaCha8(key).Read(b)
	binary.BigEndian.PutUint32(b[0:4], uint32(idx))
	binary.BigEndian.PutUint32(b[4:8], uint32(size))
	return b
}

// isPrefix reports whether got (n bytes hashing to sum) is a prefix of want.
func isPrefix(n int64, sum []byte, want []byte) bool {
	if n > int64(len(want)) {
		return false
	}
	w := sha256.Sum256(want[:n])
	return bytes.Equal(sum, w[:])
}

// readHashed reads r until an error and returns how many bytes came, their
// SHA-256 and the error that ended the reading, io.EOF included (io.Copy
// would hide it, and a plain io.EOF is what must never end a cut stream).
func readHashed(r io.Reader) (int64, []byte, error) {
	h := sha256.New()
	n, err := hashInto(h, r)
	return n, h.Sum(nil), err
}

// checkEnd checks how a read of want ended: complete with io.EOF, or cut
// short with an error matching ErrStreamReset (never a plain io.EOF), and
// in both cases a correct prefix.
func checkEnd(n int64, sum []byte, err error, want []byte) error {
	if !isPrefix(n, sum, want) {
		return fmt.Errorf("corrupted: %d bytes received are not a prefix of the %d sent", n, len(want))
	}
	if err == io.EOF {
		if n != int64(len(want)) {
			return fmt.Errorf("stream cut short at %d of %d bytes ended in a plain io.EOF", n, len(want))
		}
		return nil
	}
	if n < int64(len(want)) && !errors.Is(err, ErrStreamReset) {
		return fmt.Errorf("stream cut short at %d of %d bytes: %v does not match ErrStreamReset", n, len(want), err)
	}
	return nil
}

// errLinkCut is what a cutConn returns once it is cut.
var errLinkCut = errors.New("test: link cut")

// cutMode is how a cutConn fails.
type cutMode int

const (
	cutClose  cutMode = iota // the conn is closed, both ends see it; counts both directions
	cutWrites                // writes fail, reads keep working; counts writes
	cutReads                 // reads fail, writes keep working; counts reads
)

func (m cutMode) String() string {
	return [...]string{"close", "writes-fail", "reads-fail"}[m]
}

// cutConn is a net.Conn that fails after limit bytes: the operation that
// reaches the limit passes the bytes up to it and then fails, and every
// later operation of the counted direction fails with errLinkCut.
type cutConn struct {
	net.Conn
	mode  cutMode
	limit int64

	mu    sync.Mutex
	count int64
	cutAt time.Time
	cut   chan struct{} // closed when the limit is reached
}

func newCutConn(c net.Conn, mode cutMode, limit int64) *cutConn {
	return &cutConn{Conn: c, mode: mode, limit: limit, cut: make(chan struct{})}
}

// take reserves up to want bytes of the budget; 0 means the conn is cut.
func (c *cutConn) take(want int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int(min(int64(want), c.limit-c.count))
	if n <= 0 {
		c.tripLocked()
		return 0
	}
	c.count += int64(n)
	if c.count >= c.limit {
		c.tripLocked()
	}
	return n
}

func (c *cutConn) tripLocked() {
	if c.cutAt.IsZero() {
		c.cutAt = time.Now()
		close(c.cut)
		if c.mode == cutClose {
			_ = c.Conn.Close()
		}
	}
}

// cutTime returns when the conn was cut.
func (c *cutConn) cutTime() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cutAt
}

func (c *cutConn) isCut() bool {
	select {
	case <-c.cut:
		return true
	default:
		return false
	}
}

func (c *cutConn) Read(p []byte) (int, error) {
	if c.mode == cutWrites {
		return c.Conn.Read(p)
	}
	if c.isCut() {
		return 0, errLinkCut
	}
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	allowed := c.take(n)
	if allowed < n {
		return allowed, errLinkCut
	}
	return n, err
}

func (c *cutConn) Write(p []byte) (int, error) {
	if c.mode == cutReads {
		return c.Conn.Write(p)
	}
	if c.isCut() {
		return 0, errLinkCut
	}
	allowed := c.take(len(p))
	if allowed == 0 {
		return 0, errLinkCut
	}
	n, err := c.Conn.Write(p[:allowed])
	if err == nil && allowed < len(p) {
		err = errLinkCut
	}
	return n, err
}

// callLog records when the calls a test watches returned.
type callLog struct {
	mu      sync.Mutex
	wg      sync.WaitGroup
	pending map[string]int
	ends    []callEnd
	fails   []string
}

type callEnd struct {
	what string
	at   time.Time
	err  error
}

func newCallLog() *callLog { return &callLog{pending: make(map[string]int)} }

// start registers a watched call; the returned func records its end.
func (l *callLog) start(what string) func(error) {
	l.mu.Lock()
	l.pending[what]++
	l.mu.Unlock()
	l.wg.Add(1)
	return func(err error) {
		l.mu.Lock()
		l.pending[what]--
		if l.pending[what] == 0 {
			delete(l.pending, what)
		}
		l.ends = append(l.ends, callEnd{what, time.Now(), err})
		l.mu.Unlock()
		l.wg.Done()
	}
}

func (l *callLog) fail(format string, args ...any) {
	l.mu.Lock()
	l.fails = append(l.fails, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// wait waits up to d for every watched call; it returns the calls still
// pending.
func (l *callLog) wait(d time.Duration) map[string]int {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(d):
		l.mu.Lock()
		defer l.mu.Unlock()
		return maps.Clone(l.pending)
	}
}

// faultLinks are the links the fault tests run over: loopback TCP and a
// simulated broadband link.
func faultLinks() []struct {
	name string
	pair func(testing.TB) (net.Conn, net.Conn)
} {
	return []struct {
		name string
		pair func(testing.TB) (net.Conn, net.Conn)
	}{
		{"tcp", tcpPair},
		{"slowconn-broadband", func(testing.TB) (net.Conn, net.Conn) { return slowconn.Pipe(slowconn.Broadband()) }},
	}
}

// newFaultSession makes one side of a session.
func newFaultSession(t testing.TB, c net.Conn, cfg *Config, client bool) *Session {
	t.Helper()
	s, err := newSession(c, cfg, client)
	require.NoError(t, err)
	return s
}

// Promise: a cut link fails every blocked call within 1 s, delivered data
// is a correct prefix, a cut stream never reads as a clean io.EOF, and no
// goroutine is left.
func TestFaultLinkCut(t *testing.T) {
	const transfers = 100
	maxSize := 64 * 1024
	if race.WithRace() {
		maxSize = 16 * 1024 // the race detector makes every byte ~10x dearer
	}
	seed := faultSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	for li, link := range faultLinks() {
		for _, mode := range []cutMode{cutClose, cutWrites, cutReads} {
			for _, cutOpener := range []bool{true, false} {
				side := map[bool]string{true: "opener-cut", false: "acceptor-cut"}[cutOpener]
				openerClient := li%2 == 0 // both roles: tcp opens from the client, slowconn from the server
				sizes := make([]int, transfers)
				total := 0
				for i := range sizes {
					sizes[i] = 8 + rng.IntN(maxSize)
					total += sizes[i]
				}
				// The counted direction carries about total bytes (twice
				// for cutClose): cut somewhere in its first 90 %.
				span := int64(total) * 9 / 10
				if mode == cutClose {
					span *= 2
				}
				limit := 1 + rng.Int64N(span)
				t.Run(link.name+"/"+mode.String()+"/"+side, func(t *testing.T) {
					testLinkCut(t, link.pair, mode, cutOpener, openerClient, seed, sizes, limit)
				})
			}
		}
	}
}

func testLinkCut(t *testing.T, pair func(testing.TB) (net.Conn, net.Conn), mode cutMode, cutOpener, openerClient bool, seed uint64, sizes []int, limit int64) {
	ignore := goleak.IgnoreCurrent()
	c1, c2 := pair(t)
	var cc *cutConn
	if cutOpener {
		cc = newCutConn(c1, mode, limit)
		c1 = cc
	} else {
		cc = newCutConn(c2, mode, limit)
		c2 = cc
	}
	cfgA := DefaultConfig()
	cfgB := DefaultConfig()
	cfgB.MaxUnackedStreams = 1 // so that B's second OpenStream blocks
	a := newFaultSession(t, c1, cfgA, openerClient)
	b := newFaultSession(t, c2, cfgB, !openerClient)
	defer a.Close()
	defer b.Close()

	log := newCallLog()
	// B accepts and echoes, checking what it receives as a prefix of what
	// the payload's header says was sent.
	doneAccept := log.start("B.AcceptStream")
	go func() {
		for {
			st, err := b.AcceptStream()
			if err != nil {
				doneAccept(err)
				return
			}
			done := log.start("B echo Read/Write")
			go func() {
				done(faultEcho(st, seed, log))
			}()
		}
	}()
	// B opens streams A never accepts: the second OpenStream blocks on
	// the ACK backlog until the cut.
	doneOpen := log.start("B.OpenStream")
	go func() {
		for {
			if _, err := b.OpenStream(context.Background()); err != nil {
				doneOpen(err)
				return
			}
		}
	}()
	// A runs the transfers.
	for i, size := range sizes {
		done := log.start("A transfer")
		go func() {
			done(faultTransfer(a, seed, i, size, log))
		}()
	}

	select {
	case <-cc.cut:
	case <-time.After(30 * time.Second):
		t.Fatalf("the link was never cut at byte %d", limit)
	}
	if pending := log.wait(eventually); pending != nil {
		t.Fatalf("calls still blocked %v after the cut: %v", eventually, pending)
	}
	cutAt := cc.cutTime()
	var worst time.Duration
	var worstWhat string
	for _, e := range log.ends {
		if e.err == nil {
			continue
		}
		if d := e.at.Sub(cutAt); d > worst {
			worst, worstWhat = d, e.what
		}
	}
	t.Logf("cut %s at byte %d; %d calls ended, the slowest %v after the cut (%s)", mode, limit, len(log.ends), worst, worstWhat)
	for _, f := range log.fails {
		t.Error(f)
	}
	require.LessOrEqual(t, worst, cutReturnBound, "%s returned %v after the cut", worstWhat, worst)

	// Both sessions closed on their own, and fresh calls fail at once.
	for name, s := range map[string]*Session{"A": a, "B": b} {
		require.Eventually(t, s.IsClosed, eventually, time.Millisecond, "session %s still open after the cut", name)
		require.Error(t, s.Err())
		_, err := s.OpenStream(context.Background())
		require.ErrorIs(t, err, ErrSessionClosed)
		_, err = s.AcceptStream()
		require.ErrorIs(t, err, ErrSessionClosed)
	}
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	goleak.VerifyNone(t, ignore)
}

// faultTransfer opens a stream, writes the payload of transfer idx while
// reading its echo, and checks the echo.
func faultTransfer(a *Session, seed uint64, idx, size int, log *callLog) error {
	st, err := a.OpenStream(context.Background())
	if err != nil {
		return err
	}
	payload := faultPayload(seed, idx, size)
	doneWrite := log.start("A Write")
	go func() {
		_, err := st.Write(payload)
		if err == nil {
			err = st.CloseWrite()
		}
		doneWrite(err)
	}()
	n, sum, err := readHashed(st)
	if cerr := checkEnd(n, sum, err, payload); cerr != nil {
		log.fail("opener, transfer %d: %v", idx, cerr)
	}
	if err == io.EOF {
		return nil
	}
	return err
}

// faultEcho echoes st and checks what it receives against the payload its
// first eight bytes name.
func faultEcho(st *Stream, seed uint64, log *callLog) error {
	h := sha256.New()
	var head []byte
	var n int64
	buf := make([]byte, 16*1024)
	writing := true
	var err error
	for {
		var m int
		m, err = st.Read(buf)
		h.Write(buf[:m])
		n += int64(m)
		if len(head) < 8 {
			head = append(head, buf[:min(m, 8-len(head))]...)
		}
		if m > 0 && writing {
			if _, werr := st.Write(buf[:m]); werr != nil {
				writing = false
				if !errors.Is(werr, ErrStreamReset) {
					log.fail("acceptor: echo write failed with %v, not an error matching ErrStreamReset", werr)
				}
			}
		}
		if err != nil {
			break
		}
	}
	if len(head) < 8 {
		if err == io.EOF {
			log.fail("acceptor: stream cut after %d bytes ended in a plain io.EOF", n)
		}
		return err
	}
	idx := int(binary.BigEndian.Uint32(head[0:4]))
	size := int(binary.BigEndian.Uint32(head[4:8]))
	if size < 8 || size > 1<<24 {
		log.fail("acceptor: corrupted header %x", head)
		return err
	}
	if cerr := checkEnd(n, h.Sum(nil), err, faultPayload(seed, idx, size)); cerr != nil {
		log.fail("acceptor, transfer %d: %v", idx, cerr)
	}
	if err == io.EOF {
		if writing {
			if cerr := st.CloseWrite(); cerr != nil {
				return cerr
			}
		}
		return nil
	}
	return err
}

// Promise: a peer that stops reading blocks writers until their deadline,
// then Write returns os.ErrDeadlineExceeded and reports exactly the bytes
// the peer gets; the stream and session stay usable.
func TestFaultStalledPeerDeadline(t *testing.T) {
	const deadlineAfter = 300 * time.Millisecond

	// The peer's application stops reading: its receive window runs out.
	t.Run("window-exhausted", func(t *testing.T) {
		// Windows pinned at the initial 256 KiB: on a loaded machine the
		// loopback RTT can measure milliseconds, and a path that long
		// would start streams with more than the 1 MiB written here.
		cfg := DefaultConfig()
		cfg.MaxStreamWindow = InitialStreamWindow
		client, server := sessionPair(t, cfg)
		const streams = 4
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := stalledWindowCheck(client, server, i, deadlineAfter); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		require.False(t, client.IsClosed())
		require.False(t, server.IsClosed())
	})

	// The peer stops reading the connection: the TCP buffers fill and the
	// writer's Write on the conn blocks. Small buffers make the conn, not
	// the stream windows, the bottleneck.
	t.Run("tcp-buffers-full", func(t *testing.T) {
		c1, c2 := tcpPair(t)
		require.NoError(t, c1.(*net.TCPConn).SetWriteBuffer(16*1024))
		require.NoError(t, c2.(*net.TCPConn).SetReadBuffer(16*1024))
		cfg := DefaultConfig()
		cfg.DisableKeepAlive = true
		s, err := Client(c1, cfg) // ConnectionWriteTimeout stays 10 s: not reached
		require.NoError(t, err)
		defer s.Close()
		defer c2.Close() // first, so that Close needn't wait for the stalled write
		const streams = 8
		errs := make(chan error, streams)
		start := time.Now()
		for range streams {
			go func() {
				st, err := s.OpenStream(context.Background())
				if err != nil {
					errs <- err
					return
				}
				_ = st.SetWriteDeadline(start.Add(deadlineAfter))
				chunk := make([]byte, 1024) // copied frames: the writer holds no caller memory
				for {
					if _, err := st.Write(chunk); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for range streams {
			select {
			case err := <-errs:
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			case <-time.After(deadlineAfter + eventually):
				t.Fatal("Write still blocked long after its deadline")
			}
		}
		require.GreaterOrEqual(t, time.Since(start), deadlineAfter, "Write returned before its deadline")
		sent := s.Stats().BytesSent
		t.Logf("conn accepted %d bytes of %d streams x 256 KiB windows before blocking", sent, streams)
		require.Less(t, sent, uint64(streams*InitialStreamWindow), "the conn was never the bottleneck")
		require.False(t, s.IsClosed(), "a write deadline must not close the session")
	})
}

// stalledWindowCheck writes 4 windows to a stream whose reader waits: Write
// must stop at the deadline having written what the window allowed; then
// the reader gets exactly those bytes, and the rest flows once the deadline
// is cleared.
func stalledWindowCheck(client, server *Session, idx int, after time.Duration) error {
	payload := faultPayload(uint64(idx), idx, 4*InitialStreamWindow)
	st, err := client.OpenStream(context.Background())
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	_ = st.SetWriteDeadline(start.Add(after))
	n, err := st.Write(payload)
	elapsed := time.Since(start)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("stream %d: Write to a stalled peer returned %d, %v; want os.ErrDeadlineExceeded", idx, n, err)
	}
	if elapsed < after {
		return fmt.Errorf("stream %d: Write returned after %v, before its %v deadline", idx, elapsed, after)
	}
	if n == 0 || n >= len(payload) {
		return fmt.Errorf("stream %d: Write reported %d bytes; want part of the %d", idx, n, len(payload))
	}
	peer, err := acceptFrom(server, st.ID())
	if err != nil {
		return err
	}
	// Exactly n bytes arrive: no more, no fewer, in order.
	got := make([]byte, n)
	if _, err := io.ReadFull(peer, got); err != nil {
		return fmt.Errorf("stream %d: reading the %d bytes Write reported: %v", idx, n, err)
	}
	if !bytes.Equal(got, payload[:n]) {
		return fmt.Errorf("stream %d: the bytes delivered differ from what Write reported", idx)
	}
	_ = peer.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if m, err := peer.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("stream %d: %d bytes beyond what Write reported arrived (%v)", idx, m, err)
	}
	_ = peer.SetReadDeadline(time.Time{})
	// The stream still works: clear the deadline and send the rest.
	_ = st.SetWriteDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		_, err := st.Write(payload[n:])
		if err == nil {
			err = st.CloseWrite()
		}
		errc <- err
	}()
	rn, sum, rerr := readHashed(peer)
	if err := <-errc; err != nil {
		return fmt.Errorf("stream %d: writing the rest: %v", idx, err)
	}
	if rerr != io.EOF || !isPrefix(rn, sum, payload[n:]) || rn != int64(len(payload)-n) {
		return fmt.Errorf("stream %d: the rest arrived as %d bytes, %v, intact %v", idx, rn, rerr, isPrefix(rn, sum, payload[n:]))
	}
	return nil
}

// acceptors hands streams accepted on a session to whoever waits for that
// id; tests that accept concurrently share one per session.
var acceptors sync.Map // *Session -> *acceptor

type acceptor struct {
	mu      sync.Mutex
	streams map[uint32]*Stream
	changed chan struct{}
	err     error
}

// acceptFrom waits, up to the eventually bound, for the peer's stream id
// to be accepted on s.
func acceptFrom(s *Session, id uint32) (*Stream, error) {
	v, loaded := acceptors.LoadOrStore(s, &acceptor{streams: make(map[uint32]*Stream), changed: make(chan struct{})})
	a := v.(*acceptor)
	if !loaded {
		go func() {
			defer acceptors.Delete(s)
			for {
				st, err := s.AcceptStream()
				a.mu.Lock()
				if err != nil {
					a.err = err
				} else {
					a.streams[st.ID()] = st
				}
				close(a.changed)
				a.changed = make(chan struct{})
				a.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	timeout := time.After(eventually)
	for {
		a.mu.Lock()
		st, ok := a.streams[id]
		err, changed := a.err, a.changed
		a.mu.Unlock()
		switch {
		case ok:
			return st, nil
		case err != nil:
			return nil, err
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, fmt.Errorf("stream %d not accepted within %v", id, eventually)
		}
	}
}

// Promise: a conn that accepts no byte for ConnectionWriteTimeout closes
// the session with ErrConnectionWriteTimeout; a slow conn that keeps
// accepting bytes does not.
func TestFaultConnectionWriteTimeout(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	cfg := DefaultConfig()
	cfg.ConnectionWriteTimeout = writeTimeout
	cfg.DisableKeepAlive = true // the write timeout alone must do it

	stalled := map[string]func(t *testing.T) (net.Conn, net.Conn){
		// net.Pipe has no buffer: the session's first write blocks.
		"net.Pipe": func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() },
		// TCP: the write blocks once the (small) kernel buffers fill.
		"tcp": func(t *testing.T) (net.Conn, net.Conn) {
			c1, c2 := tcpPair(t)
			require.NoError(t, c1.(*net.TCPConn).SetWriteBuffer(16*1024))
			require.NoError(t, c2.(*net.TCPConn).SetReadBuffer(16*1024))
			return c1, c2
		},
		// TLS over TCP: the timed-out write leaves a record half sent,
		// and crypto/tls's Close would send its close alert with a 5 s
		// deadline into the full socket, with the writer's lock held.
		"tls": func(t *testing.T) (net.Conn, net.Conn) {
			c1, c2 := tcpPair(t)
			require.NoError(t, c1.(*net.TCPConn).SetWriteBuffer(16*1024))
			require.NoError(t, c2.(*net.TCPConn).SetReadBuffer(16*1024))
			sec, err := tlstest.New()
			require.NoError(t, err)
			t1, t2, err := sec.Pair(c1, c2)
			require.NoError(t, err)
			return t1, t2
		},
		// slowconn: the send buffer (one packet here) fills.
		"slowconn": func(*testing.T) (net.Conn, net.Conn) {
			return slowconn.Pipe(slowconn.Link{Bandwidth: 1e9, SendBuffer: 1})
		},
	}
	for name, mk := range stalled {
		t.Run(name, func(t *testing.T) {
			c1, peer := mk(t) // nobody ever reads peer
			defer peer.Close()
			start := time.Now()
			s, err := Client(c1, cfg)
			require.NoError(t, err)
			defer s.Close()
			st, err := s.OpenStream(context.Background())
			if err == nil {
				readc := readInBackground(st, 1)
				// Enough to fill any buffer below: a whole window.
				go func() { _, _ = st.Write(make([]byte, InitialStreamWindow)) }()
				err = errWithin(t, readc, "Read on a session whose conn stalled")
				require.ErrorIs(t, err, ErrConnectionWriteTimeout, "the blocked Read's error")
				require.ErrorIs(t, err, ErrStreamReset, "the blocked Read's error")
			}
			require.Eventually(t, s.IsClosed, eventually, time.Millisecond, "session still open")
			elapsed := time.Since(start)
			t.Logf("closed %v after the session started", elapsed)
			require.ErrorIs(t, s.Err(), ErrConnectionWriteTimeout)
			require.ErrorIs(t, s.Err(), ErrSessionClosed)
			require.GreaterOrEqual(t, elapsed, writeTimeout, "closed before the conn stalled for the timeout")
		})
	}

	// The control: a slow link that accepts a few KiB every few
	// milliseconds never goes writeTimeout without accepting a byte, even
	// though a whole 64 KiB batch takes longer than writeTimeout to go.
	t.Run("slow-but-moving", func(t *testing.T) {
		link := slowconn.Link{Bandwidth: 1e6, SendBuffer: 8 * 1024} // 125 kB/s: a 64 KiB batch takes 0.5 s
		c1, c2 := slowconn.Pipe(link)
		client, server := sessionPairOver(t, c1, c2, cfg)
		payload := faultPayload(1, 1, 192*1024) // 1.6 s of transfer
		st, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() {
			_, err := st.Write(payload)
			if err == nil {
				err = st.CloseWrite()
			}
			errc <- err
		}()
		peer, err := server.AcceptStream()
		require.NoError(t, err)
		n, sum, rerr := readHashed(peer)
		require.NoError(t, <-errc, "Write over a slow but moving link")
		require.Equal(t, io.EOF, rerr)
		require.Equal(t, int64(len(payload)), n)
		require.True(t, isPrefix(n, sum, payload))
		require.NoError(t, client.Err())
	})
}

// Promise: keep-alive closes the session of a silent peer (one that reads
// and discards but never answers) with ErrKeepAliveTimeout, and never
// closes a healthy idle one. Both run in a synctest bubble over a
// simulated broadband link (8 ms one way), so the keep-alive's timers run
// on the bubble's clock: exact, and blind to how busy the machine is.
func TestFaultKeepAlive(t *testing.T) {
	const interval = 100 * time.Millisecond
	cfg := DefaultConfig()
	cfg.DisableKeepAlive = false
	cfg.KeepAliveInterval = interval
	// Ten intervals: the silent peer is declared dead a whole
	// ConnectionWriteTimeout after the ping, not an interval after it.
	cfg.ConnectionWriteTimeout = 10 * interval

	t.Run("silent-peer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c1, peer := slowconn.Pipe(slowconn.Broadband())
			discarded := make(chan struct{})
			go func() {
				defer close(discarded)
				_, _ = io.Copy(io.Discard, peer)
			}()
			defer func() { peer.Close(); <-discarded }()
			start := time.Now()
			s, err := Client(c1, cfg)
			require.NoError(t, err)
			defer s.Close()
			st, err := s.OpenStream(context.Background())
			require.NoError(t, err)
			readc := readInBackground(st, 1)
			err = errWithin(t, readc, "Read on a session with a silent peer")
			elapsed := time.Since(start)
			t.Logf("silent peer detected after %v (interval %v)", elapsed, interval)
			require.ErrorIs(t, err, ErrKeepAliveTimeout)
			require.ErrorIs(t, err, ErrStreamReset)
			require.True(t, s.IsClosed())
			require.ErrorIs(t, s.Err(), ErrKeepAliveTimeout)
			// An idle interval, then a ping that goes unanswered for
			// ConnectionWriteTimeout.
			require.GreaterOrEqual(t, elapsed, interval+cfg.ConnectionWriteTimeout, "closed before the ping's answer was due")
			require.LessOrEqual(t, elapsed, 2*interval+cfg.ConnectionWriteTimeout, "closed late")
		})
	})

	// The control: the same keep-alive over a live peer keeps an idle
	// session open for many intervals, while pings and pongs cross.
	t.Run("healthy-peer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c1, c2 := slowconn.Pipe(slowconn.Broadband())
			client, server := sessionPairOver(t, c1, c2, cfg)
			const idle = 10 * interval
			time.Sleep(idle) // the bubble's clock: every goroutine is idle meanwhile
			require.NoError(t, client.Err())
			require.NoError(t, server.Err())
			// Each side pings when an interval passed with nothing
			// received: at least one ping each two intervals crossed.
			for name, s := range map[string]*Session{"client": client, "server": server} {
				st := s.Stats()
				t.Logf("%s after %v idle: %+v", name, idle, st)
				require.GreaterOrEqual(t, st.FramesReceived, uint64(idle/(2*interval)), "%s: no keep-alive traffic", name)
			}
			_, err := client.Ping()
			require.NoError(t, err)
		})
	})

	// A link whose round trip (400 ms) is four keep-alive intervals: every
	// answer comes after the next tick. The keep-alive must wait for it as
	// long as Ping would (ConnectionWriteTimeout), not one interval; with
	// min(interval, ConnectionWriteTimeout) both sides closed a healthy
	// idle session within 300 ms.
	t.Run("healthy-peer-long-link", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			link := slowconn.Broadband()
			link.Latency = 2 * interval
			c1, c2 := slowconn.Pipe(link)
			client, server := sessionPairOver(t, c1, c2, cfg)
			const idle = 50 * interval
			time.Sleep(idle)
			require.NoError(t, client.Err())
			require.NoError(t, server.Err())
			for name, s := range map[string]*Session{"client": client, "server": server} {
				st := s.Stats()
				t.Logf("%s after %v idle: %+v", name, idle, st)
				// A ping and its answer each round trip at least.
				require.GreaterOrEqual(t, st.FramesReceived, uint64(idle/(2*(2*link.Latency+interval))), "%s: no keep-alive traffic", name)
			}
			rtt, err := client.Ping()
			require.NoError(t, err)
			require.GreaterOrEqual(t, rtt, 2*link.Latency)
		})
	})
}

// Promise: two peers echoing large messages at each other through a low
// bandwidth-delay-product link never deadlock (rust-yamux #102).
func TestFaultEchoLowBDP(t *testing.T) {
	const message = 4 << 20
	links := []struct {
		name string
		pair func(testing.TB) (net.Conn, net.Conn)
		// ideal is the time the link needs for the traffic, 0 if none.
		ideal time.Duration
	}{
		{"slowconn-10Mbit-16KiB", func(testing.TB) (net.Conn, net.Conn) {
			return slowconn.Pipe(slowconn.Link{Bandwidth: 10e6, Latency: time.Millisecond, SendBuffer: 16 * 1024})
		}, 2 * message * 8 * time.Second / 10e6}, // each direction carries a message and an echo
		{"net.Pipe", func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() }, 0},
		{"tcp", tcpPair, 0},
	}
	for _, link := range links {
		t.Run(link.name, func(t *testing.T) {
			c1, c2 := link.pair(t)
			client, server := sessionPairOver(t, c1, c2, nil)
			start := time.Now()
			errc := make(chan error, 4)
			for i, pair := range [][2]*Session{{client, server}, {server, client}} {
				go func() {
					st, err := pair[1].AcceptStream()
					if err == nil {
						_, err = io.Copy(st, st)
						if err == nil {
							err = st.CloseWrite()
						}
					}
					errc <- err
				}()
				go func() {
					errc <- echoLarge(pair[0], faultPayload(uint64(i), i, message))
				}()
			}
			bound := 3*link.ideal + 2*eventually
			timeout := time.After(bound)
			for range 4 {
				select {
				case err := <-errc:
					require.NoError(t, err)
				case <-timeout:
					t.Fatalf("echo deadlocked: not done after %v (client %+v, server %+v)", bound, client.Stats(), server.Stats())
				}
			}
			t.Logf("both 4 MiB echoes done in %v (link needs %v)", time.Since(start), link.ideal)
		})
	}
}

// echoLarge writes payload on a new stream while reading the echo, and
// checks it.
func echoLarge(s *Session, payload []byte) error {
	st, err := s.OpenStream(context.Background())
	if err != nil {
		return err
	}
	defer st.Close()
	werr := make(chan error, 1)
	go func() {
		_, err := st.Write(payload)
		if err == nil {
			err = st.CloseWrite()
		}
		werr <- err
	}()
	n, sum, err := readHashed(st)
	if err := <-werr; err != nil {
		return err
	}
	if err != io.EOF || n != int64(len(payload)) || !isPrefix(n, sum, payload) {
		return fmt.Errorf("echo: %d of %d bytes, %v, intact %v", n, len(payload), err, isPrefix(n, sum, payload))
	}
	return nil
}

// Promise: a go-away during transfers lets existing streams finish, makes
// the peer's OpenStream fail with ErrRemoteGoAway, makes the sender refuse
// incoming streams, and both sides then close cleanly.
func TestFaultGoAwayMidTransfer(t *testing.T) {
	for _, link := range faultLinks() {
		t.Run(link.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			c1, c2 := link.pair(t)
			a, err := Client(c1, nil)
			require.NoError(t, err)
			b, err := Server(c2, nil)
			require.NoError(t, err)
			defer a.Close()
			defer b.Close()

			echoDone := make(chan struct{})
			go func() { defer close(echoDone); echoServer(b) }()

			// Transfers from A, each well under way before the go-away.
			const streams, size = 8, 1 << 20
			var progress [streams]atomic.Int64
			errc := make(chan error, streams)
			for i := range streams {
				go func() {
					errc <- echoWithProgress(a, faultPayload(7, i, size), &progress[i])
				}()
			}
			echoed := func() (least, total int64) {
				least = size
				for i := range progress {
					least = min(least, progress[i].Load())
					total += progress[i].Load()
				}
				return least, total
			}
			require.Eventually(t, func() bool { least, _ := echoed(); return least >= 64*1024 }, eventually, time.Millisecond)

			require.NoError(t, b.GoAway())
			least, total := echoed()
			t.Logf("go-away sent with %d of %d bytes echoed (at least %d on each stream)", total, streams*size, least)

			// The sender opens no stream now.
			_, err = b.OpenStream(context.Background())
			require.ErrorIs(t, err, ErrLocalGoAway)

			// The peer learns it: OpenStream fails with a remote go-away.
			var openErr error
			require.Eventually(t, func() bool {
				st, err := a.OpenStream(context.Background())
				if err != nil {
					openErr = err
					return true
				}
				_ = st.Reset() // opened before the go-away arrived
				return false
			}, eventually, time.Millisecond)
			require.ErrorIs(t, openErr, ErrRemoteGoAway)
			var ga *GoAwayError
			require.ErrorAs(t, openErr, &ga)
			require.True(t, ga.Remote)

			// A SYN that raced the go-away (sent by a peer that had not
			// seen it yet) is reset by the sender and never accepted.
			raced := injectOpen(t, a)
			_, err = readHashedWithin(t, raced)
			var se *StreamError
			require.ErrorAs(t, err, &se, "the raced stream")
			require.True(t, se.Remote)

			// Existing streams finish intact.
			for range streams {
				select {
				case err := <-errc:
					require.NoError(t, err, "a stream open before the go-away")
				case <-time.After(eventually + 2*time.Second):
					t.Fatal("streams open before the go-away did not finish")
				}
			}

			// Both sides close cleanly.
			require.NoError(t, a.Close())
			require.NoError(t, b.Close())
			<-echoDone
			for name, s := range map[string]*Session{"A": a, "B": b} {
				require.NotErrorIs(t, s.Err(), ErrProtocol, "session %s", name)
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// injectOpen sends a SYN for a new stream of s without looking at the
// peer's go-away, as a peer whose OpenStream raced the go-away would, and
// returns the stream.
func injectOpen(t *testing.T, s *Session) *Stream {
	t.Helper()
	s.mu.Lock()
	st := newStream(s, s.nextID, InitialStreamWindow, 0, 0)
	s.nextID += 2
	s.streams[st.id] = st
	s.mu.Unlock()
	require.NoError(t, s.w.queueCtrl(header{typ: typeWindowUpdate, flags: flagSYN, streamID: st.id}, nil))
	return st
}

// readHashedWithin reads st to its end, which must come within the
// eventually bound.
func readHashedWithin(t *testing.T, st *Stream) (int64, error) {
	t.Helper()
	_ = st.SetReadDeadline(time.Now().Add(eventually))
	n, _, err := readHashed(st)
	require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "stream %d never ended", st.ID())
	return n, err
}

// echoWithProgress is echoLarge counting echoed bytes in progress.
func echoWithProgress(s *Session, payload []byte, progress *atomic.Int64) error {
	st, err := s.OpenStream(context.Background())
	if err != nil {
		return err
	}
	defer st.Close()
	werr := make(chan error, 1)
	go func() {
		_, err := st.Write(payload)
		if err == nil {
			err = st.CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(h, progressWriter{progress}), st)
	if err != nil {
		return fmt.Errorf("stream %d: reading the echo after %d bytes: %w", st.ID(), n, err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("stream %d: writing: %w", st.ID(), err)
	}
	if n != int64(len(payload)) || !isPrefix(n, h.Sum(nil), payload) {
		return fmt.Errorf("echo: %d of %d bytes, intact %v", n, len(payload), isPrefix(n, h.Sum(nil), payload))
	}
	return nil
}

type progressWriter struct{ n *atomic.Int64 }

func (w progressWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}
