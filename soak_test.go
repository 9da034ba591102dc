package braid

// The soak promise (listed at the top of faults_test.go): mixed traffic
// with random resets and session closes for a long time corrupts no byte,
// surfaces every reset as ErrStreamReset and leaks no goroutine.
//
//	go test -run 'TestSoak$' -soak=2m .
//
// (or `go test -run 'TestSoak$' . -args -soak=2m`). TestSoakSmoke runs the
// same harness for one second in every test run, so that it can't rot.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braidmux/braid/slowconn"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var soakDuration = flag.Duration("soak", 0, "run TestSoak for this long (e.g. -soak=2m); 0 skips it")

// Promise: long mixed traffic with random resets and closes corrupts no
// byte and leaks nothing.
func TestSoak(t *testing.T) {
	if *soakDuration <= 0 {
		t.Skip("soak test: give a duration with -soak, e.g. go test -run 'TestSoak$' -soak=2m")
	}
	runSoak(t, *soakDuration)
}

// Promise: the soak harness itself works (one second of it).
func TestSoakSmoke(t *testing.T) { runSoak(t, time.Second) }

// Soak actions, chosen per stream.
const (
	soakComplete    = iota // echo everything, close cleanly
	soakOpenerReset        // the opener resets after reading resetAt bytes
	soakEchoReset          // the echoing side resets after echoing resetAt bytes
	soakActions
)

// Reset codes the soak uses, so that each side can tell whose reset it saw.
const (
	soakOpenerCode = 41
	soakEchoCode   = 42
)

// soakStats counts what the soak did.
type soakStats struct {
	sessions, sessionCuts         atomic.Int64
	streams, completed            atomic.Int64
	openerResets, echoResets, cut atomic.Int64
	bytes                         atomic.Int64 // bytes verified, both directions
	corrupt                       atomic.Int64
	mu                            sync.Mutex
	failures                      []string
}

func (s *soakStats) fail(format string, args ...any) {
	s.corrupt.Add(1)
	s.mu.Lock()
	if len(s.failures) < 20 {
		s.failures = append(s.failures, fmt.Sprintf(format, args...))
	}
	s.mu.Unlock()
}

// soakLinks are the conns a soak session runs over.
var soakLinks = []struct {
	name string
	pair func(testing.TB) (net.Conn, net.Conn)
}{
	{"tcp", tcpPair},
	{"net.Pipe", func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() }},
	{"slowconn-lan", func(testing.TB) (net.Conn, net.Conn) { return slowconn.Pipe(slowconn.LAN()) }},
	{"slowconn-broadband", func(testing.TB) (net.Conn, net.Conn) { return slowconn.Pipe(slowconn.Broadband()) }},
	{"slowconn-mobile", func(testing.TB) (net.Conn, net.Conn) { return slowconn.Pipe(slowconn.Mobile()) }},
}

func runSoak(t *testing.T, d time.Duration) {
	ignore := goleak.IgnoreCurrent()
	seed := faultSeed(t)
	const lanes, workers = 4, 8
	var st soakStats
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for lane := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(lane)))
			for gen := 0; time.Now().Before(end); gen++ {
				soakSession(t, rng, seed+uint64(lane)<<32+uint64(gen)<<40, end, workers, &st)
			}
		}()
	}
	wg.Wait()
	t.Logf("soak %v: %d sessions (%d cut by a random close), %d streams: %d completed, %d opener resets, %d echo resets, %d cut by a session close; %.1f MiB verified; %d corrupted",
		d, st.sessions.Load(), st.sessionCuts.Load(), st.streams.Load(), st.completed.Load(),
		st.openerResets.Load(), st.echoResets.Load(), st.cut.Load(), float64(st.bytes.Load())/(1<<20), st.corrupt.Load())
	for _, f := range st.failures {
		t.Error(f)
	}
	require.Zero(t, st.corrupt.Load(), "corrupted or misreported streams")
	require.Positive(t, st.completed.Load(), "no stream completed")
	goleak.VerifyNone(t, ignore)
}

// soakSession runs one session pair over a random link with workers
// streaming until a random lifetime ends; then, at random, it closes one
// side under the running streams (cutting them) or lets them finish.
func soakSession(t *testing.T, rng *rand.Rand, seed uint64, end time.Time, workers int, st *soakStats) {
	link := soakLinks[rng.IntN(len(soakLinks))]
	c1, c2 := link.pair(t)
	client, err := Client(c1, nil)
	require.NoError(t, err)
	server, err := Server(c2, nil)
	require.NoError(t, err)
	st.sessions.Add(1)
	a, b := client, server
	if rng.IntN(2) == 0 {
		a, b = server, client // both roles open streams
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			s, err := b.AcceptStream()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				soakEcho(s, seed, st)
			}()
		}
	}()
	lifetime := time.Duration(50+rng.IntN(1500)) * time.Millisecond
	stop := time.Now().Add(lifetime)
	if stop.After(end) {
		stop = end
	}
	var workersWG sync.WaitGroup
	var next atomic.Uint32
	for w := range workers {
		workersWG.Add(1)
		wrng := rand.New(rand.NewPCG(seed, uint64(w)))
		go func() {
			defer workersWG.Done()
			for time.Now().Before(stop) {
				if !soakStream(a, wrng, seed, int(next.Add(1)), st) {
					return // the session is gone
				}
			}
		}()
	}
	cutSession := rng.IntN(3) == 0
	if cutSession {
		time.Sleep(time.Until(stop))
		st.sessionCuts.Add(1)
		victim := []*Session{a, b}[rng.IntN(2)]
		if rng.IntN(2) == 0 {
			_ = victim.Close()
		} else {
			_ = victim.CloseWithError(GoAwayInternalError)
		}
	}
	workersWG.Wait()
	_ = a.Close()
	_ = b.Close()
	wg.Wait()
}

// soakStream runs one stream: writes a random payload while reading the
// echo, resets it when its action says so, and checks every byte. It
// returns false once the session can't open streams any more.
func soakStream(s *Session, rng *rand.Rand, seed uint64, idx int, st *soakStats) bool {
	size := 16 + rng.IntN(1<<rng.IntN(19)) // log-uniform up to 256 KiB
	action := rng.IntN(soakActions)
	if rng.IntN(2) == 0 {
		action = soakComplete // half the streams complete
	}
	resetAt := rng.IntN(size)
	payload := soakPayload(seed, idx, size, action, resetAt)

	str, err := s.OpenStream(context.Background())
	if err != nil {
		if !errors.Is(err, ErrSessionClosed) && !errors.Is(err, ErrRemoteGoAway) {
			st.fail("OpenStream failed with %v, not a closed session", err)
		}
		return false
	}
	st.streams.Add(1)
	werr := make(chan error, 1)
	go func() {
		_, err := str.Write(payload)
		if err == nil {
			err = str.CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	var n int64
	var rerr error
	if action == soakOpenerReset {
		n, rerr = hashInto(h, io.LimitReader(str, int64(resetAt)))
		if rerr == io.EOF && n == int64(resetAt) {
			_ = str.ResetWithError(soakOpenerCode)
			st.openerResets.Add(1)
			var m int64
			m, rerr = hashInto(h, str)
			n += m
			// A reset of a stream already closed both ways is a no-op
			// (as in go-yamux): the buffered rest then reads normally.
			// Otherwise Read fails with our reset, or with the cut of a
			// session that died first.
			if rerr != io.EOF && !errors.Is(rerr, ErrStreamReset) {
				st.fail("stream %d: Read after a local reset returned %v", idx, rerr)
			}
		}
	} else {
		n, rerr = hashInto(h, str)
	}
	sum := h.Sum(nil)
	wErr := <-werr
	if !isPrefix(n, sum, payload) {
		st.fail("stream %d: %d bytes received are not a prefix of the %d sent", idx, n, size)
		return true
	}
	st.bytes.Add(n)
	switch {
	case rerr == io.EOF && n == int64(size):
		if wErr != nil {
			st.fail("stream %d: the echo is complete but Write failed: %v", idx, wErr)
		}
		if action == soakEchoReset {
			st.fail("stream %d: completed although the echo was to reset it", idx)
		}
		st.completed.Add(1)
		_ = str.Close()
	case rerr == io.EOF:
		st.fail("stream %d: cut short at %d of %d bytes with a plain io.EOF", idx, n, size)
	case errors.Is(rerr, ErrStreamReset):
		var se *StreamError
		switch {
		case errors.As(rerr, &se) && se.Remote && se.ErrorCode == soakEchoCode:
			st.echoResets.Add(1)
		case errors.As(rerr, &se) && !se.Remote && se.ErrorCode == soakOpenerCode:
		default:
			st.cut.Add(1)
		}
	default:
		st.fail("stream %d: read ended with %v, which matches neither io.EOF nor ErrStreamReset", idx, rerr)
	}
	return true
}

// soakPayload is faultPayload with the action and reset point in bytes 8
// to 16, so that the echoing side knows them too.
func soakPayload(seed uint64, idx, size, action, resetAt int) []byte {
	p := faultPayload(seed, idx, size)
	binary.BigEndian.PutUint32(p[8:12], uint32(action))
	binary.BigEndian.PutUint32(p[12:16], uint32(resetAt))
	return p
}

// soakEcho echoes a stream, checks what it receives, and resets it where
// the payload says.
func soakEcho(s *Stream, seed uint64, st *soakStats) {
	h := sha256.New()
	var head []byte
	var n int64
	buf := make([]byte, 16*1024)
	writing := true
	var err error
	for {
		var m int
		m, err = s.Read(buf)
		h.Write(buf[:m])
		n += int64(m)
		if len(head) < 16 {
			head = append(head, buf[:min(m, 16-len(head))]...)
		}
		if m > 0 && writing && len(head) == 16 &&
			binary.BigEndian.Uint32(head[8:12]) == soakEchoReset && n >= int64(binary.BigEndian.Uint32(head[12:16])) {
			// Echo up to the reset point, then reset.
			keep := m - int(n-int64(binary.BigEndian.Uint32(head[12:16])))
			_, _ = s.Write(buf[:keep])
			_ = s.ResetWithError(soakEchoCode)
			writing = false
		}
		if m > 0 && writing {
			if _, werr := s.Write(buf[:m]); werr != nil {
				writing = false
			}
		}
		if err != nil {
			break
		}
	}
	if len(head) < 16 {
		if err == io.EOF {
			st.fail("echo: stream cut after %d bytes ended in a plain io.EOF", n)
		}
		return
	}
	idx := int(binary.BigEndian.Uint32(head[0:4]))
	size := int(binary.BigEndian.Uint32(head[4:8]))
	action := int(binary.BigEndian.Uint32(head[8:12]))
	resetAt := int(binary.BigEndian.Uint32(head[12:16]))
	if size < 16 || size > 1<<20 || action >= soakActions {
		st.fail("echo: corrupted header %x", head)
		return
	}
	want := soakPayload(seed, idx, size, action, resetAt)
	var se *StreamError
	switch {
	case errors.As(err, &se) && !se.Remote && se.ErrorCode == soakEchoCode:
		// Our own reset: what came before it must be a prefix.
		if !isPrefix(n, h.Sum(nil), want) {
			st.fail("echo: stream %d: %d bytes received are not a prefix", idx, n)
		}
	default:
		if cerr := checkEnd(n, h.Sum(nil), err, want); cerr != nil {
			st.fail("echo: stream %d: %v", idx, cerr)
		}
	}
	st.bytes.Add(n)
	if err == io.EOF && writing {
		_ = s.CloseWrite()
	}
}

// hashInto reads r into h until an error, which it returns (io.EOF
// included), with the byte count.
func hashInto(h io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 16*1024)
	var n int64
	for {
		m, err := r.Read(buf)
		h.Write(buf[:m])
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
}
