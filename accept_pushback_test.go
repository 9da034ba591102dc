package braid

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/braidmux/braid/slowconn"
)

// The accept push-back (issue #13): js-libp2p (yamux and mplex) and
// rust-yamux open hundreds of streams without waiting for an ACK, more
// than the accept backlog holds before the application's accept loop has
// run. When a stream finds the backlog full, braid stops reading the
// connection (TCP pushes back on the peer) while the application is
// accepting: for at most Config.MaxReceiveStall since the last Accept.
// Then it refuses, at once and for every further stream, until the next
// Accept. The tests play the peer in raw frames (yamux SYNs, mplex
// NewStreams), all written in one conn write.
//
// Over loopback TCP, real time: an accept loop that keeps up, or starts
// 50 ms late, gets all 300 streams. In a synctest bubble over a slowconn
// pipe (whose writes buffer as a socket's do, so the peer's burst never
// waits for braid's read loop; the clock is exact): the policy's edges.

const (
	burstStreams = 300 // what js-libp2p and rust-yamux open at once in the interop suite
	// burstLate is how late the late accept loop starts: well inside the
	// default MaxReceiveStall, well beyond the read loop's burst.
	burstLate = 50 * time.Millisecond
	// burstWait bounds every wait of the real-time tests.
	burstWait = 20 * time.Second
)

// burstPayload is what the peer sends on stream id.
func burstPayload(id uint32) string { return fmt.Sprintf("stream %d", id) }

// burstFrames returns, in the peer's codec, a SYN (mplex: NewStream), a
// data frame naming the stream and a FIN for each of the peer's streams
// with wire index from to to-1 (engine keys 2i+1: the peer is the client).
func burstFrames(c codec, from, to int) []byte {
	var b []byte
	for i := from; i < to; i++ {
		id := uint32(2*i + 1)
		p := burstPayload(id)
		b = c.appendHeader(b, header{typ: typeWindowUpdate, flags: flagSYN, streamID: id})
		b = c.appendHeader(b, header{typ: typeData, streamID: id, length: uint32(len(p))})
		b = append(b, p...)
		b = c.appendHeader(b, header{typ: typeWindowUpdate, flags: flagFIN, streamID: id})
	}
	return b
}

// burstPeer is the client side of a session played in raw frames of
// either protocol. It records what braid sends: resets, replies, pongs.
type burstPeer struct {
	conn  net.Conn
	codec codec // the peer's (client) side
	done  chan struct{}

	mu      sync.Mutex
	resets  int
	firstRS time.Time         // when the first reset arrived
	replies map[uint32]string // data braid sent, by stream, once its FIN came
	partial map[uint32][]byte // data of streams not finished yet
	pongs   int
	changed chan struct{} // one-slot notify: a frame was recorded
}

// newBurstPeer starts a braid Server on c2 with cfg, and the raw peer,
// reading, on c1. Both end with the test.
func newBurstPeer(t *testing.T, c1, c2 net.Conn, cfg *Config) (*burstPeer, *Session) {
	t.Helper()
	s, err := Server(c2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &burstPeer{
		conn:    c1,
		codec:   newCodec(s.cfg.Protocol, true),
		done:    make(chan struct{}),
		replies: make(map[uint32]string),
		partial: make(map[uint32][]byte),
		changed: make(chan struct{}, 1),
	}
	go p.read()
	t.Cleanup(func() {
		_ = s.Close()
		_ = c1.Close()
		<-p.done
	})
	return p, s
}

// read records braid's frames until the conn ends.
func (p *burstPeer) read() {
	defer close(p.done)
	br := bufio.NewReader(p.conn)
	for {
		h, _, err := p.codec.readHeader(br)
		if err != nil {
			return
		}
		var payload []byte
		if h.typ == typeData && h.length > 0 {
			payload = make([]byte, h.length)
			if _, err := io.ReadFull(br, payload); err != nil {
				return
			}
		}
		p.mu.Lock()
		switch {
		case h.typ == typePing && h.flags&flagACK != 0:
			p.pongs++
		case h.streamID == 0:
		case h.flags&flagRST != 0:
			if p.resets == 0 {
				p.firstRS = time.Now()
			}
			p.resets++
		default:
			p.partial[h.streamID] = append(p.partial[h.streamID], payload...)
			if h.flags&flagFIN != 0 {
				p.replies[h.streamID] = string(p.partial[h.streamID])
				delete(p.partial, h.streamID)
			}
		}
		p.mu.Unlock()
		notify(p.changed)
	}
}

// send writes b in one conn write.
func (p *burstPeer) send(t *testing.T, b []byte) {
	t.Helper()
	if _, err := p.conn.Write(b); err != nil {
		t.Fatal(err)
	}
}

// counts returns the resets and finished replies recorded so far.
func (p *burstPeer) counts() (resets, replies int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resets, len(p.replies)
}

// awaitReplies waits until braid answered n streams, failing at the
// first reset or after burstWait.
func (p *burstPeer) awaitReplies(t *testing.T, n int) {
	t.Helper()
	deadline := time.NewTimer(burstWait)
	defer deadline.Stop()
	for {
		resets, replies := p.counts()
		if resets > 0 {
			t.Fatalf("braid reset %d streams (%d of %d answered)", resets, replies, n)
		}
		if replies >= n {
			return
		}
		select {
		case <-p.changed:
		case <-deadline.C:
			t.Fatalf("%d of %d streams answered within %v", replies, n, burstWait)
		}
	}
}

// checkReplies checks that streams from to to-1 were each answered "ok"
// and the stream's payload.
func (p *burstPeer) checkReplies(t *testing.T, from, to int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; i < to; i++ {
		id := uint32(2*i + 1)
		if got, want := p.replies[id], "ok "+burstPayload(id); got != want {
			t.Fatalf("stream %d answered %q, want %q", id, got, want)
		}
	}
}

// serveBurst is an accept loop that keeps accepting: it takes a stream,
// reads it to the peer's FIN, answers "ok" and the payload, closes it,
// and only then accepts the next, n times (work, if positive, is spent
// on each stream first: time.Sleep, fake time in a bubble). The result
// comes on the channel: nil, or the first failure.
func serveBurst(s *Session, n int, work time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		for range n {
			st, err := s.AcceptStream()
			if err != nil {
				done <- fmt.Errorf("accept: %w", err)
				return
			}
			if work > 0 {
				time.Sleep(work)
			}
			if err := answer(st); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// answer reads st to its FIN and answers "ok " and what it read.
func answer(st *Stream) error {
	_ = st.SetDeadline(time.Now().Add(burstWait))
	b, err := io.ReadAll(st)
	if err != nil {
		return fmt.Errorf("stream %d: read: %w", st.ID(), err)
	}
	if string(b) != burstPayload(st.ID()) {
		return fmt.Errorf("stream %d: read %q", st.ID(), b)
	}
	if _, err := st.Write(append([]byte("ok "), b...)); err != nil {
		return fmt.Errorf("stream %d: write: %w", st.ID(), err)
	}
	return st.Close()
}

// awaitServed waits for an accept loop's result, within burstWait (in a
// bubble: of fake time, so that a loop left waiting for a refused stream
// fails the test instead of deadlocking the bubble).
func awaitServed(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(burstWait):
		t.Fatalf("the accept loop did not finish within %v", burstWait)
	}
}

// backlogLen returns how many streams wait in s's accept backlog.
func backlogLen(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acceptQ)
}

// TestAcceptPushBackBurst: the peer opens 300 streams in one write,
// without waiting for an ACK, over loopback TCP. An accept loop that
// keeps accepting gets every one, with the default backlog (256) and with
// a backlog of 16 (the read loop pushes back many times), and so does
// one that starts 50 ms after the backlog filled: 0 resets.
func TestAcceptPushBackBurst(t *testing.T) {
	for _, proto := range []Protocol{Yamux, Mplex} {
		for _, tc := range []struct {
			name    string
			backlog int
			late    bool
		}{
			{"keeps-accepting", DefaultAcceptBacklog, false},
			{"keeps-accepting/backlog-16", 16, false},
			{"starts-50ms-late", DefaultAcceptBacklog, true},
		} {
			t.Run(protoName(proto)+"/"+tc.name, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Protocol = proto
				cfg.AcceptBacklog = tc.backlog
				c1, c2 := tcpPair(t)
				p, s := newBurstPeer(t, c1, c2, cfg)
				var served <-chan error
				if !tc.late {
					served = serveBurst(s, burstStreams, 0)
				}
				p.send(t, burstFrames(p.codec, 0, burstStreams))
				if tc.late {
					deadline := time.Now().Add(burstWait)
					for backlogLen(s) < tc.backlog {
						if time.Now().After(deadline) {
							t.Fatalf("backlog at %d of %d after %v", backlogLen(s), tc.backlog, burstWait)
						}
						time.Sleep(time.Millisecond) // polling the backlog
					}
					time.Sleep(burstLate) // the application is late, not the test
					served = serveBurst(s, burstStreams, 0)
				}
				p.awaitReplies(t, burstStreams)
				awaitServed(t, served)
				p.checkReplies(t, 0, burstStreams)
				if resets, _ := p.counts(); resets != 0 {
					t.Fatalf("%d streams reset", resets)
				}
				if s.IsClosed() {
					t.Fatalf("session closed: %v", s.Err())
				}
			})
		}
	}
}

// protoName names a protocol in a subtest's name.
func protoName(p Protocol) string {
	if p == Mplex {
		return "mplex"
	}
	return "yamux"
}

// syncPeer makes a braid Server with cfg (keep-alive off: the bubble's
// clock would run to it) and its raw peer over an unlimited slowconn
// pipe, inside the calling synctest bubble.
func syncPeer(t *testing.T, proto Protocol, mod func(*Config)) (*burstPeer, *Session) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Protocol = proto
	cfg.DisableKeepAlive = true
	if mod != nil {
		mod(cfg)
	}
	c1, c2 := slowconn.Pipe(slowconn.Link{})
	return newBurstPeer(t, c1, c2, cfg)
}

// inBubbleBothProtocols runs f in a synctest bubble for yamux and for mplex.
func inBubbleBothProtocols(t *testing.T, f func(t *testing.T, proto Protocol)) {
	for _, proto := range []Protocol{Yamux, Mplex} {
		t.Run(protoName(proto), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, proto) })
		})
	}
}

// TestAcceptPushBackNobodyAccepts: with nobody accepting, the streams
// beyond the backlog are refused exactly MaxReceiveStall after the
// session started (the last "Accept"), all at once; further streams are
// refused at once, with no second wait; the session stays usable and
// holds no more than the backlog. An Accept makes room and starts the
// grace again: the next stream that finds the backlog full waits again.
func TestAcceptPushBackNobodyAccepts(t *testing.T) {
	inBubbleBothProtocols(t, func(t *testing.T, proto Protocol) {
		p, s := syncPeer(t, proto, nil)
		stall := s.cfg.MaxReceiveStall
		start := time.Now()
		p.send(t, burstFrames(p.codec, 0, burstStreams))
		synctest.Wait()
		if resets, _ := p.counts(); resets != 0 || backlogLen(s) != DefaultAcceptBacklog {
			t.Fatalf("at once: %d resets, backlog %d; want 0 and %d", resets, backlogLen(s), DefaultAcceptBacklog)
		}
		time.Sleep(stall - time.Millisecond)
		synctest.Wait()
		if resets, _ := p.counts(); resets != 0 {
			t.Fatalf("%d resets %v after the session started, before MaxReceiveStall", resets, time.Since(start))
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		const beyond = burstStreams - DefaultAcceptBacklog
		if resets, _ := p.counts(); resets != beyond {
			t.Fatalf("%d resets at MaxReceiveStall, want %d", resets, beyond)
		}
		p.mu.Lock()
		first := p.firstRS.Sub(start)
		p.mu.Unlock()
		if first != stall {
			t.Fatalf("first reset %v after the start, want MaxReceiveStall (%v)", first, stall)
		}

		// A further flood: refused at once, no time passes.
		const more = 1000
		refusedAt := time.Now()
		p.send(t, burstFrames(p.codec, burstStreams, burstStreams+more))
		synctest.Wait()
		if resets, _ := p.counts(); resets != beyond+more || time.Since(refusedAt) != 0 {
			t.Fatalf("further streams: %d resets after %v, want %d at once", resets, time.Since(refusedAt), beyond+more)
		}
		if n := s.NumStreams(); n != DefaultAcceptBacklog {
			t.Fatalf("session holds %d streams, want the backlog's %d", n, DefaultAcceptBacklog)
		}
		if proto == Yamux {
			p.send(t, p.codec.appendHeader(nil, header{typ: typePing, flags: flagSYN, length: 7}))
			synctest.Wait()
			p.mu.Lock()
			pongs := p.pongs
			p.mu.Unlock()
			if pongs != 1 {
				t.Fatal("no pong: the read loop is not reading")
			}
		}

		// An Accept: the stream is served, its place is taken by a new
		// stream, and the grace starts again for the next one.
		served := serveBurst(s, 1, 0)
		synctest.Wait()
		awaitServed(t, served)
		next := burstStreams + more
		p.send(t, burstFrames(p.codec, next, next+2))
		synctest.Wait()
		if resets, _ := p.counts(); resets != beyond+more || backlogLen(s) != DefaultAcceptBacklog {
			t.Fatalf("after an Accept: %d resets, backlog %d; want %d and %d", resets, backlogLen(s), beyond+more, DefaultAcceptBacklog)
		}
		time.Sleep(stall)
		synctest.Wait()
		if resets, _ := p.counts(); resets != beyond+more+1 {
			t.Fatalf("after the second stall: %d resets, want %d", resets, beyond+more+1)
		}
		if s.IsClosed() {
			t.Fatalf("session closed: %v", s.Err())
		}
	})
}

// TestAcceptPushBackLateAcceptor: an accept loop that starts just inside
// MaxReceiveStall after the session started gets all 300 streams; one
// that starts just after it finds the 256 of the backlog, the other 44
// refused.
func TestAcceptPushBackLateAcceptor(t *testing.T) {
	inBubbleBothProtocols(t, func(t *testing.T, proto Protocol) {
		for _, tc := range []struct {
			late    time.Duration // after MaxReceiveStall
			refused int
		}{
			{-time.Millisecond, 0},
			{time.Millisecond, burstStreams - DefaultAcceptBacklog},
		} {
			p, s := syncPeer(t, proto, nil)
			p.send(t, burstFrames(p.codec, 0, burstStreams))
			time.Sleep(s.cfg.MaxReceiveStall + tc.late)
			served := serveBurst(s, burstStreams-tc.refused, 0)
			synctest.Wait()
			awaitServed(t, served)
			resets, replies := p.counts()
			if resets != tc.refused || replies != burstStreams-tc.refused {
				t.Fatalf("accept loop %v after MaxReceiveStall: %d resets, %d served; want %d and %d",
					tc.late, resets, replies, tc.refused, burstStreams-tc.refused)
			}
			p.checkReplies(t, 0, burstStreams-tc.refused)
		}
	})
}

// TestAcceptPushBackSlowAcceptor: the grace counts from the last Accept,
// not the first: an accept loop that spends 10 ms on each stream takes
// 3 s for the burst, twelve times MaxReceiveStall, and loses none. It
// waited in AcceptStream for 10 s before the burst came: a waiting
// AcceptStream is an application that is accepting.
func TestAcceptPushBackSlowAcceptor(t *testing.T) {
	inBubbleBothProtocols(t, func(t *testing.T, proto Protocol) {
		p, s := syncPeer(t, proto, func(c *Config) { c.AcceptBacklog = 16 })
		const work = 10 * time.Millisecond
		served := serveBurst(s, burstStreams, work)
		time.Sleep(10 * time.Second)
		start := time.Now()
		p.send(t, burstFrames(p.codec, 0, burstStreams))
		synctest.Wait()
		awaitServed(t, served)
		synctest.Wait()
		resets, replies := p.counts()
		if resets != 0 || replies != burstStreams {
			t.Fatalf("%d resets, %d of %d served", resets, replies, burstStreams)
		}
		if took := time.Since(start); took != burstStreams*work {
			t.Fatalf("served in %v, want %v", took, burstStreams*work)
		}
	})
}

// TestAcceptPushBackWakes: a read loop waiting for accept room doesn't
// hold up Close or GoAway. GoAway refuses the waiting stream and the rest
// at once; Close returns at once, though nobody accepted. No time passes
// in either.
func TestAcceptPushBackWakes(t *testing.T) {
	inBubbleBothProtocols(t, func(t *testing.T, proto Protocol) {
		p, s := syncPeer(t, proto, nil)
		p.send(t, burstFrames(p.codec, 0, burstStreams))
		synctest.Wait()
		start := time.Now()
		if err := s.GoAway(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if resets, _ := p.counts(); resets != burstStreams-DefaultAcceptBacklog || time.Since(start) != 0 {
			t.Fatalf("after GoAway: %d resets after %v, want %d at once", resets, time.Since(start), burstStreams-DefaultAcceptBacklog)
		}

		p, s = syncPeer(t, proto, nil)
		p.send(t, burstFrames(p.codec, 0, burstStreams))
		synctest.Wait()
		start = time.Now()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// The peer never closes its end: Close lingers for it (linger.go),
		// and no longer.
		if took := time.Since(start); took > s.lingerFor() {
			t.Fatalf("Close took %v with the read loop waiting for accept room", took)
		}
		if _, err := s.AcceptStream(); !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("AcceptStream after Close: %v", err)
		}
	})
}

// TestKeepAliveDuringAcceptPushBack: a read loop that stops reading for an
// accept push-back longer than KeepAliveInterval + ConnectionWriteTimeout
// leaves the keep-alive's ping answered but unread; the keep-alive must
// not take that for a dead peer. The peer is a braid client that answers
// pings; nobody accepts on the server, whose backlog of one is full from
// the first stream, so the second stream's SYN stalls the read loop for
// MaxReceiveStall. After it the streams beyond the backlog are refused,
// and both sessions are open and answer pings.
func TestKeepAliveDuringAcceptPushBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		cfg := DefaultConfig()
		cfg.DisableKeepAlive = false
		cfg.KeepAliveInterval = interval
		cfg.ConnectionWriteTimeout = 3 * interval
		cfg.AcceptBacklog = 1
		cfg.MaxReceiveStall = 10 * cfg.ConnectionWriteTimeout
		peerCfg := DefaultConfig()
		peerCfg.DisableKeepAlive = true // the server is not reading: a peer's keep-alive would be right to close
		c1, c2 := slowconn.Pipe(slowconn.Link{})
		client, err := Client(c1, peerCfg)
		if err != nil {
			t.Fatal(err)
		}
		server, err := Server(c2, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer server.Close()
		defer client.Close()
		const streams = 3
		refused := make(chan error, streams)
		for i := range streams {
			st, err := client.OpenStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Write([]byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			if i > 0 {
				go func() {
					_, err := st.Read(make([]byte, 1))
					refused <- err
				}()
			}
		}
		time.Sleep(cfg.MaxReceiveStall + 2*(interval+cfg.ConnectionWriteTimeout))
		synctest.Wait()
		if err := server.Err(); err != nil {
			t.Fatalf("the server's keep-alive closed it during its own push-back: %v", err)
		}
		if err := client.Err(); err != nil {
			t.Fatalf("client: %v", err)
		}
		for range streams - 1 {
			select {
			case err := <-refused:
				if !errors.Is(err, ErrStreamReset) {
					t.Fatalf("a stream beyond the backlog: %v, want refused (ErrStreamReset)", err)
				}
			default:
				t.Fatal("a stream beyond the backlog was not refused")
			}
		}
		if _, err := server.Ping(); err != nil {
			t.Fatalf("server Ping after the push-back: %v", err)
		}
		if st, err := server.AcceptStream(); err != nil {
			t.Fatalf("AcceptStream: %v", err)
		} else {
			_ = st.Close()
		}
	})
}
