package libp2pmux

import (
	"errors"
	"math"
	"net"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p/core/network"
)

// ID is the protocol id braid negotiates: yamux's, since braid speaks
// yamux on the wire. Register the transport under it with libp2p.Muxer.
const ID = "/yamux/1.0.0"

// Settings DefaultConfig makes, as go-libp2p makes them for yamux.
const (
	// hostMaxStreamWindow bounds receive windows at 16 MiB: 1 MiB would
	// cap a stream at about 10 MiB/s on a link with 100 ms of latency.
	hostMaxStreamWindow = 16 * 1024 * 1024
	// hostMaxIncomingStreams is in effect no limit: go-libp2p's resource
	// manager limits the streams of each peer.
	hostMaxIncomingStreams = math.MaxInt32
)

// DefaultTransport is a Transport with DefaultConfig, ready for
// libp2p.Muxer(ID, DefaultTransport). It is a variable only to mirror
// go-libp2p's yamux package; don't reassign it. A Transport has no mutable
// state, so sharing it between hosts is safe.
var DefaultTransport = mustNewTransport(DefaultConfig())

// DefaultConfig returns braid's default configuration adjusted for
// go-libp2p hosts, as go-libp2p adjusts go-yamux's: coalescing on, a 16
// MiB maximum stream window, and in effect no limit of the muxer's own on
// incoming streams (math.MaxInt32), since go-libp2p's resource manager
// limits them. Change what you need and pass it to NewTransport.
func DefaultConfig() *braid.Config {
	cfg := braid.DefaultConfig()
	cfg.Coalesce = true
	cfg.MaxStreamWindow = hostMaxStreamWindow
	cfg.MaxIncomingStreams = hostMaxIncomingStreams
	return cfg
}

// Transport makes braid sessions out of go-libp2p's secured connections. It
// implements network.Multiplexer; give it to libp2p.Muxer with ID. Make one
// with NewTransport, or use DefaultTransport; the zero Transport uses
// DefaultConfig.
type Transport struct {
	cfg braid.Config // the zero Config stands for DefaultConfig()
}

var _ network.Multiplexer = (*Transport)(nil)

// NewTransport returns a Transport whose sessions use a copy of cfg; nil
// means DefaultConfig(). The config is validated here, so that a host fails
// to build rather than every connection. cfg.Memory must be nil: each
// connection accounts its memory in a span of the network.PeerScope
// go-libp2p passes to NewConn.
func NewTransport(cfg *braid.Config) (*Transport, error) {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	if cfg.Memory != nil {
		return nil, errors.New("libp2pmux: Config.Memory must be nil: memory is accounted through the network.PeerScope given to NewConn")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Transport{cfg: *cfg}, nil
}

func mustNewTransport(cfg *braid.Config) *Transport {
	t, err := NewTransport(cfg)
	if err != nil {
		panic(err)
	}
	return t
}

// Config returns a copy of the transport's configuration.
func (t *Transport) Config() *braid.Config {
	if t.cfg == (braid.Config{}) {
		return DefaultConfig()
	}
	cfg := t.cfg
	return &cfg
}

// NewConn makes a braid session over nc, the server side if isServer, and
// returns it as a network.MuxedConn. When scope is not nil, the session
// reserves its streams' memory in a span of scope (see the package
// documentation); the span ends when the session does. The session owns nc
// from now on: closing the MuxedConn closes it.
func (t *Transport) NewConn(nc net.Conn, isServer bool, scope network.PeerScope) (network.MuxedConn, error) {
	cfg := *t.Config()
	var span network.ResourceScopeSpan
	if scope != nil {
		var err error
		if span, err = scope.BeginSpan(); err != nil {
			return nil, err
		}
		cfg.Memory = span
	}
	var sess *braid.Session
	var err error
	if isServer {
		sess, err = braid.Server(nc, &cfg)
	} else {
		sess, err = braid.Client(nc, &cfg)
	}
	if err != nil {
		if span != nil {
			span.Done()
		}
		return nil, err
	}
	return newConn(sess, span), nil
}
