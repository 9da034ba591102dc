package libp2pmux

import (
	"math"
	"net"
	"reflect"

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

// DefaultTransport is the Transport to give libp2p.Muxer(ID,
// DefaultTransport): the zero Transport, whose sessions use DefaultConfig.
// It is a variable only to mirror go-libp2p's yamux package; don't
// reassign it. A Transport has no mutable state, so hosts may share it.
var DefaultTransport = &Transport{}

// DefaultConfig returns braid's default configuration adjusted for go-libp2p
// hosts, as go-libp2p adjusts go-yamux's: coalescing on, a 16 MiB maximum
// stream window, and in effect no limit of the muxer's own on incoming
// streams (math.MaxInt32), since go-libp2p's resource manager limits them.
// Change what you need and pass it to NewTransport.
func DefaultConfig() *braid.Config {
	cfg := braid.DefaultConfig()
	cfg.MaxStreamWindow = hostMaxStreamWindow
	cfg.MaxIncomingStreams = hostMaxIncomingStreams
	return cfg
}

// Transport makes braid sessions out of go-libp2p's secured connections. It
// implements network.Multiplexer; give it to libp2p.Muxer with ID. Make one
// with NewTransport, or use DefaultTransport; the zero Transport (and a
// nil *Transport) uses DefaultConfig.
type Transport struct {
	cfg braid.Config // the zero Config stands for DefaultConfig()
}

var _ network.Multiplexer = (*Transport)(nil)

// NewTransport returns a Transport whose sessions use a copy of cfg. A zero
// field of cfg means this package's default, the value DefaultConfig has
// (MplexConfig's when cfg.Protocol is braid.Mplex), so nil and
// &braid.Config{} both give DefaultTransport's configuration. The config
// is validated here, so that a host fails to build rather than every
// connection: an invalid one is a *braid.ConfigError. cfg.Memory must be
// nil (a *braid.ConfigError otherwise): each connection accounts its
// memory in a span of the network.PeerScope go-libp2p passes to NewConn.
func NewTransport(cfg *braid.Config) (*Transport, error) {
	c := withDefaults(cfg)
	if c.Memory != nil {
		return nil, &braid.ConfigError{Field: "Memory", Reason: "must be nil: libp2pmux accounts memory through the network.PeerScope given to NewConn"}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Transport{cfg: c}, nil
}

// withDefaults returns a copy of cfg whose zero fields have DefaultConfig's
// values (MplexConfig's for mplex).
func withDefaults(cfg *braid.Config) braid.Config {
	if cfg == nil {
		return *DefaultConfig()
	}
	base := DefaultConfig()
	if cfg.Protocol == braid.Mplex {
		base = MplexConfig()
	}
	c := *cfg
	dst, src := reflect.ValueOf(&c).Elem(), reflect.ValueOf(base).Elem()
	for i := range dst.NumField() {
		if f := dst.Field(i); f.IsZero() {
			f.Set(src.Field(i))
		}
	}
	if cfg.MaxSessionWindow == 0 {
		// braid's default follows MaxStreamWindow (braid.Config's
		// MaxSessionWindow doc); the base's value fits only the default
		// stream window, and a larger one would fail Validate.
		c.MaxSessionWindow = max(braid.DefaultMaxSessionWindow, int(c.MaxStreamWindow)-braid.InitialStreamWindow)
	}
	return c
}

// Config returns a copy of the transport's configuration, every default
// spelled out.
func (t *Transport) Config() *braid.Config {
	if t == nil || t.cfg == (braid.Config{}) {
		return DefaultConfig()
	}
	cfg := t.cfg
	return &cfg
}

// NewConn makes a braid session over nc, the server side if isServer, and
// returns it as a network.MuxedConn. When scope is not nil, the session
// reserves its streams' memory in a span of scope (see the package
// documentation); the span ends when the session does, and an error of
// scope.BeginSpan is returned as it is. A nil nc is braid.ErrNilConn. The
// session owns nc from now on: closing the MuxedConn closes it (after an
// error, nc stays the caller's). Over go-libp2p's TLS the session reads
// and writes the *tls.Conn that nc carries, which is nc's own reads and
// writes with what braid knows of crypto/tls (see braidConn).
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
	conn := braidConn(nc)
	if isServer {
		sess, err = braid.Server(conn, &cfg)
	} else {
		sess, err = braid.Client(conn, &cfg)
	}
	if err != nil {
		if span != nil {
			span.Done()
		}
		return nil, err
	}
	return newConn(sess, span), nil
}
