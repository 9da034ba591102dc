package interop_test

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/braidmux/braid"
	hyamux "github.com/hashicorp/yamux"
	mplex "github.com/libp2p/go-mplex"
	yamux "github.com/libp2p/go-yamux/v5"
)

// The Go peers of the interop matrix: go-yamux v5.1.0 (libp2p's yamux),
// go-mplex v0.7.0 (libp2p's mplex) and hashicorp/yamux v0.1.2 (the
// original yamux, in Consul and Nomad), each running in process on the
// other end of a loopback TCP connection. A peer is described by what its
// session and streams can do, so that every check runs against all of
// them and says where an implementation lacks a call.

// peerStream is what every peer's stream offers the checks.
type peerStream interface {
	io.ReadWriteCloser
	CloseWrite() error
	SetDeadline(time.Time) error
}

// peerSession is one end of a connection, run by a peer implementation.
type peerSession struct {
	open   func(context.Context) (peerStream, error)
	accept func() (peerStream, error)
	// reset resets st with code (dropped where the protocol has no codes).
	reset  func(st peerStream, code uint32) error
	ping   func() (time.Duration, error) // nil: the protocol has no pings
	goAway func() error                  // nil: the protocol has no go-away
	close  func() error                  // the implementation's Close
	closed <-chan struct{}               // closed when the session ends
	// err is the error of the peer's calls once its session ended (an
	// AcceptStream after the end, say).
	err func() error
}

// peer is an implementation braid is tested against.
type peer struct {
	name  string
	proto braid.Protocol
	// start makes the peer's side of a session over conn: the client
	// (odd stream ids, mplex initiator) when client.
	start func(conn net.Conn, client bool) (*peerSession, error)
	// resetCodes: the peer's resets carry an error code (the yamux RST's
	// length field), and it reports braid's.
	resetCodes bool
	// resetAfterFIN: the peer's only reset is a stream it closed whose
	// peer did not close in time (hashicorp/yamux has no Reset call; its
	// StreamCloseTimeout sends a RST after its FIN), so braid reads io.EOF
	// before the reset shows, on its writes.
	resetAfterFIN bool
	// cutReadsEOF: the peer's Read returns a plain io.EOF on a stream its
	// session closed under it (hashicorp/yamux: a closed session
	// force-closes its streams, and a closed stream reads io.EOF).
	cutReadsEOF bool
	// isReset reports whether err is the peer's error for a stream braid
	// reset, and the code it reports (when resetCodes).
	isReset func(err error) (code uint32, ok bool)
	// goAwayCode returns the code of braid's go-away from the peer's error
	// once braid closed the session with one (ok false: the error does not
	// carry it, a failure); nil for a peer whose error never carries it.
	goAwayCode func(err error) (code uint32, ok bool)
}

// goPeers are the Go implementations of the matrix.
func goPeers() []peer {
	return []peer{goYamuxPeer(), goMplexPeer(), hashicorpPeer()}
}

// goYamuxPeer is go-yamux v5.1.0 with its default configuration (logging
// off).
func goYamuxPeer() peer {
	return peer{
		name:  "go-yamux",
		proto: braid.Yamux,
		start: func(conn net.Conn, client bool) (*peerSession, error) {
			cfg := yamux.DefaultConfig()
			cfg.LogOutput = io.Discard
			newSession := yamux.Server
			if client {
				newSession = yamux.Client
			}
			s, err := newSession(conn, cfg, nil)
			if err != nil {
				return nil, err
			}
			return &peerSession{
				open:   func(ctx context.Context) (peerStream, error) { return s.OpenStream(ctx) },
				accept: func() (peerStream, error) { return s.AcceptStream() },
				reset:  func(st peerStream, code uint32) error { return st.(*yamux.Stream).ResetWithError(code) },
				ping:   s.Ping,
				goAway: s.GoAway,
				close:  s.Close,
				closed: s.CloseChan(),
				err: func() error {
					_, err := s.AcceptStream()
					return err
				},
			}, nil
		},
		resetCodes: true,
		isReset: func(err error) (uint32, bool) {
			var se *yamux.StreamError
			if errors.As(err, &se) && se.Remote {
				return se.ErrorCode, true
			}
			return 0, false
		},
		goAwayCode: func(err error) (uint32, bool) {
			var ga *yamux.GoAwayError
			if errors.As(err, &ga) && ga.Remote {
				return ga.ErrorCode, true
			}
			return 0, false
		},
	}
}

// goMplexPeer is go-mplex v0.7.0: no flow control, no pings, no go-away,
// resets without codes.
func goMplexPeer() peer {
	return peer{
		name:  "go-mplex",
		proto: braid.Mplex,
		start: func(conn net.Conn, client bool) (*peerSession, error) {
			m, err := mplex.NewMultiplex(conn, client, nil)
			if err != nil {
				return nil, err
			}
			return &peerSession{
				open:   func(ctx context.Context) (peerStream, error) { return m.NewStream(ctx) },
				accept: func() (peerStream, error) { return m.Accept() },
				reset:  func(st peerStream, _ uint32) error { return st.(*mplex.Stream).Reset() },
				close:  m.Close,
				closed: m.CloseChan(),
				err: func() error {
					_, err := m.Accept()
					return err
				},
			}, nil
		},
		isReset: func(err error) (uint32, bool) { return 0, errors.Is(err, mplex.ErrStreamReset) },
	}
}

// hashicorpCloseTimeout is hashicorp/yamux's StreamCloseTimeout in the
// matrix: its default (5 min) made short, since it is the only way the
// implementation resets a stream (a closed stream whose peer does not
// close in time), yet long enough that no check but the reset waits for
// it under -race.
const hashicorpCloseTimeout = 3 * time.Second

// hashicorpStream adds CloseWrite: hashicorp/yamux's Close is a half-close
// (it sends a FIN, and the stream reads on until the peer's).
type hashicorpStream struct{ *hyamux.Stream }

func (s hashicorpStream) CloseWrite() error { return s.Stream.Close() }

// hashicorpPeer is hashicorp/yamux v0.1.2: no reset call, no reset codes,
// its Close sends no go-away, it reports no go-away code.
func hashicorpPeer() peer {
	return peer{
		name:  "hashicorp-yamux",
		proto: braid.Yamux,
		start: func(conn net.Conn, client bool) (*peerSession, error) {
			cfg := hyamux.DefaultConfig()
			cfg.LogOutput = io.Discard
			cfg.StreamCloseTimeout = hashicorpCloseTimeout
			newSession := hyamux.Server
			if client {
				newSession = hyamux.Client
			}
			s, err := newSession(conn, cfg)
			if err != nil {
				return nil, err
			}
			return &peerSession{
				open: func(context.Context) (peerStream, error) {
					st, err := s.OpenStream()
					if err != nil {
						return nil, err
					}
					return hashicorpStream{st}, nil
				},
				accept: func() (peerStream, error) {
					st, err := s.AcceptStream()
					if err != nil {
						return nil, err
					}
					return hashicorpStream{st}, nil
				},
				// The RST follows hashicorpCloseTimeout after the FIN.
				reset:  func(st peerStream, _ uint32) error { return st.Close() },
				ping:   s.Ping,
				goAway: s.GoAway,
				close:  s.Close,
				closed: s.CloseChan(),
				err: func() error {
					_, err := s.AcceptStream()
					return err
				},
			}, nil
		},
		resetAfterFIN: true,
		cutReadsEOF:   true,
		isReset:       func(err error) (uint32, bool) { return 0, errors.Is(err, hyamux.ErrConnectionReset) },
		// goAwayCode nil: a go-away with a code beyond 2 ends its session
		// with "unexpected go away received", which carries no code.
	}
}
