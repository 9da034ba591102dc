package braid

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// Hostile-peer tests: the test plays a raw yamux peer, writing bytes by
// hand on one end of a TCP connection, with a braid session on the other.

// rawFrame is one frame the raw peer read from braid.
type rawFrame struct {
	header
	payload []byte
}

// rawPeer writes raw yamux bytes to a braid session and records every
// frame braid sends back (once reading starts).
type rawPeer struct {
	t    testing.TB
	conn net.Conn

	mu      sync.Mutex
	frames  []rawFrame
	readErr error         // why the reader stopped
	done    chan struct{} // closed when the reader stops; nil until started
}

// newRawPeer connects a raw peer to a new braid session (a Client when
// braidClient, else a Server) over loopback TCP.
func newRawPeer(t testing.TB, cfg *Config, braidClient bool) (*rawPeer, *Session) {
	t.Helper()
	c1, c2 := tcpPair(t)
	return newRawPeerOver(t, c1, c2, cfg, braidClient)
}

// newRawPeerOver is newRawPeer over a given conn pair: the raw peer gets
// c1, braid c2.
func newRawPeerOver(t testing.TB, c1, c2 net.Conn, cfg *Config, braidClient bool) (*rawPeer, *Session) {
	t.Helper()
	newSess := Server
	if braidClient {
		newSess = Client
	}
	s, err := newSess(c2, cfg)
	require.NoError(t, err)
	p := &rawPeer{t: t, conn: c1}
	t.Cleanup(func() {
		_ = s.Close()
		_ = c1.Close()
		if p.done != nil {
			<-p.done
		}
	})
	return p, s
}

// startReading starts recording braid's frames.
func (p *rawPeer) startReading() {
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		var hb [headerSize]byte
		for {
			_, err := io.ReadFull(p.conn, hb[:])
			var h header
			if err == nil {
				h, err = decodeHeader(hb[:]) // braid must only send valid headers
			}
			var payload []byte
			if err == nil && h.typ == typeData {
				payload = make([]byte, h.length)
				_, err = io.ReadFull(p.conn, payload)
			}
			p.mu.Lock()
			if err != nil {
				p.readErr = err
				p.mu.Unlock()
				return
			}
			p.frames = append(p.frames, rawFrame{h, payload})
			p.mu.Unlock()
		}
	}()
}

// send writes frames (header and payload) to braid.
func (p *rawPeer) send(h header, payload []byte) {
	p.t.Helper()
	b := h.appendTo(nil)
	_, err := p.conn.Write(append(b, payload...))
	require.NoError(p.t, err)
}

// sendRaw writes arbitrary bytes.
func (p *rawPeer) sendRaw(b []byte) {
	p.t.Helper()
	_, err := p.conn.Write(b)
	require.NoError(p.t, err)
}

// count returns how many recorded frames match.
func (p *rawPeer) count(match func(rawFrame) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, f := range p.frames {
		if match(f) {
			n++
		}
	}
	return n
}

// await waits up to 5 s until n recorded frames match.
func (p *rawPeer) await(what string, n int, match func(rawFrame) bool) {
	p.t.Helper()
	require.Eventually(p.t, func() bool { return p.count(match) >= n },
		5*time.Second, 2*time.Millisecond, "waiting for %d × %s", n, what)
}

// ping sends a ping and waits for braid's pong: the read loop is alive.
func (p *rawPeer) ping(id uint32) {
	p.t.Helper()
	p.send(header{typ: typePing, flags: flagSYN, length: id}, nil)
	p.await("pong", 1, func(f rawFrame) bool {
		return f.typ == typePing && f.flags == flagACK && f.length == id
	})
}

// awaitEOF waits up to 5 s for braid to close the connection.
func (p *rawPeer) awaitEOF() {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.t.Fatal("braid did not close the connection")
	}
}

func isGoAway(code uint32) func(rawFrame) bool {
	return func(f rawFrame) bool { return f.typ == typeGoAway && f.length == code }
}

func isRST(f rawFrame) bool { return f.typ == typeWindowUpdate && f.flags&flagRST != 0 }

// rawHeader encodes a header with an arbitrary type byte, which header
// values can't carry past decodeHeader's checks.
func rawHeader(version, typ byte, flags uint16, id, length uint32) []byte {
	b := make([]byte, headerSize)
	b[0], b[1] = version, typ
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint32(b[4:], id)
	binary.BigEndian.PutUint32(b[8:], length)
	return b
}

// requireUsable proves the session survived: it is open, answers pings and
// can still open a stream (braid's SYN reaches the peer).
func requireUsable(t *testing.T, p *rawPeer, s *Session) {
	t.Helper()
	require.False(t, s.IsClosed(), "session closed: %v", s.Err())
	p.ping(0xC0FFEE)
	st, err := s.OpenStream(context.Background())
	require.NoError(t, err)
	p.await("SYN of braid's stream", 1, func(f rawFrame) bool {
		return f.streamID == st.ID() && f.flags&flagSYN != 0
	})
	require.False(t, s.IsClosed(), "session closed: %v", s.Err())
}

// requireProtocolClose proves braid closed the session with a
// *ProtocolError whose reason contains reason, told the peer with a
// go-away "protocol error" and closed the connection.
func requireProtocolClose(t *testing.T, p *rawPeer, s *Session, reason string) {
	t.Helper()
	p.awaitEOF()
	require.Eventually(t, s.IsClosed, 5*time.Second, 2*time.Millisecond)
	err := s.Err()
	require.ErrorIs(t, err, ErrProtocol)
	require.ErrorIs(t, err, ErrSessionClosed)
	var pe *ProtocolError
	require.ErrorAs(t, err, &pe)
	require.Contains(t, pe.Reason, reason)
	require.Equal(t, 1, p.count(isGoAway(GoAwayProtocolError)), "go-away protocol error frames")
	require.Zero(t, p.count(isGoAway(GoAwayNormal)), "normal go-away")
	_, err = s.OpenStream(context.Background())
	require.ErrorIs(t, err, ErrSessionClosed)
}

// The raw peer is the client (odd stream ids) unless a case says braid is.
func syn(id uint32) header { return header{typ: typeWindowUpdate, flags: flagSYN, streamID: id} }

func data(id uint32, flags frameFlags, n int) (header, []byte) {
	return header{typ: typeData, flags: flags, streamID: id, length: uint32(n)}, make([]byte, n)
}

// TestHostilePeer plays one misbehaving peer per case. Cases with a reason
// expect braid to close the session with that protocol error (and a
// go-away code 1); the others expect the session to stay usable.
func TestHostilePeer(t *testing.T) {
	cases := []struct {
		name        string
		braidClient bool
		cfg         func(*Config)
		attack      func(t *testing.T, p *rawPeer, s *Session)
		reason      string // "" = session stays usable
	}{
		{
			name:   "wrong version",
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(1, 2, 1, 0, 1)) },
			reason: "unsupported yamux version 1",
		},
		{
			name:   "unknown type",
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(0, 4, 0, 1, 0)) },
			reason: "unknown frame",
		},
		{
			name:   "data on stream 0",
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(0, 0, 0, 0, 0)) },
			reason: "on stream 0",
		},
		{
			name:   "window update on stream 0",
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(0, 1, 0, 0, 10)) },
			reason: "on stream 0",
		},
		{
			name:   "ping with a stream id",
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(0, 2, 1, 3, 1)) },
			reason: "with a stream id",
		},
		{
			name:   "go-away with a stream id",
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.sendRaw(rawHeader(0, 3, 0, 3, 0)) },
			reason: "with a stream id",
		},
		{
			name:   "SYN with the server's parity",
			attack: func(t *testing.T, p *rawPeer, s *Session) { p.send(syn(2), nil) },
			reason: "parity",
		},
		{
			name:        "SYN with the client's parity to a braid client",
			braidClient: true,
			attack:      func(t *testing.T, p *rawPeer, s *Session) { p.send(syn(1), nil) },
			reason:      "parity",
		},
		{
			name: "duplicate SYN",
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				p.send(syn(1), nil)
			},
			reason: "SYN for a stream that is open",
		},
		{
			name: "one data frame larger than the window",
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				// Only the header: braid must judge it before the payload.
				p.send(header{typ: typeData, streamID: 1, length: InitialStreamWindow + 1}, nil)
			},
			reason: "receive window exceeded",
		},
		{
			name: "window exceeded across frames",
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				// Exactly the window is allowed (nobody reads the stream)...
				for i := 0; i < 4; i++ {
					p.send(data(1, 0, InitialStreamWindow/4))
				}
				p.ping(1)
				require.False(t, s.IsClosed(), "closed at exactly the window: %v", s.Err())
				// ...one byte more is not.
				p.send(header{typ: typeData, streamID: 1, length: 1}, nil)
			},
			reason: "receive window exceeded",
		},
		{
			name: "window update overflowing the send window",
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(syn(1), nil)
				p.send(header{typ: typeWindowUpdate, streamID: 1, length: 1 << 31}, nil)
				p.ping(1) // 2^31 + 256 KiB still fits in 32 bits
				// This one would wrap the window (go-yamux wraps silently).
				p.send(header{typ: typeWindowUpdate, streamID: 1, length: 1 << 31}, nil)
			},
			reason: "overflows the send window",
		},
		{
			name: "data after FIN",
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(header{typ: typeWindowUpdate, flags: flagSYN | flagFIN, streamID: 1}, nil)
				p.send(header{typ: typeData, streamID: 1, length: 1}, nil)
			},
			reason: "data after FIN",
		},
		{
			name: "data for unknown and reset streams is dropped",
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.send(data(99, 0, 1000)) // never opened
				p.send(syn(1), nil)
				st, err := s.AcceptStream()
				require.NoError(t, err)
				require.NoError(t, st.Reset())
				p.await("RST of stream 1", 1, func(f rawFrame) bool { return isRST(f) && f.streamID == 1 })
				p.send(data(1, 0, InitialStreamWindow)) // in flight when the RST crossed
				p.send(header{typ: typeWindowUpdate, streamID: 1, length: 1000}, nil)
				// A new stream after all that carries its data intact.
				p.send(syn(3), nil)
				p.send(header{typ: typeData, streamID: 3, length: 5}, []byte("hello"))
				st3, err := s.AcceptStream()
				require.NoError(t, err)
				buf := make([]byte, 5)
				_, err = io.ReadFull(st3, buf)
				require.NoError(t, err)
				require.Equal(t, "hello", string(buf))
			},
		},
		{
			name: "stream flood past MaxIncomingStreams",
			cfg:  func(c *Config) { c.MaxIncomingStreams = 10 },
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				const n = 50
				accepted := make(chan *Stream, n)
				go func() {
					for {
						st, err := s.AcceptStream()
						if err != nil {
							return
						}
						accepted <- st
					}
				}()
				for i := uint32(0); i < n; i++ {
					p.send(syn(2*i+1), nil)
				}
				p.await("RSTs of refused streams", n-10, isRST)
				p.ping(1)
				require.Equal(t, n-10, p.count(isRST))
				require.LessOrEqual(t, s.NumStreams(), 10)
				require.Eventually(t, func() bool { return len(accepted) == 10 }, 5*time.Second, 2*time.Millisecond)
			},
		},
		{
			name: "stream flood past AcceptBacklog, nobody accepts",
			cfg:  func(c *Config) { c.AcceptBacklog = 8 },
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				const n = 500
				for i := uint32(0); i < n; i++ {
					p.send(syn(2*i+1), nil)
				}
				p.await("RSTs of refused streams", n-8, isRST)
				p.ping(1)
				require.Equal(t, n-8, p.count(isRST))
				require.Equal(t, 8, s.NumStreams())
				// The backlog drains: accepting makes room again.
				st, err := s.AcceptStream()
				require.NoError(t, err)
				require.Equal(t, uint32(1), st.ID())
				p.send(syn(2*n+1), nil)
				p.ping(2)
				require.Equal(t, n-8, p.count(isRST), "a stream was refused with room in the backlog")
			},
		},
		{
			name: "truncated header then EOF",
			attack: func(t *testing.T, p *rawPeer, s *Session) {
				p.sendRaw([]byte{0, 2, 0, 1, 0})
				require.NoError(t, p.conn.(*net.TCPConn).CloseWrite())
				p.awaitEOF()
				require.Eventually(t, s.IsClosed, 5*time.Second, 2*time.Millisecond)
				require.ErrorIs(t, s.Err(), io.ErrUnexpectedEOF)
				require.ErrorIs(t, s.Err(), ErrSessionClosed)
				require.NotErrorIs(t, s.Err(), ErrProtocol)
			},
			reason: "-", // closes, but not with a protocol error
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DisableKeepAlive = true
			if tc.cfg != nil {
				tc.cfg(cfg)
			}
			p, s := newRawPeer(t, cfg, tc.braidClient)
			p.startReading()
			p.ping(0xABCD) // the session is up before the attack
			tc.attack(t, p, s)
			switch tc.reason {
			case "":
				requireUsable(t, p, s)
			case "-":
			default:
				requireProtocolClose(t, p, s, tc.reason)
			}
			// Close returns promptly whatever state the attack left.
			closed := make(chan struct{})
			go func() { _ = s.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not return")
			}
		})
	}
}

// TestHostilePingFlood proves that a peer sending 10^5 pings while not
// reading can't make braid queue pongs without bound or deadlock it: the
// read loop keeps reading (it never blocks on pongs), the pong queue stays
// within its bound, and once the peer reads again the session answers a
// fresh ping. net.Pipe has no buffer, so braid's writer blocks on its
// first write until the peer reads, and that write comes once a whole TLS
// record's worth of pongs is buffered (maxFloodPongs: without writev the
// writer keeps a batch's partial record for the next); the pongs answered
// are bounded by that whatever the scheduling. Before this bound the test
// counted two batches only, and failed about once in fifteen runs when
// the writer took several batches before its first write.
func TestHostilePingFlood(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DisableKeepAlive = true
	c1, c2 := net.Pipe()
	p, s := newRawPeerOver(t, c1, c2, cfg, false)

	const pings = 100_000
	var flood []byte
	for i := uint32(1); i <= pings; i++ {
		flood = header{typ: typePing, flags: flagSYN, length: i}.appendTo(flood)
	}
	// net.Pipe's Write returns once braid has read every byte into its
	// buffer; the read loop handles the last frames right after.
	p.sendRaw(flood)
	require.Eventually(t, func() bool { return s.Stats().FramesReceived == pings },
		5*time.Second, 2*time.Millisecond, "braid stopped reading during the flood")
	s.w.mu.Lock()
	queued, pongs := len(s.w.ctrl), s.w.pongs
	s.w.mu.Unlock()
	require.LessOrEqual(t, pongs, maxQueuedPongs)
	require.LessOrEqual(t, queued, maxQueuedCtrlBytes)

	// Reading again: the backlog drains and a new ping is answered. A ping
	// that arrives while the pong queue is still full is dropped (that is
	// the bound), so ping again until one is answered.
	p.startReading()
	id := uint32(pings)
	require.Eventually(t, func() bool {
		id++
		p.send(header{typ: typePing, flags: flagSYN, length: id}, nil)
		time.Sleep(20 * time.Millisecond)
		return p.count(func(f rawFrame) bool { return f.typ == typePing && f.flags == flagACK && f.length > pings }) > 0
	}, 5*time.Second, time.Millisecond, "no fresh ping answered after the flood")
	answered := p.count(func(f rawFrame) bool { return f.typ == typePing && f.flags == flagACK })
	// What the writer took before its write blocked, the queue behind it
	// (maxFloodPongs), and the fresh pings'.
	require.LessOrEqual(t, answered, maxFloodPongs()+int(id-pings), "pongs queued without bound")
	t.Logf("answered %d of %d flood pings", answered-int(id-pings), pings)
	require.False(t, s.IsClosed(), "session closed: %v", s.Err())
}

// TestUnansweredPingsBounded: a peer that never answers pings but keeps
// the session alive with other frames (so keep-alive never times out)
// leaves at most one outstanding keep-alive ping in the session, not one
// per interval for as long as the session lives. In a synctest bubble
// over net.Pipe, so the keep-alive timer runs on the bubble's clock.
func TestUnansweredPingsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 100 * time.Millisecond
		c1, c2 := net.Pipe()
		p, s := newRawPeerOver(t, c1, c2, &Config{KeepAliveInterval: interval}, false)
		p.startReading()
		for range 100 {
			time.Sleep(interval + interval/3)
			// Any frame: a window update for a stream that isn't there.
			p.send(header{typ: typeWindowUpdate, streamID: 99, length: 1}, nil)
		}
		synctest.Wait()
		require.False(t, s.IsClosed(), "the peer's frames keep the session alive")
		pings := p.count(func(f rawFrame) bool { return f.typ == typePing && f.flags&flagSYN != 0 })
		require.Greater(t, pings, 10, "keep-alive pinged the silent peer")
		s.mu.Lock()
		n := len(s.pings)
		s.mu.Unlock()
		require.LessOrEqual(t, n, 1, "outstanding pings after %d unanswered", pings)
	})
}
