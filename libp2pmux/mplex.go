package libp2pmux

import "github.com/braidmux/braid"

// MplexID is the protocol id of mplex, which braid also speaks for peers
// that still use it. Register MplexTransport under it with libp2p.Muxer.
const MplexID = "/mplex/6.7.0"

// MplexTransport is the Transport to give libp2p.Muxer(MplexID,
// MplexTransport): NewTransport(MplexConfig()), made when the package is
// initialized (MplexConfig is valid, so that can't fail). Like
// DefaultTransport it is a variable only to mirror go-libp2p's muxer
// packages; don't reassign it.
var MplexTransport = mustNewTransport(MplexConfig())

// hostMplexAcceptBacklog is the accept backlog of mplex sessions. mplex
// has no stream acknowledgement, so an opener can't be made to wait as
// yamux's ACK backlog makes it (braid.DefaultMaxUnackedStreams). A burst
// of new streams beyond the backlog makes the session stop reading (TCP
// pushes back on the opener) until the host's accept loop makes room, for
// at most Config.MaxReceiveStall; only streams beyond it that nobody
// accepts in that time are reset. 1024 is of the order
// of go-libp2p's default per-peer inbound stream limit; the resource
// manager, asked before every incoming stream, stays the real bound.
const hostMplexAcceptBacklog = 1024

// MplexConfig returns DefaultConfig speaking mplex (Protocol
// braid.Mplex), with an accept backlog of 1024 streams instead of 256,
// since mplex can't make an opener wait for the peer's acknowledgement.
// mplex has no flow control: each stream buffers at most
// Config.MaxReceiveBuffer unread bytes (4 MiB by default); when that is
// full the session stops reading the connection while the stream's reader
// keeps reading, and resets a stream whose reader has not read for
// Config.MaxReceiveStall (250 ms), with braid.ErrReceiveBufferOverflow at
// braid and a reset at the peer, while the connection's other streams go
// on. Change what you need and pass it
// to NewTransport.
func MplexConfig() *braid.Config {
	cfg := DefaultConfig()
	cfg.Protocol = braid.Mplex
	cfg.AcceptBacklog = hostMplexAcceptBacklog
	return cfg
}

// mustNewTransport is NewTransport for configurations known to be valid;
// a test checks MplexTransport's.
func mustNewTransport(cfg *braid.Config) *Transport {
	t, err := NewTransport(cfg)
	if err != nil {
		panic(err)
	}
	return t
}
