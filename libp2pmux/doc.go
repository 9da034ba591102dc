// Package libp2pmux plugs braid into go-libp2p as a stream multiplexer.
//
// braid speaks yamux (/yamux/1.0.0) byte for byte, so a host built with
// this package replaces go-libp2p's stock yamux muxer and still talks to
// every yamux peer: go-libp2p, rust-libp2p, js-libp2p and the others.
// Frames of many streams are coalesced into few writes on the secure
// connection, which saves system calls and encryption records.
//
// # Install and use
//
// libp2pmux is a module of its own, so that programs importing braid alone
// don't inherit go-libp2p's module graph. It needs Go 1.26 or later:
//
//	go get github.com/braidmux/braid/libp2pmux
//
// A go-libp2p host selects braid by registering DefaultTransport under ID
// with libp2p.Muxer, in place of go-libp2p's yamux (the other options stay
// as they are):
//
//	h, err := libp2p.New(
//		libp2p.Muxer(libp2pmux.ID, libp2pmux.DefaultTransport),
//	)
//
// A host given a Muxer option no longer adds go-libp2p's yamux, so braid
// replaces it; don't register both, since they claim the same protocol id.
// That id is yamux's: the host still negotiates yamux with every peer, and
// the peer may run any yamux implementation.
//
// DefaultTransport uses DefaultConfig: braid's defaults tuned like
// go-libp2p's yamux (a 16 MiB stream window, and no incoming stream limit
// of its own, since go-libp2p's resource manager limits streams). To tune
// the muxer, pass a braid.Config to NewTransport: its zero fields mean
// DefaultConfig's values, so it needs only the fields to change.
//
// For peers that still use mplex, register MplexTransport under MplexID
// (/mplex/6.7.0), alone or after yamux: libp2p.Muxer(MplexID,
// MplexTransport). mplex has no flow control: when a stream's unread
// bytes reach Config.MaxReceiveBuffer, braid stops reading the connection
// (TCP pushes back on the sender) while the stream's reader keeps reading,
// and resets the stream (braid.ErrReceiveBufferOverflow) only once its
// reader has not read for Config.MaxReceiveStall, so one stalled reader
// holds the other streams up for a bounded time, never indefinitely as
// go-mplex's can. mplex's reset carries no error code, and it has no
// go-away.
//
// # Resource accounting
//
// Each connection begins a span of the network.PeerScope go-libp2p hands to
// NewConn. braid reserves a new stream's initial window and every growth of
// a receive window (over mplex, every growth of a stream's buffer past what
// it reserved) from that span before it commits to it, so the resource
// manager can refuse; a refused growth leaves the window as it is, a
// refused stream (or mplex buffer) is reset. Everything is released when streams end and
// when the connection closes, and the span ends with the connection.
//
// # Errors
//
// Errors are mapped to go-libp2p's the way its yamux adapter maps
// go-yamux's: a reset stream fails with a *network.StreamError carrying
// the peer's or our error code (it matches network.ErrReset with
// errors.Is, and wraps the *braid.StreamError), a connection closed with a
// go-away code fails with a *network.ConnError (which matches
// network.ErrReset too, and wraps the *braid.GoAwayError), and any other
// error that resets a stream matches network.ErrReset.
//
// # Reaching braid
//
// The network.MuxedConn returned by NewConn unwraps to the *braid.Session
// with its As method, and so does a host's network.Conn, whose As asks
// the MuxedConn (see Example_session). A network.MuxedStream of that
// MuxedConn unwraps to its *braid.Stream with an As method that the
// interface does not declare, so reach it with an interface assertion:
//
//	var bs *braid.Stream
//	if a, ok := muxedStream.(interface{ As(any) bool }); ok && a.As(&bs) {
//		// use bs
//	}
//
// A host's network.Stream (from host.NewStream or a stream handler) does
// not unwrap: go-libp2p's stream types have no As method (v0.52.0). Use
// what you reach for statistics (Session.Stats, Session.RTT) and the like;
// don't close or reset it behind go-libp2p's back.
package libp2pmux
