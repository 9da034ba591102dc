package interop_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
)

// The interop matrix: every check against every Go peer, braid in both
// roles, over loopback TCP. Each check is bounded: a context or deadline on
// every call that could wait, and the sessions closed when it ends.

// matrixTimeout bounds one check.
const matrixTimeout = 60 * time.Second

// matrixEnv is one connection of the matrix: braid on one end, the peer on
// the other, and the peer's raw conn (to cut it).
type matrixEnv struct {
	p        peer
	bs       *braid.Session
	ps       *peerSession
	peerConn net.Conn
	// peerRead decodes the yamux frames the peer read from its conn (nil
	// for mplex).
	peerRead *yamuxSniffer
	ctx      context.Context
	deadline time.Time
}

// matrixCheck is one row of the matrix.
type matrixCheck struct {
	name string
	run  func(t *testing.T, e *matrixEnv)
}

func matrixChecks() []matrixCheck {
	return []matrixCheck{
		{"open-from-each-side", checkOpenFromEachSide},
		{"100-concurrent-echoes", checkConcurrentEchoes},
		{"16MiB-each-way", checkBulkEachWay},
		{"half-close", checkHalfClose},
		{"braid-resets", checkBraidResets},
		{"peer-resets", checkPeerResets},
		{"ping", checkPing},
		{"300-streams-at-once", checkStreamBurst},
		{"peer-cuts-mid-transfer", checkPeerCuts},
		{"peer-go-away", checkPeerGoAway},
		{"braid-go-away", checkBraidGoAway},
		{"braid-go-away-while-peer-sends", checkBraidGoAwayWhilePeerSends},
	}
}

// TestPeerMatrix runs every check against every Go peer, braid as client
// and as server.
func TestPeerMatrix(t *testing.T) {
	for _, p := range goPeers() {
		t.Run(p.name, func(t *testing.T) { runMatrix(t, p) })
	}
}

// runMatrix runs every check against p in both roles.
func runMatrix(t *testing.T, p peer) {
	for _, braidClient := range []bool{true, false} {
		role := map[bool]string{true: "braid-client", false: "braid-server"}[braidClient]
		for _, c := range matrixChecks() {
			t.Run(role+"/"+c.name, func(t *testing.T) {
				c.run(t, newMatrixEnv(t, p, braidClient))
			})
		}
	}
}

// newMatrixEnv connects braid and p over loopback TCP; everything is
// closed when the test ends.
func newMatrixEnv(t *testing.T, p peer, braidClient bool) *matrixEnv {
	t.Helper()
	c1, c2 := tcpPair(t)
	braidConn, peerConn := c1, c2
	if !braidClient {
		braidConn, peerConn = c2, c1
	}
	cfg := braid.DefaultConfig()
	cfg.Protocol = p.proto
	newSession := braid.Server
	if braidClient {
		newSession = braid.Client
	}
	bs, err := newSession(braidConn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A yamux peer reads through a sniffer: what it was sent, frame by
	// frame, and a check that it was all yamux.
	peerSide, peerRead := peerConn, (*yamuxSniffer)(nil)
	if p.proto == braid.Yamux {
		peerRead = &yamuxSniffer{}
		peerSide = &sniffConn{Conn: peerConn, read: peerRead}
		t.Cleanup(func() {
			if _, err := peerRead.frames(); err != nil {
				t.Errorf("%s read a byte stream that is not yamux: %v", p.name, err)
			}
		})
	}
	ps, err := p.start(peerSide, !braidClient)
	if err != nil {
		bs.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
	deadline, _ := ctx.Deadline()
	t.Cleanup(func() {
		cancel()
		_ = bs.Close()
		_ = ps.close()
	})
	return &matrixEnv{p: p, bs: bs, ps: ps, peerConn: peerConn, peerRead: peerRead, ctx: ctx, deadline: deadline}
}

// end is one side of a matrix connection, whichever implementation.
type end struct {
	name   string
	open   func(context.Context) (peerStream, error)
	accept func() (peerStream, error)
}

func (e *matrixEnv) braidEnd() end {
	return end{
		name:   "braid",
		open:   func(ctx context.Context) (peerStream, error) { return e.bs.OpenStream(ctx) },
		accept: func() (peerStream, error) { return e.bs.AcceptStream() },
	}
}

func (e *matrixEnv) peerEnd() end {
	return end{name: e.p.name, open: e.ps.open, accept: e.ps.accept}
}

// both is braid's end and the peer's, in both orders.
func (e *matrixEnv) both() [][2]end {
	return [][2]end{{e.braidEnd(), e.peerEnd()}, {e.peerEnd(), e.braidEnd()}}
}

// echoServer echoes every stream e accepts until its peer half-closes it,
// then half-closes it too; it returns when accepting fails.
func echoServer(e end) {
	for {
		st, err := e.accept()
		if err != nil {
			return
		}
		go func() {
			_, _ = io.Copy(st, st)
			_ = st.CloseWrite()
		}()
	}
}

// echoCheck sends size random bytes on a new stream of e and compares the
// SHA-256 of the echo.
func (e *matrixEnv) echoCheck(from end, size int) error {
	st, err := from.open(e.ctx)
	if err != nil {
		return fmt.Errorf("%s open: %w", from.name, err)
	}
	defer st.Close()
	_ = st.SetDeadline(e.deadline)
	data := make([]byte, size)
	_, _ = rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		_, err := st.Write(data)
		if err == nil {
			err = st.CloseWrite()
		}
		errc <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, st)
	if werr := <-errc; werr != nil {
		return fmt.Errorf("%s write of %d bytes: %w", from.name, size, werr)
	}
	if err != nil {
		return fmt.Errorf("%s read after %d of %d bytes: %w", from.name, n, size, err)
	}
	want := sha256.Sum256(data)
	if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("%s: echo of %d bytes differs (%d bytes back)", from.name, size, n)
	}
	return nil
}

// acceptOne accepts one stream at e, within the env's deadline.
func (e *matrixEnv) acceptOne(t *testing.T, at end) peerStream {
	t.Helper()
	type res struct {
		st  peerStream
		err error
	}
	c := make(chan res, 1)
	go func() {
		st, err := at.accept()
		c <- res{st, err}
	}()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatalf("%s accept: %v", at.name, r.err)
		}
		_ = r.st.SetDeadline(e.deadline)
		return r.st
	case <-e.ctx.Done():
		t.Fatalf("%s accepted no stream", at.name)
		return nil
	}
}

// established opens a stream from opener, sends a byte on it and accepts
// it at acceptor once the byte arrived.
func (e *matrixEnv) established(t *testing.T, opener, acceptor end) (peerStream, peerStream) {
	t.Helper()
	a, err := opener.open(e.ctx)
	if err != nil {
		t.Fatalf("%s open: %v", opener.name, err)
	}
	_ = a.SetDeadline(e.deadline)
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatalf("%s write: %v", opener.name, err)
	}
	b := e.acceptOne(t, acceptor)
	if _, err := io.ReadFull(b, make([]byte, 1)); err != nil {
		t.Fatalf("%s read: %v", acceptor.name, err)
	}
	return a, b
}

// requireCut checks the error of a braid call on a stream that did not end
// with the peer's FIN: a reset that never matches io.EOF.
func requireCut(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: no error", what)
	case errors.Is(err, io.EOF):
		t.Errorf("%s: %q matches io.EOF", what, err)
	case !errors.Is(err, braid.ErrStreamReset):
		t.Errorf("%s: %q does not match ErrStreamReset", what, err)
	}
}

// checkOpenFromEachSide: a stream opened by either side carries an echo.
func checkOpenFromEachSide(t *testing.T, e *matrixEnv) {
	for _, pair := range e.both() {
		go echoServer(pair[1])
		if err := e.echoCheck(pair[0], 10<<10); err != nil {
			t.Error(err)
		}
	}
}

// checkConcurrentEchoes: 100 streams opened by each side at once, each
// echoed by the other with its SHA-256 checked; sizes from 1 byte to beyond
// the initial window.
func checkConcurrentEchoes(t *testing.T, e *matrixEnv) {
	const streams = 100
	sizes := []int{1, 1000, 64<<10 + 7, 300 << 10}
	b, p := e.braidEnd(), e.peerEnd()
	go echoServer(b)
	go echoServer(p)
	var wg sync.WaitGroup
	for _, from := range []end{b, p} {
		for i := range streams {
			wg.Go(func() {
				if err := e.echoCheck(from, sizes[i%len(sizes)]); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
}

// checkBulkEachWay: 16 MiB each way at once on one stream, SHA-256 checked
// at both ends.
func checkBulkEachWay(t *testing.T, e *matrixEnv) {
	const size = 16 << 20
	for _, pair := range e.both() {
		t.Run(pair[0].name+"-opens", func(t *testing.T) {
			a, b := e.established(t, pair[0], pair[1])
			defer a.Close()
			defer b.Close()
			var wg sync.WaitGroup
			for _, dir := range [][2]peerStream{{a, b}, {b, a}} {
				wg.Go(func() {
					if err := transfer(dir[0], dir[1], size); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// transfer sends size pseudo-random bytes from w (then half-closes it) to
// r, which reads to io.EOF; the hashes must agree.
func transfer(w, r peerStream, size int) error {
	want, got := sha256.New(), sha256.New()
	errc := make(chan error, 1)
	go func() { errc <- writeChunks(w, want, size) }()
	n, err := io.Copy(got, r)
	if werr := <-errc; werr != nil {
		return fmt.Errorf("write: %w", werr)
	}
	if err != nil {
		return fmt.Errorf("read after %d bytes: %w", n, err)
	}
	if n != int64(size) || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		return fmt.Errorf("got %d of %d bytes, hash differs", n, size)
	}
	return nil
}

// writeChunks writes size random bytes to w in 1 MiB writes, hashing them
// into h, then half-closes w.
func writeChunks(w peerStream, h hash.Hash, size int) error {
	chunk := make([]byte, 1<<20)
	for sent := 0; sent < size; sent += len(chunk) {
		_, _ = rand.Read(chunk)
		h.Write(chunk[:min(len(chunk), size-sent)])
		if _, err := w.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
			return err
		}
	}
	return w.CloseWrite()
}

// checkHalfClose: the opener writes and half-closes; the acceptor reads to
// io.EOF, then answers on its still open write side and half-closes; the
// opener reads the answer to io.EOF. Both sides open.
func checkHalfClose(t *testing.T, e *matrixEnv) {
	for _, pair := range e.both() {
		opener, acceptor := pair[0], pair[1]
		t.Run(opener.name+"-opens", func(t *testing.T) {
			a, err := opener.open(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			_ = a.SetDeadline(e.deadline)
			if _, err := a.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			if err := a.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			b := e.acceptOne(t, acceptor)
			defer b.Close()
			req, err := io.ReadAll(b)
			if err != nil || string(req) != "request" {
				t.Fatalf("%s read %q, %v", acceptor.name, req, err)
			}
			if _, err := b.Write([]byte("response")); err != nil {
				t.Fatalf("%s write after io.EOF: %v", acceptor.name, err)
			}
			if err := b.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			resp, err := io.ReadAll(a)
			if err != nil || string(resp) != "response" {
				t.Fatalf("%s read %q, %v", opener.name, resp, err)
			}
		})
	}
	if !e.bs.IsClosed() {
		waitFor(t, e.ctx, "braid's streams to leave its table", func() bool { return e.bs.NumStreams() == 0 })
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// checkBraidResets: braid's ResetWithError(7) fails the peer's read with
// the peer's reset error (code 7 where the peer reports codes); braid's
// own calls then fail with the local *StreamError.
func checkBraidResets(t *testing.T, e *matrixEnv) {
	for _, pair := range e.both() {
		t.Run(pair[0].name+"-opens", func(t *testing.T) {
			var bst, pst peerStream
			if pair[0].name == "braid" {
				bst, pst = e.established(t, pair[0], pair[1])
			} else {
				pst, bst = e.established(t, pair[0], pair[1])
			}
			if err := bst.(*braid.Stream).ResetWithError(7); err != nil {
				t.Fatal(err)
			}
			err := readErr(pst)
			code, ok := e.p.isReset(err)
			if !ok {
				t.Fatalf("%s read after braid's reset: %v", e.p.name, err)
			}
			if e.p.resetCodes && code != 7 {
				t.Fatalf("%s saw code %d, want 7", e.p.name, code)
			}
			_, err = bst.Write([]byte("y"))
			var se *braid.StreamError
			if !errors.As(err, &se) || *se != (braid.StreamError{ErrorCode: 7}) {
				t.Fatalf("braid write after its reset: %v", err)
			}
			_ = pst.Close()
		})
	}
	waitFor(t, e.ctx, "braid's streams to leave its table", func() bool { return e.bs.NumStreams() == 0 })
}

// checkPeerResets: the peer's reset (code 9 where it carries one) fails
// braid's calls with a remote *StreamError, never io.EOF (but where the
// peer's reset follows its FIN: hashicorp/yamux).
func checkPeerResets(t *testing.T, e *matrixEnv) {
	for _, pair := range e.both() {
		t.Run(pair[0].name+"-opens", func(t *testing.T) {
			var bst, pst peerStream
			if pair[0].name == "braid" {
				bst, pst = e.established(t, pair[0], pair[1])
			} else {
				pst, bst = e.established(t, pair[0], pair[1])
			}
			if err := e.ps.reset(pst, 9); err != nil {
				t.Fatal(err)
			}
			want := braid.StreamError{ErrorCode: 9, Remote: true}
			if !e.p.resetCodes {
				want.ErrorCode = 0
			}
			rerr := readErr(bst)
			if e.p.resetAfterFIN {
				if rerr != io.EOF {
					t.Fatalf("braid read after %s's close: %v", e.p.name, rerr)
				}
			} else {
				var se *braid.StreamError
				if !errors.As(rerr, &se) || *se != want {
					t.Fatalf("braid read after %s's reset: %v, want %v", e.p.name, rerr, &want)
				}
				requireCut(t, "braid read", rerr)
			}
			// Writes fail too: at once, or once the reset arrived
			// (hashicorp/yamux's after its close timeout).
			var werr error
			for werr == nil && e.ctx.Err() == nil {
				_, werr = bst.Write([]byte("y"))
				if werr == nil {
					time.Sleep(time.Millisecond)
				}
			}
			var se *braid.StreamError
			if !errors.As(werr, &se) || *se != want {
				t.Fatalf("braid write after %s's reset: %v, want %v", e.p.name, werr, &want)
			}
			requireCut(t, "braid write", werr)
		})
	}
	waitFor(t, e.ctx, "braid's streams to leave its table", func() bool { return e.bs.NumStreams() == 0 })
}

// checkPing: pings are answered both ways; on mplex, which has none,
// braid's Ping says so.
func checkPing(t *testing.T, e *matrixEnv) {
	rtt, err := e.bs.Ping()
	if e.ps.ping == nil {
		if !errors.Is(err, braid.ErrNotSupported) {
			t.Fatalf("braid Ping on %v: %v, want ErrNotSupported", e.p.proto, err)
		}
		return
	}
	if err != nil || rtt <= 0 {
		t.Fatalf("braid Ping: %v, %v", rtt, err)
	}
	for i := range 3 { // several: a pong must not be mistaken for another
		rtt, err := e.ps.ping()
		if err != nil || rtt <= 0 {
			t.Fatalf("%s Ping %d: %v, %v", e.p.name, i, rtt, err)
		}
	}
	if e.bs.IsClosed() {
		t.Fatalf("braid closed: %v", e.bs.Err())
	}
}

// checkStreamBurst: the peer opens 300 streams at once, each echoed by
// braid. Every one must succeed: a peer without yamux's ACK backlog (mplex
// has no ACKs; hashicorp/yamux doesn't keep one) can have more streams
// waiting than braid's accept backlog (256) before the accepting
// goroutine has run, and braid then pushes back (it stops reading the
// connection until AcceptStream makes room, see Config.AcceptBacklog)
// instead of refusing them.
func checkStreamBurst(t *testing.T, e *matrixEnv) {
	const streams = 300
	go echoServer(e.braidEnd())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for range streams {
		wg.Go(func() {
			if err := e.echoCheck(e.peerEnd(), 100); err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if e.bs.IsClosed() {
		t.Fatalf("braid closed: %v", e.bs.Err())
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d streams failed; first: %v", len(failed), streams, failed[0])
	}
}

// checkPeerCuts: the peer's TCP conn closes in the middle of two
// transfers, one each way, without a FIN, RST or go-away for them; braid's
// Read and Write fail with a reset that never matches io.EOF, and the
// session ends.
func checkPeerCuts(t *testing.T, e *matrixEnv) {
	const cutAfter = 1 << 20
	toBraid, fromPeer := e.established(t, e.peerEnd(), e.braidEnd())
	fromBraid, toPeer := e.established(t, e.braidEnd(), e.peerEnd())
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _ = writeChunks(toBraid, sha256.New(), 256<<20) }) // fails at the cut
	wg.Go(func() { _, _ = io.Copy(io.Discard, toPeer) })
	braidWrote := make(chan error, 1)
	go func() { braidWrote <- writeChunks(fromBraid, sha256.New(), 256<<20) }()

	if _, err := io.CopyN(io.Discard, fromPeer, cutAfter); err != nil {
		t.Fatalf("braid read before the cut: %v", err)
	}
	_ = e.peerConn.Close()
	_, err := io.Copy(io.Discard, fromPeer)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("braid read: %v: the cut went unnoticed", err)
	}
	requireCut(t, "braid read", err)
	if !errors.Is(err, braid.ErrSessionClosed) {
		t.Errorf("braid read: %q does not match ErrSessionClosed", err)
	}
	requireCut(t, "braid write", <-braidWrote)
	t.Logf("braid read: %v", err)
	_ = e.ps.close()
}

// checkPeerGoAway: the peer's normal go-away refuses braid's new streams
// while the open one keeps working both ways; when the peer then closes
// the session, braid's read on the open stream fails with the peer's
// *GoAwayError (code 0), never io.EOF. mplex has no go-away: there the
// close alone cuts the stream, with ErrPeerClosedConn.
func checkPeerGoAway(t *testing.T, e *matrixEnv) {
	bst, pst := e.established(t, e.braidEnd(), e.peerEnd())
	if e.ps.goAway != nil {
		if err := e.ps.goAway(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, e.ctx, "braid to refuse new streams", func() bool {
			st, err := e.bs.OpenStream(e.ctx)
			if err == nil {
				_ = st.Reset()
			}
			return errors.Is(err, braid.ErrRemoteGoAway)
		})
		// The open stream still carries data both ways.
		if _, err := pst.Write([]byte("pong")); err != nil {
			t.Fatalf("%s write after its go-away: %v", e.p.name, err)
		}
		if _, err := bst.Write([]byte("ping")); err != nil {
			t.Fatalf("braid write after the peer's go-away: %v", err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(bst, got); err != nil || string(got) != "pong" {
			t.Fatalf("braid read %q, %v", got, err)
		}
		if _, err := io.ReadFull(pst, got); err != nil || string(got) != "ping" {
			t.Fatalf("%s read %q, %v", e.p.name, got, err)
		}
	}
	// The peer drains what braid sends, so that its close is a FIN, not a
	// TCP RST for unread bytes.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, pst)
	}()
	if err := e.ps.close(); err != nil {
		t.Fatal(err)
	}
	<-done
	err := readErr(bst)
	requireCut(t, "braid read", err)
	if e.ps.goAway != nil {
		var ga *braid.GoAwayError
		if !errors.As(err, &ga) || *ga != (braid.GoAwayError{ErrorCode: braid.GoAwayNormal, Remote: true}) {
			t.Errorf("braid read: %q is not the peer's normal go-away", err)
		}
	} else if !errors.Is(err, braid.ErrPeerClosedConn) {
		t.Errorf("braid read: %q does not match ErrPeerClosedConn", err)
	}
	t.Logf("braid read: %v", err)
}

// checkBraidGoAway: braid's CloseWithError(5) ends the peer's session and
// fails its open stream. On yamux the peer must have read braid's go-away,
// code 5, one and only, before its session ended (decoded from the bytes
// its conn returned: a peer's error need not tell a go-away from a closed
// conn), and a peer whose error carries the code (go-yamux) must report 5.
// mplex has no go-away: there braid closes the conn.
//
// The close comes once the peer has nothing more to send: its ACK of the
// stream and its pong to braid's first ping read by braid. A frame of the
// peer's that reaches braid's socket after its close is answered with a
// TCP RST, the peer's next write fails, and go-yamux and hashicorp/yamux
// then close their conn at once, the go-away unread in its receive buffer
// (23 of 40 runs without this wait: the test would check a race, not the
// go-away).
func checkBraidGoAway(t *testing.T, e *matrixEnv) {
	bst, pst := e.established(t, e.braidEnd(), e.peerEnd())
	if _, err := pst.Write([]byte("y")); err != nil {
		t.Fatalf("%s write: %v", e.p.name, err)
	}
	if _, err := io.ReadFull(bst, make([]byte, 1)); err != nil {
		t.Fatalf("braid read: %v", err)
	}
	if e.ps.ping != nil {
		waitFor(t, e.ctx, "the pong to braid's first ping", func() bool { return e.bs.RTT() > 0 })
	}
	if err := e.bs.CloseWithError(5); err != nil {
		t.Fatal(err)
	}
	var goAways []uint32
	select {
	case <-e.ps.closed:
		if e.peerRead != nil {
			goAways = e.peerRead.goAwayCodes()
		}
	case <-e.ctx.Done():
		t.Fatalf("%s session still open after braid's go-away", e.p.name)
	}
	if e.peerRead != nil && !slices.Equal(goAways, []uint32{5}) {
		t.Errorf("%s's session ended having read go-aways with codes %v from braid, want [5]", e.p.name, goAways)
	}
	if err := readErr(pst); err == io.EOF && e.p.cutReadsEOF {
		t.Logf("%s reads io.EOF on a stream cut under it (its own behaviour)", e.p.name)
	} else if err == nil || err == io.EOF {
		t.Errorf("%s read on a stream cut by braid's go-away: %v", e.p.name, err)
	}
	perr := e.ps.err()
	if e.p.goAwayCode != nil {
		if code, ok := e.p.goAwayCode(perr); !ok || code != 5 {
			t.Errorf("%s's error after braid's go-away: %v, want one with code 5", e.p.name, perr)
		}
	} else {
		t.Logf("%s's error carries no go-away code: %v", e.p.name, perr)
	}
	var ga *braid.GoAwayError
	if _, err := e.bs.OpenStream(e.ctx); !errors.As(err, &ga) || *ga != (braid.GoAwayError{ErrorCode: 5}) {
		t.Errorf("braid OpenStream after CloseWithError(5): %v", err)
	}
}

// goAwayBusyBytes is what the peer has sent, and braid read, before
// braid closes in checkBraidGoAwayWhilePeerSends: the flow is under way.
const goAwayBusyBytes = 1 << 20

// checkBraidGoAwayWhilePeerSends: braid's CloseWithError(5) reaches a
// peer that is sending bulk data to braid at that moment. braid closes
// its conn only once the peer has closed its end, or a few round trips
// later (linger.go): closed at once, the peer's bytes that kept coming
// met a closed socket, whose TCP RST made the peer's kernel drop what the
// peer had not read, the go-away with it. A yamux peer must have read the
// go-away, code 5, one and only, before its session ended, and a peer
// whose error carries the code must report 5. mplex has no go-away: the
// peer's session must end.
func checkBraidGoAwayWhilePeerSends(t *testing.T, e *matrixEnv) {
	pst, bst := e.established(t, e.peerEnd(), e.braidEnd())
	go func() { _, _ = io.Copy(io.Discard, bst) }()
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		buf := make([]byte, 16*1024)
		for {
			if _, err := pst.Write(buf); err != nil {
				return
			}
		}
	}()
	waitFor(t, e.ctx, "the peer's bulk flow", func() bool { return e.bs.Stats().BytesReceived >= goAwayBusyBytes })
	if err := e.bs.CloseWithError(5); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.ps.closed:
	case <-e.ctx.Done():
		t.Fatalf("%s session still open after braid's go-away", e.p.name)
	}
	<-sending
	if e.peerRead != nil {
		if goAways := e.peerRead.goAwayCodes(); !slices.Equal(goAways, []uint32{5}) {
			t.Errorf("%s's session ended having read go-aways with codes %v from braid, want [5]", e.p.name, goAways)
		}
	}
	if e.p.goAwayCode != nil {
		if code, ok := e.p.goAwayCode(e.ps.err()); !ok || code != 5 {
			t.Errorf("%s's error after braid's go-away: %v, want one with code 5", e.p.name, e.ps.err())
		}
	}
}
