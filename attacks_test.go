package braid

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/braidmux/braid/internal/heapstat"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestAttacks is the reviewer-facing list of hostile peers (issue 8): one
// row per attack, played by the raw peer of hostile_test.go writing yamux
// bytes by hand, with the outcome braid promises for it. Every row is also
// checked for memory (HeapAlloc after GC, before and after the attack,
// within the row's bound; what the test itself records is dropped first)
// and for goroutines (goleak, against those alive at the row's start, once
// the session is closed).
//
// Outcomes:
//   - up:      the session stays up: it answers a ping, accepts a new
//     stream of the peer's and reads its data, and opens a stream of its
//     own (or, after the peer's go-away, refuses to with ErrRemoteGoAway).
//   - rst:     braid resets streams (RST frames with the row's code), and
//     the session stays up as above.
//   - goaway:  braid sends a go-away with code 1 (protocol error), closes
//     the connection, and Session.Err matches ErrProtocol and
//     ErrSessionClosed with a *ProtocolError whose reason is the row's.
//   - closed:  the session closes with an error matching the row's, and
//     sends no protocol-error go-away.

// attackOutcome is what braid does about an attack.
type attackOutcome int

const (
	outUp attackOutcome = iota
	outRST
	outGoAway
	outClosed
)

// attackRow is one attack and its expected outcome.
type attackRow struct {
	name    string
	outcome attackOutcome
	reason  string // outGoAway: the *ProtocolError's reason contains it
	err     error  // outClosed: Session.Err matches it
	rstCode uint32 // outRST: the code of the RSTs
	rsts    int    // outRST: at least this many RSTs with rstCode
	noOpen  bool   // outUp: the peer sent a go-away, OpenStream must fail
	heap    int64  // bound on HeapAlloc growth, bytes

	cfg         func(*Config)
	pipe        bool // net.Pipe (no buffering) instead of loopback TCP
	quiet       bool // the peer doesn't read (until the attack starts it)
	braidClient bool
	attack      func(t *testing.T, p *rawPeer, s *Session)
}

func (r attackRow) describe() string {
	switch r.outcome {
	case outUp:
		if r.noOpen {
			return "stays up (OpenStream: ErrRemoteGoAway)"
		}
		return "stays up"
	case outRST:
		return fmt.Sprintf("stream reset (>=%d RST code %d), stays up", r.rsts, r.rstCode)
	case outGoAway:
		return fmt.Sprintf("go-away 1, ErrProtocol %q", r.reason)
	default:
		return fmt.Sprintf("closed: %v", r.err)
	}
}

const (
	kib = 1024
	mib = 1024 * kib
)

func TestAttacks(t *testing.T) {
	// keepAlive is the fast keep-alive of the rows that need one.
	keepAlive := func(c *Config) {
		c.DisableKeepAlive = false
		c.KeepAliveInterval = 100 * time.Millisecond
		c.ConnectionWriteTimeout = 200 * time.Millisecond
	}
	rows := []attackRow{
		{
			name: "stream flood past MaxIncomingStreams", outcome: outRST, rsts: 40, heap: 1 * mib,
			cfg: func(c *Config) { c.MaxIncomingStreams = 10 },
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				for i := uint32(0); i < 50; i++ {
					p.send(syn(2*i+1), nil)
				}
				p.await("RSTs of refused streams", 40, isRST)
				p.ping(1)
				require.Equal(t, 40, p.count(isRST))
				require.Equal(t, 10, s.NumStreams())
				require.Equal(t, 10, drainBacklog(t, s))
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "stream flood past AcceptBacklog, nobody accepts", outcome: outRST, rsts: 492, heap: 1 * mib,
			cfg: func(c *Config) { c.AcceptBacklog = 8 },
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				var b []byte
				for i := uint32(0); i < 500; i++ {
					b = syn(2*i + 1).appendTo(b)
				}
				p.sendRaw(b)
				p.await("RSTs of refused streams", 492, isRST)
				p.ping(1)
				require.Equal(t, 492, p.count(isRST))
				require.Equal(t, 8, s.NumStreams())
				require.Equal(t, 8, drainBacklog(t, s))
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "SYN for an existing id", outcome: outGoAway, reason: "SYN for a stream that is open", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				p.send(syn(1), nil)
			},
		},
		{
			name: "data after FIN", outcome: outGoAway, reason: "data after FIN", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(header{typ: typeWindowUpdate, flags: flagSYN | flagFIN, streamID: 1}, nil)
				p.send(header{typ: typeData, streamID: 1, length: 1}, []byte{1})
			},
		},
		{
			name: "data after the peer's own RST (dropped)", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				p.send(header{typ: typeData, streamID: 1, length: 3}, []byte("abc"))
				st := acceptID(t, s, 1)
				p.send(header{typ: typeWindowUpdate, flags: flagRST, streamID: 1, length: 9}, nil)
				p.send(data(1, 0, 64*kib))
				p.send(data(1, flagFIN, 100))
				p.ping(1)
				_, err := st.Read(make([]byte, 10))
				require.ErrorIs(t, err, &StreamError{ErrorCode: 9, Remote: true})
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "data after braid's RST (in flight, dropped)", outcome: outRST, rsts: 1, rstCode: 7, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				st := acceptID(t, s, 1)
				require.NoError(t, st.ResetWithError(7))
				p.await("RST code 7", 1, isRSTWith(1, 7))
				p.send(data(1, 0, InitialStreamWindow)) // a whole window, crossing the RST
				p.send(header{typ: typeWindowUpdate, streamID: 1, length: 1 << 20}, nil)
				p.ping(1)
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "window overflow (data beyond the window)", outcome: outGoAway, reason: "receive window exceeded", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				p.send(data(1, 0, InitialStreamWindow-10))
				p.send(data(1, 0, 11)) // the window is 10 short
			},
		},
		{
			name: "window update wrapping uint32", outcome: outGoAway, reason: "overflows the send window", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				p.send(header{typ: typeWindowUpdate, streamID: 1, length: math.MaxUint32}, nil)
			},
		},
		{
			name: "ping flood 1e5, peer not reading (<=64 pongs queued)", outcome: outUp, heap: 1 * mib,
			pipe: true, quiet: true,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				const pings = 100_000
				flood := make([]byte, 0, pings*headerSize)
				for i := uint32(1); i <= pings; i++ {
					flood = header{typ: typePing, flags: flagSYN, length: i}.appendTo(flood)
				}
				p.sendRaw(flood) // net.Pipe: returns once braid has read it all
				require.Eventually(t, func() bool { return s.Stats().FramesReceived == pings },
					5*time.Second, time.Millisecond, "braid stopped reading during the flood")
				s.w.mu.Lock()
				queued, pongs := len(s.w.ctrl), s.w.pongs
				s.w.mu.Unlock()
				require.LessOrEqual(t, pongs, maxQueuedPongs)
				require.LessOrEqual(t, queued, maxQueuedCtrlBytes)
				p.startReading()
				id := uint32(pings)
				fresh := func(f rawFrame) bool { return f.typ == typePing && f.flags == flagACK && f.length > pings }
				require.Eventually(t, func() bool {
					id++
					p.send(header{typ: typePing, flags: flagSYN, length: id}, nil)
					time.Sleep(10 * time.Millisecond)
					return p.count(fresh) > 0
				}, 5*time.Second, time.Millisecond, "no fresh ping answered after the flood")
				pongCount := p.count(func(f rawFrame) bool { return f.typ == typePing && f.flags == flagACK })
				require.LessOrEqual(t, pongCount, maxFloodPongs()+int(id-pings), "pongs queued without bound")
			},
		},
		{
			name: "go-away flood (5000 normal go-aways)", outcome: outUp, noOpen: true, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				var b []byte
				for range 5000 {
					b = header{typ: typeGoAway, length: GoAwayNormal}.appendTo(b)
				}
				p.sendRaw(b)
				p.ping(1)
			},
		},
		{
			name: "1e5 zero-length data frames on an open stream", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				st := acceptID(t, s, 1)
				var b []byte
				for range 100_000 {
					b = header{typ: typeData, streamID: 1}.appendTo(b)
				}
				p.sendRaw(b)
				p.send(header{typ: typeData, streamID: 1, length: 5}, []byte("after"))
				p.ping(1)
				buf := make([]byte, 5)
				_, err := io.ReadFull(st, buf)
				require.NoError(t, err)
				require.Equal(t, "after", string(buf))
				require.GreaterOrEqual(t, s.Stats().FramesReceived, uint64(100_000))
			},
		},
		{
			name: "slowloris: 1 byte / 50 ms holding 3 streams", outcome: outClosed, err: ErrKeepAliveTimeout, heap: 512 * kib,
			cfg: keepAlive,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				var held []*Stream
				for id := uint32(1); id <= 5; id += 2 {
					p.send(syn(id), nil)
					held = append(held, acceptID(t, s, id))
				}
				// A data frame, trickled: no whole frame for 600 ms.
				frame := append(header{typ: typeData, streamID: 1, length: 100}.appendTo(nil), make([]byte, 100)...)
				start := time.Now()
				for _, c := range frame {
					if s.IsClosed() || time.Since(start) > 5*time.Second {
						break
					}
					_, _ = p.conn.Write([]byte{c})
					time.Sleep(50 * time.Millisecond)
				}
				require.True(t, s.IsClosed(), "slowloris peer kept the session")
				elapsed := time.Since(start)
				t.Logf("slowloris closed after %v", elapsed)
				require.GreaterOrEqual(t, elapsed, 100*time.Millisecond)
				require.Positive(t, p.count(func(f rawFrame) bool { return f.typ == typePing && f.flags == flagSYN }),
					"braid sent no keep-alive ping")
				for _, st := range held {
					_, err := st.Read(make([]byte, 1))
					require.ErrorIs(t, err, ErrKeepAliveTimeout)
					require.ErrorIs(t, err, ErrStreamReset)
				}
			},
		},
		{
			name: "peer never reads (braid's writes stall)", outcome: outClosed, err: ErrConnectionWriteTimeout, heap: 512 * kib,
			pipe: true, quiet: true,
			cfg: func(c *Config) { c.ConnectionWriteTimeout = 200 * time.Millisecond },
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				start := time.Now()
				// Writes to braid go on (it reads); its replies can't.
				_, _ = p.conn.Write(syn(1).appendTo(nil))
				for i := uint32(1); i <= 10; i++ {
					_, _ = p.conn.Write(header{typ: typePing, flags: flagSYN, length: i}.appendTo(nil))
				}
				st := acceptID(t, s, 1)
				wrote := make(chan error, 1)
				go func() { _, err := st.Write(make([]byte, 1000)); wrote <- err }()
				_, err := st.Read(make([]byte, 1))
				require.ErrorIs(t, err, ErrConnectionWriteTimeout)
				// The stalled write (the RTT ping) began when the session
				// started, a moment before start.
				require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "closed before the conn stalled for the timeout")
				// A small Write may have been queued (copied) before the
				// end; it returns either way, and later ones fail.
				_ = errWithin(t, wrote, "Write on a stalled session")
				_, err = st.Write([]byte("x"))
				require.ErrorIs(t, err, ErrStreamReset)
				require.ErrorIs(t, err, ErrConnectionWriteTimeout)
			},
		},
		{
			name: "wrong version", outcome: outGoAway, reason: "unsupported yamux version 1", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(1, 0, 0, 1, 0)) },
		},
		{
			name: "unknown type", outcome: outGoAway, reason: "unknown frame type(9)", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(0, 9, 0, 1, 0)) },
		},
		{
			name: "wrong-parity SYN", outcome: outGoAway, reason: "parity", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.send(syn(2), nil) },
		},
		{
			name: "data frame > MaxStreamWindow for an unknown stream", outcome: outGoAway,
			reason: "data frame larger than any window", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				// Only the header: the 16 MiB payload must not be awaited.
				p.send(header{typ: typeData, streamID: 99, length: DefaultMaxStreamWindow + 1}, nil)
			},
		},
		{
			name: "1 MiB data frame for an unknown stream (discarded)", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(data(99, 0, 1*mib))
				p.ping(1)
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "RST for an unknown stream (ignored)", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(header{typ: typeWindowUpdate, flags: flagRST, streamID: 99, length: 5}, nil)
				p.send(header{typ: typeData, flags: flagRST, streamID: 101}, nil)
				p.ping(1)
				require.Zero(t, p.count(func(f rawFrame) bool { return f.streamID == 99 || f.streamID == 101 }))
			},
		},
		{
			name: "window update for an unknown stream (ignored)", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(header{typ: typeWindowUpdate, streamID: 99, length: math.MaxUint32}, nil)
				p.send(header{typ: typeWindowUpdate, streamID: 98, length: 1000}, nil)
				p.ping(1)
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "FIN twice", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				p.send(header{typ: typeData, flags: flagFIN, streamID: 1, length: 2}, []byte("hi"))
				p.send(header{typ: typeWindowUpdate, flags: flagFIN, streamID: 1}, nil)
				p.send(header{typ: typeData, flags: flagFIN, streamID: 1}, nil)
				st := acceptID(t, s, 1)
				b, err := io.ReadAll(st)
				require.NoError(t, err)
				require.Equal(t, "hi", string(b))
				_, err = st.Write([]byte("reply")) // our half is still open
				require.NoError(t, err)
				require.NoError(t, st.Close())
				p.await("braid's FIN", 1, func(f rawFrame) bool { return f.streamID == 1 && f.flags&flagFIN != 0 })
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "SYN+RST in one frame", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(header{typ: typeWindowUpdate, flags: flagSYN | flagRST, streamID: 1, length: 3}, nil)
				p.ping(1)
				require.Zero(t, s.NumStreams())
				// The backlog hands out the dead stream, reset.
				st := acceptID(t, s, 1)
				_, err := st.Read(make([]byte, 1))
				require.ErrorIs(t, err, &StreamError{ErrorCode: 3, Remote: true})
			},
		},
		{
			name: "ACK for a stream never opened, and a duplicate ACK", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(header{typ: typeWindowUpdate, flags: flagACK, streamID: 2}, nil) // ours, not opened yet
				p.send(header{typ: typeData, flags: flagACK, streamID: 7}, nil)         // theirs, never opened
				p.ping(1)
				st, err := s.OpenStream(context.Background())
				require.NoError(t, err)
				require.Equal(t, uint32(2), st.ID())
				ack := header{typ: typeWindowUpdate, flags: flagACK, streamID: 2}
				p.send(ack, nil)
				p.send(ack, nil)
				p.send(ack, nil)
				p.ping(2)
				s.mu.Lock()
				unacked := s.unacked
				s.mu.Unlock()
				require.Zero(t, unacked, "the ACK backlog count")
				require.Equal(t, 1, s.NumStreams())
			},
		},
		{
			name: "data on stream 0", outcome: outGoAway, reason: "on stream 0", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(0, 0, 0, 0, 4)) },
		},
		{
			name: "ping with a stream id", outcome: outGoAway, reason: "with a stream id", heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(0, 2, 1, 5, 1)) },
		},
		{
			name: "truncated frame then silence", outcome: outClosed, err: ErrKeepAliveTimeout, heap: 512 * kib,
			cfg: keepAlive,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.sendRaw(header{typ: typeData, streamID: 1, length: 10}.appendTo(nil)[:5])
				require.Eventually(t, s.IsClosed, 5*time.Second, time.Millisecond, "keep-alive did not close")
				require.Positive(t, p.count(func(f rawFrame) bool { return f.typ == typePing && f.flags == flagSYN }),
					"braid sent no keep-alive ping")
			},
		},
		{
			name: "very large ping ids, unsolicited pongs", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.ping(math.MaxUint32)
				p.ping(1 << 31)
				p.ping(0)
				p.send(header{typ: typePing, flags: flagACK, length: math.MaxUint32}, nil) // a pong nobody asked for
				p.send(header{typ: typePing, length: math.MaxUint32 - 1}, nil)             // neither SYN nor ACK
				p.ping(7)
				require.Equal(t, 1, p.count(func(f rawFrame) bool { return f.typ == typePing && f.flags == flagACK && f.length == math.MaxUint32 }),
					"pong answered twice, or the unsolicited one echoed")
			},
		},
		{
			name: "1000 streams opened and reset at once by the peer", outcome: outRST, rsts: 1000 - DefaultAcceptBacklog, heap: 1 * mib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				var b []byte
				for i := uint32(0); i < 1000; i++ {
					b = syn(2*i + 1).appendTo(b)
					b = header{typ: typeWindowUpdate, flags: flagRST, streamID: 2*i + 1}.appendTo(b)
				}
				p.sendRaw(b)
				p.ping(1)
				require.Zero(t, s.NumStreams(), "reset streams left in the table")
				// The dead ones fill the backlog until accepted; the rest are refused.
				require.Equal(t, 1000-DefaultAcceptBacklog, p.count(isRST))
				require.Equal(t, DefaultAcceptBacklog, drainBacklog(t, s))
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "peer resets braid's stream with a code", outcome: outUp, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				st, err := s.OpenStream(context.Background())
				require.NoError(t, err)
				p.await("SYN", 1, func(f rawFrame) bool { return f.streamID == st.ID() && f.flags&flagSYN != 0 })
				p.send(header{typ: typeWindowUpdate, flags: flagACK | flagRST, streamID: st.ID(), length: 42}, nil)
				_, err = st.Read(make([]byte, 1))
				require.ErrorIs(t, err, &StreamError{ErrorCode: 42, Remote: true})
				_, err = st.Write([]byte("x"))
				require.ErrorIs(t, err, ErrStreamReset)
				// The Read wakes as the read loop marks the stream
				// reset, before the read loop takes it out of the
				// table; the ping's pong comes after that.
				p.ping(2)
				require.Zero(t, s.NumStreams())
			},
		},
		{
			name: "go-away with an error code", outcome: outClosed, err: &GoAwayError{ErrorCode: GoAwayInternalError, Remote: true}, heap: 512 * kib,
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				st := acceptID(t, s, 1)
				p.send(header{typ: typeGoAway, length: GoAwayInternalError}, nil)
				_, err := st.Read(make([]byte, 1))
				require.ErrorIs(t, err, ErrStreamReset)
				require.ErrorIs(t, err, &GoAwayError{ErrorCode: GoAwayInternalError, Remote: true})
			},
		},
	}

	var report []string
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			growth := runAttack(t, r)
			report = append(report, fmt.Sprintf("%-55s | %-58s | %7.1f KiB | %5d KiB",
				r.name, r.describe(), float64(growth)/kib, r.heap/kib))
		})
	}
	t.Logf("attack | outcome | heap growth | bound\n%s", strings.Join(report, "\n"))
}

// runAttack plays one row and returns the heap growth it measured.
func runAttack(t *testing.T, r attackRow) int64 {
	ignore := goleak.IgnoreCurrent()
	cfg := DefaultConfig()
	cfg.DisableKeepAlive = true
	if r.cfg != nil {
		r.cfg(cfg)
	}
	var c1, c2 net.Conn
	if r.pipe {
		c1, c2 = net.Pipe()
	} else {
		c1, c2 = tcpPair(t)
	}
	p, s := newRawPeerOver(t, c1, c2, cfg, r.braidClient)
	if !r.quiet {
		p.startReading()
		p.ping(0xABCD) // the session is up before the attack
	}
	before := heapstat.Live()

	r.attack(t, p, s)

	switch r.outcome {
	case outUp:
		requireAlive(t, p, s, r.noOpen)
	case outRST:
		p.await(fmt.Sprintf("RST code %d", r.rstCode), r.rsts, func(f rawFrame) bool { return isRST(f) && f.length == r.rstCode })
		requireAlive(t, p, s, r.noOpen)
	case outGoAway:
		requireProtocolClose(t, p, s, r.reason)
	case outClosed:
		require.Eventually(t, s.IsClosed, 5*time.Second, time.Millisecond, "session still open")
		require.ErrorIs(t, s.Err(), r.err)
		require.ErrorIs(t, s.Err(), ErrSessionClosed)
		require.NotErrorIs(t, s.Err(), ErrProtocol)
		if p.done != nil {
			p.awaitEOF()
			require.Zero(t, p.count(isGoAway(GoAwayProtocolError)), "protocol-error go-away")
		}
		_, err := s.OpenStream(context.Background())
		require.ErrorIs(t, err, ErrSessionClosed)
	}

	p.forget()
	growth := int64(heapstat.Live()) - int64(before)
	t.Logf("outcome %s; heap growth %d B (bound %d B)", r.describe(), growth, r.heap)

	// Close returns promptly whatever state the attack left, and leaves
	// no goroutine behind.
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	_ = p.conn.Close()
	if p.done != nil {
		<-p.done
	}
	goleak.VerifyNone(t, ignore)
	require.LessOrEqual(t, growth, r.heap, "heap growth")
	return growth
}

// forget drops the frames the raw peer recorded so far, so that the heap
// measurement counts braid's memory, not the test's record.
func (p *rawPeer) forget() {
	p.mu.Lock()
	p.frames = nil
	p.mu.Unlock()
}

func isRSTWith(id, code uint32) func(rawFrame) bool {
	return func(f rawFrame) bool { return isRST(f) && f.streamID == id && f.length == code }
}

// acceptID accepts streams until the one with id, within 5 s; it resets
// any other it accepts on the way.
func acceptID(t *testing.T, s *Session, id uint32) *Stream {
	t.Helper()
	type res struct {
		st  *Stream
		err error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			st, err := s.AcceptStream()
			if err != nil || st.ID() == id {
				ch <- res{st, err}
				return
			}
			_ = st.Reset()
		}
	}()
	select {
	case r := <-ch:
		require.NoError(t, r.err, "accepting stream %d", id)
		return r.st
	case <-time.After(5 * time.Second):
		t.Fatalf("stream %d not accepted within 5 s", id)
		return nil
	}
}

// drainBacklog accepts and resets every stream waiting in the accept
// backlog, and returns how many there were.
func drainBacklog(t *testing.T, s *Session) int {
	t.Helper()
	s.mu.Lock()
	n := len(s.acceptQ)
	s.mu.Unlock()
	for range n {
		st, err := s.AcceptStream()
		require.NoError(t, err)
		require.NoError(t, st.Reset())
	}
	return n
}

// requireAlive proves the session survived: it answers a ping, accepts a
// new stream of the peer's and reads its data, and opens one of its own
// (or, when the peer sent a go-away, refuses to with ErrRemoteGoAway).
func requireAlive(t *testing.T, p *rawPeer, s *Session, peerWentAway bool) {
	t.Helper()
	require.False(t, s.IsClosed(), "session closed: %v", s.Err())
	p.ping(0xA11FE)
	id := uint32(1<<20 + 1)
	if s.client {
		id++
	}
	p.send(syn(id), nil)
	p.send(header{typ: typeData, streamID: id, length: 2}, []byte("ok"))
	st := acceptID(t, s, id)
	b := make([]byte, 2)
	_, err := io.ReadFull(st, b)
	require.NoError(t, err)
	require.Equal(t, "ok", string(b))
	require.NoError(t, st.Reset())
	if peerWentAway {
		_, err := s.OpenStream(context.Background())
		require.ErrorIs(t, err, ErrRemoteGoAway)
	} else {
		requireUsable(t, p, s)
	}
	require.False(t, s.IsClosed(), "session closed: %v", s.Err())
}
