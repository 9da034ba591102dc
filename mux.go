package braid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	pool "github.com/libp2p/go-buffer-pool"
)

const (
	// closeFlushTimeout bounds how long Close waits for queued frames (the
	// last data, FINs, the go-away) to reach the conn before closing it.
	closeFlushTimeout = time.Second
)

// Session multiplexes streams over one net.Conn. Make one with Client or
// Server (one side of a connection each). All methods are safe for
// concurrent use.
//
// A session runs two goroutines: the read loop, which decodes frames and
// hands them to streams, and the writer, the only code that writes to the
// conn. Both end when the session closes, which Close does and which the
// loss of the conn or a peer that breaks the protocol causes. At a quiet
// moment a Read may read the conn in the read loop's stead (turn.go).
type Session struct {
	conn   net.Conn
	cfg    Config
	client bool
	codec  codec
	caps   capabilities // what the protocol can express
	w      *writer
	// The read side's state below (br to rideBuf) is owned by whoever
	// holds the conn turn (turn.go): the read loop, or a Read reading the
	// conn at a quiet moment; "the read loop" in their comments means
	// that holder.
	br       *readBuffer // owned by the read loop
	last     lastStream  // the stream of the last stream frame read; owned by the read loop
	bulk     bulkTracker // the large data frames read (handoff.go); owned by the read loop
	pongWait pongWaiter  // the read loop's wait for a pong's write (handoff.go); owned by the read loop
	// How window updates go back (recvwindow.go, updateride.go): updates
	// is the session's rule, fixed at the start (sessionUpdateRule);
	// where it is updateRide, rides is the streams whose update waits for
	// a pong, rideBuf the read loop's, and markers counts the read loop's
	// answers.
	updates updateRule
	rides   rideList
	rideBuf []header
	markers atomic.Uint32 // the peer's markers answered so far, wrapping: are pongs coming (updateride.go)
	cutter  *readCutter   // cuts the read loop's read for a lent buffer (lend.go); nil if conn can't lend
	turn    connTurn      // who reads frames off the conn: the read loop, or a Read at a quiet moment (turn.go)

	rtt        atomic.Int64  // last measured round-trip time, ns; 0 until known
	path       pathState     // RTT and rate, for new streams' windows (path.go)
	budget     recvBudget    // connection-level receive budget (path.go)
	mem        memoryLedger  // what is reserved from Config.Memory (memory.go)
	env        growthEnv     // what windows grow by (recvwindow.go); set once
	recvFrames atomic.Uint64 // frames read
	recvBytes  atomic.Uint64 // bytes read, headers included
	lentBytes  atomic.Uint64 // payload bytes read into lent buffers (lend.go)
	recvActive atomic.Bool   // a frame arrived since the keep-alive last looked
	stalls     readStalls    // the read loop's push-back waits, for the keep-alive (stallwait.go)
	removals   atomic.Uint64 // streams taken out of streams; changed under mu (lastStream)

	closedCh chan struct{} // closed when the session starts closing
	readDone chan struct{} // closed when the read loop returns
	// lingering is set by Close's goroutine when it has half-closed the
	// conn and waits for the peer's end (linger.go); the read loop then
	// drains the conn and leaves the session's end to Close.
	lingering atomic.Bool
	ended     chan struct{} // closed by shutdown when it is done

	mu           sync.Mutex // guards the fields below
	streams      map[uint32]*Stream
	streamsPeak  int                 // the most streams held since streams was last made (shrinkTableLocked)
	nextID       uint32              // the id our next stream gets
	incoming     int                 // streams the peer opened that are still in streams
	unacked      int                 // streams we opened that wait for the peer's ACK
	ackWait      chan struct{}       // closed when unacked drops or the session changes; nil if nobody waits
	acceptQ      []*Stream           // accept backlog, at most AcceptBacklog; only the read loop appends; nil while empty
	acceptWait   chan struct{}       // closed when a stream joins acceptQ; nil if nobody waits
	acceptCalls  int                 // AcceptStream calls waiting for a stream
	lastAccept   time.Time           // when AcceptStream last took a stream; the session's start until then
	acceptRoom   chan struct{}       // one-slot notify: AcceptStream took a stream; made when the read loop first waits for room
	localGoAway  bool                // we sent a go-away: incoming streams are refused
	remoteGoAway bool                // the peer sent one: OpenStream fails
	pings        map[uint32]pingWait // outstanding pings; nil while none
	nextPing     uint32
	kaTimer      *time.Timer // keep-alive; nil when disabled
	kaPending    bool        // the keep-alive ping is unanswered
	kaSent       time.Time   // when the unanswered keep-alive ping was queued
	kaRead       uint64      // br.got then: the bytes read off the conn
	kaStalls     uint64      // stalls.begun then: the read loop's push-back waits
	closing      bool
	closeErr     error // why the session ended; set with closing

	grownMu     sync.Mutex           // guards the fields below; taken with no other lock held
	grown       map[*Stream]struct{} // streams whose window grew; made on first use
	shrinkTimer *time.Timer          // runs shrinkIdle while grown is not empty; nil otherwise
	grownClosed bool                 // the session closed: no timer is armed again
}

// pingWait is an outstanding ping.
type pingWait struct {
	sent time.Time
	done chan time.Duration // nil for internal (RTT, keep-alive) pings
}

// Client makes the client side of a session over conn: its streams get odd
// ids. A nil cfg, like &Config{}, means the defaults; an invalid one is a
// *ConfigError, and a nil conn ErrNilConn (conn stays the caller's after
// an error). The session owns conn from now on: Close closes it.
func Client(conn net.Conn, cfg *Config) (*Session, error) { return newSession(conn, cfg, true) }

// Server makes the server side of a session over conn: its streams get even
// ids. cfg and conn are as for Client. The session owns conn from now on:
// Close closes it.
func Server(conn net.Conn, cfg *Config) (*Session, error) { return newSession(conn, cfg, false) }

func newSession(conn net.Conn, userCfg *Config, client bool) (*Session, error) {
	if isNilPointer(conn) {
		return nil, ErrNilConn
	}
	resolved, err := resolve(userCfg)
	if err != nil {
		return nil, err
	}
	cfg := &resolved
	c := newCodec(cfg.Protocol, client)
	cutter := newReadCutter(conn)
	s := &Session{
		conn:     conn,
		cfg:      *cfg,
		client:   client,
		codec:    c,
		caps:     c.caps(),
		w:        newWriter(conn, c, cfg),
		br:       newReadBuffer(checkedReader{conn}, cutter, newVectorReader(conn)),
		cutter:   cutter,
		mem:      memoryLedger{m: cfg.Memory},
		closedCh: make(chan struct{}),
		readDone: make(chan struct{}),
		ended:    make(chan struct{}),
		streams:  make(map[uint32]*Stream),
		nextID:   2,
		// The accept push-back's grace starts with the session, so an
		// application that starts accepting just after opens the session
		// loses no stream to a burst that came first.
		lastAccept: time.Now(),
	}
	if client {
		s.nextID = 1
	}
	s.budget.limit = int64(s.cfg.MaxSessionWindow)
	s.env = growthEnv{now: time.Now, path: s.path.estimate, maxWindow: s.cfg.MaxStreamWindow}
	if s.caps.ping {
		s.w.peerRTT = s.RTT
		s.w.path = &s.path
	}
	s.updates = sessionUpdateRule(s.caps, s.w)
	s.w.received = &s.recvFrames // before the writer starts: inline writes (inline.go)
	s.w.waker = newReadWaker(conn, cutter, s.w.writev, s.w.parallel)
	if s.w.waker != nil {
		s.br.parked = &s.w.waker.parked // before the read loop starts
	}
	s.turn.init(cutter, s.caps.flowControl, s.w.parallel)
	if s.turn.on {
		s.br.turnWant = &s.turn.want
		// The read loop holds the turn from the start: a Read that came
		// before the goroutine ran must not read first.
		s.turn.mu.Lock()
	}
	s.w.turn = &s.turn
	go s.w.run()
	go s.readLoop()
	if !s.caps.ping {
		// Keep-alive and RTT need pings; so does window growth, which
		// needs flow control too.
		return s, nil
	}
	// Measure the round trip at once: window growth needs it.
	s.path.probe.Store(time.Now().UnixNano())
	_, _ = s.sendPing(nil)
	if !s.cfg.DisableKeepAlive {
		s.mu.Lock()
		s.kaTimer = time.AfterFunc(s.cfg.KeepAliveInterval, s.keepAliveTick)
		s.mu.Unlock()
	}
	return s, nil
}

// OpenStream opens a new stream. It waits while Config.MaxUnackedStreams
// of our streams wait for the peer's acknowledgement, until ctx is done
// (then it returns ctx.Err(), as it does for a ctx already done, opening
// nothing). A nil ctx is ErrNilContext. The SYN grants the peer the window
// the session's path needs (more than the protocol's initial 256 KiB on a
// long link).
//
// OpenStream fails with an error matching ErrSessionClosed once the
// session is closed, with a *GoAwayError matching ErrRemoteGoAway after
// the peer's go-away, with ErrLocalGoAway after GoAway, with
// ErrStreamsExhausted when the stream ids are used up, and with
// Config.Memory's own error when the memory manager refuses the new
// stream's initial window.
func (s *Session) OpenStream(ctx context.Context) (*Stream, error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.mem.reserve(InitialStreamWindow, streamPriority); err != nil {
		if errors.Is(err, ErrSessionClosed) {
			return nil, s.closeError(err) // why the session ended
		}
		return nil, err // the memory manager's refusal, as it is
	}
	extra, charged := s.startGrant()
	st, err := s.registerOutbound(ctx, extra, charged)
	if err != nil {
		s.releaseMemory(InitialStreamWindow + int(extra))
		s.releaseBudget(charged)
		return nil, err
	}
	if extra > 0 {
		// The stream is in the table: a session shutdown may release it
		// meanwhile (releaseStream), so grownIn changes under its mu, as
		// in acceptGrant, and a removed stream is not tracked.
		st.mu.Lock()
		track := st.joinGrownLocked(true)
		st.mu.Unlock()
		if track {
			s.trackGrown(st)
		}
	}
	h := header{typ: typeWindowUpdate, flags: flagSYN, streamID: st.id, length: extra}
	if err := s.w.queueCtrl(h, ctx.Done()); err != nil {
		st.mu.Lock()
		st.resetLocked(ErrStreamClosed)
		st.mu.Unlock()
		st.maybeRemove()
		if errors.Is(err, context.Canceled) || ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.closeError(err)
	}
	return st, nil
}

// startGrant returns how much more than InitialStreamWindow a new
// stream's window may start with, as the path needs it, and the session
// budget taken for it; the memory is reserved. Called with no lock held.
func (s *Session) startGrant() (extra, charged uint32) {
	if !s.caps.flowControl {
		return 0, 0
	}
	w := s.path.estimate().window(s.cfg.MaxStreamWindow)
	if w <= InitialStreamWindow {
		return 0, 0
	}
	want := w - InitialStreamWindow
	return s.reserveGrowth(want, want)
}

// reserveGrowth reserves want bytes of window growth, of which cost from
// the session budget and all from the memory manager. The budget may
// grant less, which shrinks the growth; the memory manager all or
// nothing. It returns the growth and the budget taken. No lock held.
func (s *Session) reserveGrowth(want, cost uint32) (g, charged uint32) {
	got := s.budget.take(cost)
	if short := cost - got; short > 0 {
		if short >= want {
			s.budget.give(got)
			return 0, 0
		}
		want -= short
	}
	if s.mem.reserve(int(want), windowPriority) != nil {
		s.budget.give(got)
		return 0, 0
	}
	return want, got
}

// releaseMemory returns n bytes to the memory manager. No lock held.
func (s *Session) releaseMemory(n int) { s.mem.release(n) }

// releaseBudget returns n bytes of the session budget.
func (s *Session) releaseBudget(n uint32) { s.budget.give(n) }

// registerOutbound waits for room in the ACK backlog and registers a new
// stream of ours.
func (s *Session) registerOutbound(ctx context.Context, extra, charged uint32) (*Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.closing:
			return nil, sessionClosedError(s.closeErr)
		case s.remoteGoAway:
			return nil, &GoAwayError{ErrorCode: GoAwayNormal, Remote: true}
		case s.localGoAway:
			return nil, ErrLocalGoAway
		case s.nextID > math.MaxUint32-2:
			return nil, ErrStreamsExhausted
		}
		if s.unacked < s.cfg.MaxUnackedStreams {
			break
		}
		if s.ackWait == nil {
			s.ackWait = make(chan struct{})
		}
		wait := s.ackWait
		s.mu.Unlock()
		s.turn.needFrames() // the ACKs come as frames (turn.go)
		select {
		case <-wait:
		case <-ctx.Done():
			s.turn.needDone()
			s.mu.Lock()
			return nil, ctx.Err()
		case <-s.closedCh:
		}
		s.turn.needDone()
		s.mu.Lock()
	}
	reserved := 0
	if s.cfg.Memory != nil {
		reserved = InitialStreamWindow + int(extra)
	}
	st := newStream(s, s.nextID, InitialStreamWindow+extra, charged, reserved)
	if !s.caps.flowControl {
		st.lastRead = time.Now() // the reader's grace starts with the stream
	}
	s.nextID += 2
	if s.caps.acks {
		st.unacked = true
		s.unacked++
	}
	s.addStreamLocked(st)
	return st, nil
}

// wakeOpenersLocked wakes OpenStream calls waiting for the ACK backlog.
func (s *Session) wakeOpenersLocked() {
	if s.ackWait != nil {
		close(s.ackWait)
		s.ackWait = nil
	}
}

// AcceptStream waits for the next stream the peer opens and acknowledges
// it. Once the session is closed it fails with an error matching
// ErrSessionClosed.
func (s *Session) AcceptStream() (*Stream, error) {
	s.mu.Lock()
	for {
		if s.closing {
			// The backlog of a closed session holds only dead streams.
			err := sessionClosedError(s.closeErr)
			s.mu.Unlock()
			return nil, err
		}
		if len(s.acceptQ) > 0 {
			st := s.acceptQ[0]
			s.acceptQ[0] = nil
			s.acceptQ = s.acceptQ[1:]
			if len(s.acceptQ) == 0 {
				s.acceptQ = nil // an idle session holds no backlog array
			}
			// The application is accepting: a read loop waiting for
			// room in the backlog (awaitAcceptRoom) reads on.
			s.lastAccept = time.Now()
			notify(s.acceptRoom)
			s.mu.Unlock()
			s.acceptGrant(st)
			return st, nil
		}
		if s.acceptWait == nil {
			s.acceptWait = make(chan struct{})
		}
		wait := s.acceptWait
		s.acceptCalls++
		s.mu.Unlock()
		s.turn.acceptWaits() // the peer's SYN comes as a frame (turn.go)
		select {
		case <-wait:
		case <-s.closedCh:
		}
		s.turn.acceptDone()
		s.mu.Lock()
		s.acceptCalls--
	}
}

// acceptGrant acknowledges an accepted stream; the ACK grants the peer
// the window the session's path needs, as the SYN of our own streams
// does.
func (s *Session) acceptGrant(st *Stream) {
	extra, charged := s.startGrant()
	st.mu.Lock()
	var delta uint32
	if extra > 0 {
		delta = st.rw.grew(extra, charged, st.readFinalLocked(), updateEighths)
		extra, charged = st.keepReservedLocked(extra)
	}
	track := st.joinGrownLocked(st.rw.grown())
	flags := st.takeFlagsLocked()
	st.mu.Unlock()
	s.releaseMemory(int(extra)) // the stream was removed meanwhile
	s.releaseBudget(charged)
	if track {
		s.trackGrown(st)
	}
	if flags != 0 || delta > 0 {
		_ = s.w.queueCallCtrl(header{typ: typeWindowUpdate, flags: flags, streamID: st.id, length: delta})
	}
}

// Ping sends a ping and returns the round-trip time. It gives up after
// Config.ConnectionWriteTimeout with os.ErrDeadlineExceeded. On mplex,
// which has no pings, it returns ErrNotSupported; on a session that is
// closed, or closes while Ping waits, an error matching ErrSessionClosed.
func (s *Session) Ping() (time.Duration, error) {
	done := make(chan time.Duration, 1)
	id, err := s.sendPing(done)
	if err != nil {
		return 0, err
	}
	t := time.NewTimer(s.cfg.ConnectionWriteTimeout)
	defer t.Stop()
	s.turn.needFrames() // the pong comes as a frame (turn.go)
	defer s.turn.needDone()
	select {
	case rtt := <-done:
		return rtt, nil
	case <-s.closedCh:
		return 0, s.closeError(nil)
	case <-t.C:
		s.mu.Lock()
		s.forgetPingLocked(id)
		s.mu.Unlock()
		return 0, os.ErrDeadlineExceeded
	}
}

// sendPing queues a ping; done (nil for internal pings) gets the RTT.
func (s *Session) sendPing(done chan time.Duration) (uint32, error) {
	if !s.caps.ping {
		return 0, ErrNotSupported
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return 0, sessionClosedError(s.closeErr)
	}
	// The writer's markers own the ids with markerFlag (inflight.go): a
	// pong for a ping of ours there would go to markerAnswered.
	s.nextPing = (s.nextPing + 1) &^ markerFlag
	id := s.nextPing
	if s.pings == nil {
		s.pings = make(map[uint32]pingWait)
	}
	if done == nil {
		// A ping nobody waits for (keep-alive, the first round-trip
		// probe) replaces the one before it, whose late pong is then
		// ignored: a peer that never answers pings while other frames
		// keep the session alive would otherwise leave one entry per
		// keep-alive interval, for good. Ping's own entries go at its
		// timeout.
		for old, w := range s.pings {
			if w.done == nil {
				delete(s.pings, old)
			}
		}
	}
	s.pings[id] = pingWait{sent: time.Now(), done: done}
	s.mu.Unlock()
	if err := s.w.queueCtrl(header{typ: typePing, flags: flagSYN, length: id}, s.closedCh); err != nil {
		return 0, s.closeError(err)
	}
	return id, nil
}

// keepAliveMinRate is the pace, in bytes per second, at which the bytes
// of a frame still arriving keep a session alive while no whole frame
// comes (keepAliveTick): a slow link carrying one long frame (hashicorp/yamux
// sends a stream's whole window in one, up to MaxStreamWindow) goes faster;
// a slowloris peer that trickles a frame a byte at a time does not.
const keepAliveMinRate = 2 << 10

// keepAliveMinBytes is what must arrive in d at keepAliveMinRate.
func keepAliveMinBytes(d time.Duration) uint64 {
	return max(1, uint64(d.Seconds()*keepAliveMinRate))
}

// keepAliveTick runs on the keep-alive timer, at least once per
// KeepAliveInterval: it pings a peer from which no frame arrived during
// the last interval, and closes the session when no frame arrived within
// ConnectionWriteTimeout of that ping, unless the bytes of one kept
// arriving at keepAliveMinRate or more meanwhile (a long frame on a slow
// link, which the answer can't overtake), or the read loop stopped
// reading meanwhile by this side's choice (a push-back wait, readStalls:
// the answer may be unread in the conn). The answer may take a round trip
// longer than the interval, so the wait is Ping's (as in go-yamux's
// keep-alive), not one interval; and the timer keeps ticking each interval
// meanwhile, so that an answer that comes early restarts the cycle at once.
func (s *Session) keepAliveTick() {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	if s.recvActive.Swap(false) {
		s.kaPending = false
		s.kaTimer.Reset(s.cfg.KeepAliveInterval)
		s.mu.Unlock()
		return
	}
	if s.kaPending {
		waited := time.Since(s.kaSent)
		if waited >= s.cfg.ConnectionWriteTimeout {
			if s.br.got.Load()-s.kaRead >= keepAliveMinBytes(waited) || s.stalls.since(s.kaStalls) {
				// No whole frame came, but its bytes keep coming at a
				// link's pace: the answer waits behind a long frame.
				// Or the read loop stopped reading meanwhile (a
				// push-back wait): the answer may be in the conn.
				// Ping again once it is read, or an interval passed.
				s.kaPending = false
				s.kaTimer.Reset(s.cfg.KeepAliveInterval)
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			s.shutdown(ErrKeepAliveTimeout, false, 0, false)
			return
		}
		s.kaTimer.Reset(min(s.cfg.KeepAliveInterval, s.cfg.ConnectionWriteTimeout-waited))
		s.mu.Unlock()
		return
	}
	s.kaPending = true
	s.kaSent = time.Now()
	s.kaRead = s.br.got.Load()
	s.kaStalls = s.stalls.begun.Load()
	s.kaTimer.Reset(min(s.cfg.KeepAliveInterval, s.cfg.ConnectionWriteTimeout))
	s.mu.Unlock()
	_, _ = s.sendPing(nil)
}

// GoAway tells the peer that we accept no new streams; the streams already
// open keep working on this side and with a braid peer, but go-yamux v5
// (whose handleGoAway returns ErrRemoteGoAway) and rust-yamux end the
// whole session when a go-away comes. Incoming streams are
// refused from now on (mplex has no go-away frame: there they are refused
// without telling the peer).
// Calling it again is harmless; on a closed session it returns an error
// matching ErrSessionClosed.
func (s *Session) GoAway() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return sessionClosedError(s.closeErr)
	}
	s.localGoAway = true
	s.wakeOpenersLocked()
	notify(s.acceptRoom) // a read loop waiting for accept room refuses at once
	s.mu.Unlock()
	if !s.caps.goAway {
		return nil // mplex: refuse new streams without telling the peer
	}
	if err := s.w.queueCtrl(header{typ: typeGoAway, length: GoAwayNormal}, s.closedCh); err != nil {
		return s.closeError(err)
	}
	return nil
}

// Close closes the session and its connection: queued frames are flushed
// (for up to a second), the peer is sent a normal go-away, and every stream
// still open fails at once with an error matching ErrStreamReset and
// ErrSessionClosed: its Reads (bytes already buffered stay readable) and
// its Writes (what was written before is still flushed). A connection
// that can close its writing side alone (TCP, Unix, TLS) is closed for
// writing first, and once the flush is done Close waits for the peer to
// close its end, reading and dropping what still comes, so that the peer
// reads the go-away rather than a reset (linger.go). It waits four round trips at
// most, but no less than 50 ms (50 ms when no round trip was measured)
// and no more than a second, so Close takes about two seconds at most.
// Close waits for the session's goroutines to end and returns all memory
// reserved from Config.Memory; after it, the session reserves and
// releases nothing more. It always returns nil, and calling it again
// (from any goroutine) waits for the first call to finish.
func (s *Session) Close() error {
	s.shutdown(ErrSessionClosed, true, GoAwayNormal, false)
	return nil
}

// CloseWithError closes the session like Close, sending code in the
// go-away; local and remote calls then fail with a *GoAwayError.
func (s *Session) CloseWithError(code uint32) error {
	s.shutdown(&GoAwayError{ErrorCode: code}, true, code, false)
	return nil
}

// IsClosed reports whether the session is closed or closing.
func (s *Session) IsClosed() bool {
	select {
	case <-s.closedCh:
		return true
	default:
		return false
	}
}

// RemoteGoAway reports whether the peer sent a normal go-away: OpenStream
// fails with ErrRemoteGoAway from then on, while the streams already open
// go on. (A go-away with an error code ends the session.)
func (s *Session) RemoteGoAway() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remoteGoAway
}

// CloseChan returns a channel closed when the session starts closing.
func (s *Session) CloseChan() <-chan struct{} { return s.closedCh }

// Err returns why the session ended, or nil while it is open.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing {
		return nil
	}
	return sessionClosedError(s.closeErr)
}

// NumStreams returns the number of streams in the session's table: open,
// or half-closed and waiting for the peer.
func (s *Session) NumStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// RTT returns the last measured round-trip time, 0 until one is known.
func (s *Session) RTT() time.Duration { return time.Duration(s.rtt.Load()) }

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	frames, writes, bytes, inline := s.w.snapshot()
	return Stats{
		FramesSent:     frames,
		Writes:         writes,
		BytesSent:      bytes,
		FramesReceived: s.recvFrames.Load(),
		BytesReceived:  s.recvBytes.Load(),
		BytesLent:      s.lentBytes.Load(),
		InlineWrites:   inline,
	}
}

// LocalAddr returns the local address of the connection.
func (s *Session) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// RemoteAddr returns the remote address of the connection.
func (s *Session) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }

// closeError returns the error for calls failing because the session ends.
func (s *Session) closeError(fallback error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return sessionClosedError(s.closeErr)
	}
	return sessionClosedError(fallback)
}

// removeStream takes a finished stream out of the table and returns its
// memory.
func (s *Session) removeStream(st *Stream) {
	st.mu.Lock()
	wasUnacked := st.unacked
	st.unacked = false
	st.mu.Unlock()
	s.mu.Lock()
	owned := s.streams[st.id] == st
	if owned {
		s.removals.Add(1) // first: once st is out of the table, no lastStream check passes
		delete(s.streams, st.id)
		s.shrinkTableLocked()
		if s.isIncoming(st.id) {
			s.incoming--
		}
	}
	if wasUnacked {
		s.unacked--
		s.wakeOpenersLocked()
	}
	s.mu.Unlock()
	if !owned {
		// shutdown took it out of the table: it releases the memory
		// before the session is done closing, not this goroutine later.
		return
	}
	s.releaseStream(st)
}

// minShrinkPeak is the least peak of the stream table that is shrunk
// once most of it left (shrinkTableLocked): a Go map keeps the room of its
// largest size, about 29 bytes a stream (10,000 streams opened at once
// and closed left 289 KB in an idle session, session 29). Below it the
// room is about 2 KB, not worth a copy: a table that shrinks from a
// large peak stops under it.
const minShrinkPeak = 64

// addStreamLocked puts st in the stream table and keeps its peak, which
// shrinkTableLocked follows. mu held.
func (s *Session) addStreamLocked(st *Stream) {
	s.streams[st.id] = st
	s.streamsPeak = max(s.streamsPeak, len(s.streams))
}

// shrinkTableLocked makes the stream table anew, with what it holds, once
// it holds a quarter of its peak or less and the peak was minShrinkPeak or
// more: a session that once had many streams open does not keep their
// room for good. Each copy moves at most a quarter of the streams that
// were removed since the last one: O(1) a removal, amortized. mu held.
func (s *Session) shrinkTableLocked() {
	if s.streamsPeak < minShrinkPeak || len(s.streams) > s.streamsPeak/4 {
		return
	}
	table := make(map[uint32]*Stream, len(s.streams)) // not maps.Clone: a clone keeps the room
	maps.Copy(table, s.streams)
	s.streams, s.streamsPeak = table, len(table)
}

// releaseStream returns what a stream leaving the table holds: its
// memory, its share of the session budget, its place among the grown
// streams and in the ride list. No lock held.
func (s *Session) releaseStream(st *Stream) {
	st.mu.Lock()
	mem, budget := st.takeReservedLocked()
	grown := st.grownIn
	st.grownIn = false
	riding := st.rideQueued
	st.rideQueued = false
	st.mu.Unlock()
	s.releaseMemory(mem)
	s.releaseBudget(budget)
	if grown {
		s.untrackGrown(st)
	}
	if riding {
		s.rides.remove(st)
	}
}

// isIncoming reports whether id belongs to the peer's half of the id space.
func (s *Session) isIncoming(id uint32) bool { return (id%2 == 1) != s.client }

// shutdown ends the session once: it fails every stream with cause,
// flushes what was queued and sends a go-away if asked, closes the conn,
// waits for both goroutines (but for the read loop when it is the
// caller), takes the streams out and returns all memory reserved from
// Config.Memory. A later caller but the read loop waits
// until the first is done.
func (s *Session) shutdown(cause error, goAway bool, code uint32, fromReadLoop bool) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		if !fromReadLoop {
			// The first caller may wait for the read loop, which so
			// never waits here.
			<-s.ended
		}
		return
	}
	s.closing = true
	s.closeErr = cause
	close(s.closedCh)
	s.wakeOpenersLocked()
	if s.kaTimer != nil {
		s.kaTimer.Stop()
	}
	streams := make([]*Stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	clear(s.streams)
	s.removals.Add(1) // the read loop's cached stream is out of the table too
	s.incoming, s.unacked = 0, 0
	s.mu.Unlock()

	// Streams fail now, not after the flush and linger below (up to
	// closeFlushTimeout + closeLinger): nothing read from here on
	// reaches the application, and nothing written from here on would
	// be sent (or, after a flush, is still wanted).
	streamErr := streamCutError(sessionClosedError(cause))
	for _, st := range streams {
		st.sessionEnding(streamErr)
	}
	s.cutHolder() // a Read reading the conn returns (turn.go)

	if goAway {
		if s.caps.goAway {
			_ = s.w.queueCtrl(header{typ: typeGoAway, length: code}, s.closedCh)
		}
		s.w.close(true, nil)
		t := time.NewTimer(closeFlushTimeout)
		flushed := false
		select {
		case <-s.w.done:
			flushed = true
		case <-t.C:
		}
		t.Stop()
		if flushed && !fromReadLoop {
			s.linger()
		}
	} else {
		s.w.close(false, sessionClosedError(cause))
	}
	_ = s.conn.Close()
	<-s.w.done
	if !fromReadLoop {
		<-s.readDone
	}

	s.stopShrinking()
	for _, st := range streams {
		st.sessionEnded()
		s.releaseStream(st)
	}
	s.mem.close() // what a shrink run or a Read still held in passing
	close(s.ended)
}

// readLoop is the session's reading goroutine.
func (s *Session) readLoop() {
	defer close(s.readDone)
	err := s.readFrames()
	lingering := s.lingering.Load()
	if lingering {
		s.drainAfterClose()
	}
	s.br.release()
	if lingering {
		return // Close's goroutine ends the session (linger.go)
	}
	var gaErr *GoAwayError
	if werr := s.w.failure(); werr != nil && !errors.Is(werr, ErrSessionClosed) &&
		!errors.As(err, &gaErr) && !errors.Is(err, ErrProtocol) {
		// The writer failed first and closed the conn to stop us. What
		// the peer said before its end went away (a go-away with a code,
		// or the frame that broke the protocol) still says more: a peer
		// that sends a go-away and closes the conn can fail a write of
		// ours that was under way (a pong, an ACK) before we read it.
		err = werr
	}
	err = hideEOF(err)
	s.mu.Lock()
	goneAway := s.remoteGoAway
	s.mu.Unlock()
	if goneAway && !errors.As(err, &gaErr) && !errors.Is(err, ErrProtocol) {
		// The peer's normal go-away came first (a peer closing its end
		// sends one, then closes the conn): the error says both.
		err = fmt.Errorf("%w: %w", &GoAwayError{ErrorCode: GoAwayNormal, Remote: true}, err)
	}
	switch {
	case errors.Is(err, ErrProtocol):
		s.logWarn("closing session: peer broke the protocol", err)
		s.shutdown(err, true, GoAwayProtocolError, true)
	case errors.As(err, &gaErr):
		s.shutdown(err, false, 0, true)
	default:
		s.shutdown(err, false, 0, true)
	}
}

func (s *Session) logWarn(msg string, err error) {
	if l := s.cfg.Logger; l != nil {
		l.Warn(msg, "err", err, "remote", s.conn.RemoteAddr())
	}
}

// readFrames decodes frames until the conn fails or the peer breaks the
// protocol. With the conn turn on (turn.go) it holds the turn (locked
// for it by newSession), and lends it at a quiet moment to a Read that
// wants it; it keeps the turn when it returns, so that no taker reads
// after the read loop's end.
func (s *Session) readFrames() error {
	t := &s.turn // held since newSession, if on
	for {
		yield := false
		if t.on && s.br.buffered() == 0 && s.quietForTurn() {
			if t.want.Load() > 0 {
				if err := s.lendTurn(); err != nil {
					return err
				}
				continue
			}
			yield = true
			t.idle.Store(true)
			s.br.yieldCut = yieldWanted
		}
		err := s.readFrame(yield)
		if err == errTurnYield {
			continue
		}
		if err != nil {
			return err
		}
	}
}

// readFrame reads and handles one frame: the read loop's, or a taker's
// (turn.go). yield tells that a cut of the header's read may end it
// (errTurnYield); br.yieldCut is cleared once the header is read.
func (s *Session) readFrame(yield bool) error {
	h, n, err := s.codec.readHeader(s.br)
	if yield {
		s.br.yieldCut = yieldNever
		s.cutter.endIdle(&s.turn.idle, err == nil) // the turn is on: the conn lends
		if err == errTurnYield {
			return err // the header's bytes stay buffered, to be read again
		}
	}
	s.recvBytes.Add(uint64(n))
	if err != nil {
		return err
	}
	s.recvFrames.Add(1)
	if !s.recvActive.Load() {
		s.recvActive.Store(true)
	}
	switch h.typ {
	case typeData, typeWindowUpdate:
		err = s.handleStreamFrame(h)
		if h.flags&(flagFIN|flagRST) != 0 {
			// A stream's end may be its bulk flow's (readbuf.go),
			// marked once its payload is read. The stream's or not:
			// a stream the application closed once it had read what
			// it wanted (a request of known length) leaves the table
			// before the peer's FIN comes, and that FIN ends the
			// flow all the same.
			s.br.flowEnded()
		}
	case typePing:
		s.handlePing(h)
	case typeGoAway:
		err = s.handleGoAway(h)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the conn ended inside the frame's payload
	}
	if err != nil {
		return err
	}
	if s.br.buffered() == 0 {
		s.last = lastStream{} // the next read may wait: see lastStream
	}
	return nil
}

// handleStreamFrame handles a data or window update frame.
func (s *Session) handleStreamFrame(h header) error {
	if h.flags&flagSYN != 0 {
		if err := s.incomingStream(h.streamID); err != nil {
			return err
		}
	}
	st := s.lookupStream(h.streamID)
	if st == nil {
		// A stream we reset, refused or finished: drop what it carries.
		if h.typ == typeData && h.length > 0 {
			if h.length > max(s.cfg.MaxStreamWindow, uint32(s.caps.maxDataFrame)) {
				return &ProtocolError{Reason: "data frame larger than any window", StreamID: h.streamID}
			}
			if err := s.discard(h.length); err != nil {
				return err
			}
			if s.caps.flowControl && h.flags&(flagFIN|flagRST) == 0 {
				// Its sender may still be writing: a stream closed here
				// (Close) before the peer's FIN leaves the table, and
				// nobody reads it any more. Credit the bytes back, as
				// CloseRead does, so that the peer's writes never stall
				// on them. Stateless: one update per frame dropped, 12
				// bytes for up to a window, through the bounded control
				// queue (a peer that floods waits for it).
				return s.queueReply(header{typ: typeWindowUpdate, streamID: h.streamID, length: h.length})
			}
			return nil
		}
		return nil
	}
	if h.flags&flagACK != 0 && st.acked() {
		s.mu.Lock()
		s.unacked--
		s.wakeOpenersLocked()
		s.mu.Unlock()
	}
	if h.typ == typeData && h.length > 0 && h.length <= maxSmallPayload && s.caps.flowControl && s.br.buffered() >= int(h.length) {
		if err := s.receiveBufferedSmall(st, h); err != nil {
			return err
		}
	} else if h.typ == typeData && h.length > 0 {
		switch st.admit(h.length) {
		case admitWindowExceeded:
			return &ProtocolError{Reason: "receive window exceeded", StreamID: h.streamID}
		case admitAfterFIN:
			if !s.caps.flowControl {
				// mplex: go-mplex v0.7.0 sends a Write that raced its
				// CloseWrite after the Close, and drops what comes
				// after a peer's Close itself. Drop it too: no credit
				// to account, and ending the session would fail every
				// other stream for one stream's late bytes.
				return s.discard(h.length)
			}
			return &ProtocolError{Reason: "data after FIN", StreamID: h.streamID}
		case admitOverflow:
			// No flow control (mplex): push back while the reader
			// keeps reading; reset a reader that stopped, and the
			// others go on.
			if !st.awaitRoom(h.length) {
				st.overflow()
				return s.discard(h.length)
			}
		}
		if !s.caps.flowControl && !st.reserveBuffered(h.length) {
			// The memory manager refused what the buffer would hold.
			st.overflow()
			return s.discard(h.length)
		}
		if h.length > maxSmallPayload {
			s.bulk.large(s.recvFrames.Load(), h.streamID)
		}
		if err := s.readPayload(st, h.length); err != nil {
			return err
		}
	} else if h.typ == typeWindowUpdate && h.flags&flagRST == 0 && h.length > 0 {
		if !st.addSendWindow(h.length) {
			return &ProtocolError{Reason: "window update overflows the send window", StreamID: h.streamID}
		}
	}
	if h.flags&flagFIN != 0 {
		st.remoteFIN()
	}
	if h.flags&flagRST != 0 {
		code := uint32(0)
		if h.typ == typeWindowUpdate {
			code = h.length // a window update's RST carries the error code
		}
		st.remoteReset(code)
	}
	return nil
}

// receiveBufferedSmall takes a small data frame's payload for st (under
// flow control) that is in the read buffer already: admitted and buffered
// under one lock of st, the payload copied from the read buffer. (A
// payload still to be read is read only once the header is admitted, so
// that a frame the window can't take is refused on its header.)
func (s *Session) receiveBufferedSmall(st *Stream, h header) error {
	p, err := s.br.Peek(int(h.length))
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the frame was cut in its payload
	}
	if err != nil {
		return err
	}
	a := st.admitSmall(p)
	switch a {
	case admitWindowExceeded:
		return &ProtocolError{Reason: "receive window exceeded", StreamID: h.streamID}
	case admitAfterFIN:
		return &ProtocolError{Reason: "data after FIN", StreamID: h.streamID}
	}
	s.arrived(h.length)
	_, err = s.br.Discard(int(h.length))
	if a == admitForReader {
		s.yieldToReader()
	}
	return err
}

// lookupStream returns the open stream id, nil if there is none. The read
// loop calls it for every stream frame: a frame is most often for the
// stream of the frame before (a stream's turn in the peer's batch brings
// several), and that one is found without the session's lock.
func (s *Session) lookupStream(id uint32) *Stream {
	if st := s.last.get(id, s.removals.Load()); st != nil {
		return st
	}
	s.mu.Lock()
	st := s.streams[id]
	removals := s.removals.Load()
	s.mu.Unlock()
	s.last = lastStream{st: st, removals: removals} // a miss drops a stale entry too
	return st
}

// lastStream is the read loop's cache of one entry of Session.streams:
// valid while no stream was removed since it was looked up (stream ids are
// never reused, so an entry changes only by its removal). It serves the
// frames of one read of the conn: a miss replaces it, and the read loop
// drops it once it has handled every frame it has read, before a read
// that may wait, so that an idle session does not keep its last stream
// (its buffers, its channels) alive after the stream left the table
// (TestClosedStreamsAreCollected). A bulk flow's 64 KiB frame costs one lookup
// under the session's lock; small frames that came in one read share it.
type lastStream struct {
	st       *Stream
	removals uint64 // Session.removals when st was looked up
}

// get returns the cached stream if it is id's and still in the table
// (removals unchanged), else nil.
func (c *lastStream) get(id uint32, removals uint64) *Stream {
	if c.st == nil || c.st.id != id || c.removals != removals {
		return nil
	}
	return c.st
}

// readPayload reads a data frame's n payload bytes for st: into the
// buffer of a Read waiting on st, as much as it takes, when it is lent
// (lend.go); the rest into st's buffer (bufferPayload).
func (s *Session) readPayload(st *Stream, n uint32) error {
	if n > maxSmallPayload && s.cutter != nil { // no lock per frame where nothing lends
		if p := st.borrow(int(n)); p != nil {
			k, err := s.br.readLent(p)
			// Counted before the Read is woken, as bufferPayload counts
			// before st.receive: a caller whose Read returned sees its
			// bytes in Stats.
			s.arrived(uint32(k))
			s.lentBytes.Add(uint64(k))
			st.giveBack(k)
			if err != nil && err != errLendCut {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF // the frame was cut in its payload
				}
				return err
			}
			if n -= uint32(k); n == 0 {
				return nil
			}
		}
	}
	return s.bufferPayload(st, n)
}

// bufferPayload reads n payload bytes into st's buffer: a small payload is
// copied there from the read buffer, a larger one read into pooled
// buffers of its own (one, or two where one would leave much of its size
// class unused: restSplit), which st keeps. When the read buffer holds a large
// part of the payload and nothing after it, that buffer itself goes to st
// (readBuffer.handOff) instead of a copy: the header's read brings up to
// 32 KiB of a bulk frame's payload with it, and over TLS the rest of its
// first record.
func (s *Session) bufferPayload(st *Stream, n uint32) error {
	if n <= maxSmallPayload {
		p, err := s.br.Peek(int(n))
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the frame was cut in its payload
		}
		if err != nil {
			return err
		}
		s.arrived(n)
		reader := st.receiveSmall(p)
		_, err = s.br.Discard(int(n))
		if reader {
			s.yieldToReader()
		}
		return err
	}
	var f frameChunks
	f[0] = s.br.handOff(int(n))
	if left := int(n) - len(f[0].data); left > 0 {
		first, second := restSplit(left)
		for i, size := range [2]int{first, second} {
			if size == 0 {
				break
			}
			p := pool.Get(size)
			f[1+i] = recvChunk{data: p, base: p}
			if err := s.br.readPayload(p); err != nil {
				f.release()
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
	}
	s.arrived(n)
	st.receive(&f)
	return nil
}

// arrived counts n payload bytes read off the conn.
func (s *Session) arrived(n uint32) {
	s.recvBytes.Add(uint64(n))
	if s.caps.flowControl {
		s.path.arrived(n)
	}
}

// discard reads and drops n payload bytes nobody will read.
func (s *Session) discard(n uint32) error {
	m, err := s.br.Discard(int(n))
	s.recvBytes.Add(uint64(m))
	return err
}

// incomingStream registers a stream the peer opens, or refuses it with a
// reset when limits say so (never queueing it without bound). When only
// the accept backlog is full, it first waits for the application to
// accept (awaitAcceptRoom). The memory manager is asked with no lock
// held; only the read loop adds incoming streams, so the limits checked
// before still hold after.
func (s *Session) incomingStream(id uint32) error {
	if !s.isIncoming(id) {
		return &ProtocolError{Reason: "SYN with a stream id of our parity", StreamID: id}
	}
	s.mu.Lock()
	if _, dup := s.streams[id]; dup {
		s.mu.Unlock()
		return &ProtocolError{Reason: "SYN for a stream that is open", StreamID: id}
	}
	refuse := s.closing || s.localGoAway || s.incoming >= s.cfg.MaxIncomingStreams
	full := !refuse && len(s.acceptQ) >= s.cfg.AcceptBacklog
	s.mu.Unlock()
	if full && !s.awaitAcceptRoom() {
		refuse = true
	}
	reserved := 0
	if s.cfg.Memory != nil && !refuse {
		if s.mem.reserve(InitialStreamWindow, streamPriority) != nil {
			refuse = true
		} else {
			reserved = InitialStreamWindow
		}
	}
	if !refuse {
		st := newStream(s, id, InitialStreamWindow, 0, reserved)
		st.needACK = s.caps.acks
		if !s.caps.flowControl {
			st.lastRead = time.Now() // the reader's grace starts with the stream
		}
		s.mu.Lock()
		if !s.closing && !s.localGoAway {
			s.addStreamLocked(st)
			s.incoming++
			s.acceptQ = append(s.acceptQ, st) // room checked above; only this goroutine appends
			if s.acceptWait != nil {
				close(s.acceptWait)
				s.acceptWait = nil
			}
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		s.releaseMemory(reserved)
	}
	return s.queueReply(header{typ: typeWindowUpdate, flags: flagRST, streamID: id})
}

// queueReply queues a control frame the read loop owes the peer: a
// refused stream's RST, the credit of bytes dropped for a stream that is
// gone. Once the session is closing the frame is moot, and a queue that
// takes no more (the writer drained and stopped, or the close ended the
// wait for room) must not end the read loop: it reads on, so that Close's
// linger drains the conn until the peer's end (linger.go). Ending it there
// skipped the linger, and a peer still sending lost the go-away to the
// reset (the interop matrix's braid-go-away-while-peer-sends row, 1 run
// in 24 under -race, once Close took the streams out of the read loop's
// cache). Called by the read loop.
func (s *Session) queueReply(h header) error {
	err := s.w.queueCtrl(h, s.closedCh)
	if err != nil && s.IsClosed() {
		return nil
	}
	return err
}

// awaitAcceptRoom is the accept push-back: the read loop, holding a SYN
// while the accept backlog is full, stops reading the connection (so TCP
// pushes back on the peer) and waits for AcceptStream to take a stream.
// It waits only while the application is accepting: until
// Config.MaxReceiveStall has passed since AcceptStream last took a
// stream (or since the session started), or since this wait began when
// an AcceptStream call is already waiting (it was woken and has not run
// yet). Once that time has passed, every further stream that finds the
// backlog full is refused at once, until the next Accept. It returns true
// when the backlog has room, false when the stream is to be refused (the
// time ran out, or the session is closing or going away). Called by the
// read loop with no lock held; it waits with none.
func (s *Session) awaitAcceptRoom() bool {
	stall := s.cfg.MaxReceiveStall
	start := time.Now()
	t := stallTimer{stalls: &s.stalls}
	defer t.stop()
	s.mu.Lock()
	for {
		if s.closing || s.localGoAway {
			s.mu.Unlock()
			return false
		}
		if len(s.acceptQ) < s.cfg.AcceptBacklog {
			s.mu.Unlock()
			return true
		}
		since := s.lastAccept
		if s.acceptCalls > 0 && since.Before(start) {
			since = start
		}
		left := stall - time.Since(since)
		if left <= 0 {
			s.mu.Unlock()
			return false
		}
		wait := waitChan(&s.acceptRoom)
		s.mu.Unlock()
		t.wait(left, wait, s.closedCh) // closed: the loop's first check refuses
		s.mu.Lock()
	}
}

// forgetPingLocked drops an outstanding ping; the table goes once empty.
// mu held.
func (s *Session) forgetPingLocked(id uint32) {
	delete(s.pings, id)
	if len(s.pings) == 0 {
		s.pings = nil
	}
}

// handlePing answers pings and completes ours.
func (s *Session) handlePing(h header) {
	if h.flags&flagSYN != 0 {
		if isMarker(h.length) {
			s.answerMarker(h.length) // the peer's writer waits for it
			return
		}
		s.queuePong(h.length)
		return
	}
	if h.flags&flagACK == 0 {
		return
	}
	if isMarker(h.length) {
		s.bulk.lastMarkerPong = s.recvFrames.Load()
		s.w.markerAnswered(h.length)
		return
	}
	s.mu.Lock()
	pw, ok := s.pings[h.length]
	s.forgetPingLocked(h.length)
	s.mu.Unlock()
	if !ok {
		return
	}
	now := time.Now()
	rtt := now.Sub(pw.sent)
	s.rtt.Store(int64(rtt))
	// The bytes in flight now stand in for those ahead of the ping when
	// it went: while bulk keeps the path full they are about the same.
	s.path.rttSample(rtt, s.w.ownQueue(), now)
	if pw.done != nil {
		pw.done <- rtt
	}
}

// handleGoAway handles the peer's go-away: a normal one stops new streams,
// any other code ends the session.
func (s *Session) handleGoAway(h header) error {
	if h.length != GoAwayNormal {
		return &GoAwayError{ErrorCode: h.length, Remote: true}
	}
	s.mu.Lock()
	s.remoteGoAway = true
	s.wakeOpenersLocked()
	s.mu.Unlock()
	return nil
}
