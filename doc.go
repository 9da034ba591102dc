// Package braid multiplexes many ordered, flow-controlled byte streams over
// one net.Conn. It speaks the yamux wire protocol (/yamux/1.0.0)
// byte-for-byte, so either side of a connection can be go-yamux, rust-yamux
// or any other yamux implementation.
//
// braid's difference is write coalescing that costs no latency: frames that
// many streams queue while the connection is busy leave in one write, and
// an idle stream's frame is written the moment the writer is free. No timer
// is armed on this path. Under load, a hundred streams writing 64-byte
// messages reach the connection in a few writes instead of one per message,
// which on a secured libp2p connection also means a few encrypted records.
// Large payloads are written from the caller's buffer (writev), control
// frames (window updates, pongs, resets) jump the queue, and streams take
// turns, so a bulk transfer can't starve a small request.
//
// Flow control follows yamux (256 KiB initial window per stream, window
// updates as deltas), and braid's receiver governs its own windows, with
// any yamux sender: the session learns its path (the round-trip time from
// pings, the rate from arrivals, assumed to be at least 1 Gbit/s) and a
// new stream's SYN or ACK grants at once the window the path needs, so
// that on a long link a request/response or a new bulk stream does not
// pay the 256 KiB initial window as round trips, while on a fast local
// link streams keep the initial window and a small request never queues
// behind megabytes in flight. Windows double while they limit a transfer,
// within Config.MaxStreamWindow, a budget for all of a session's streams
// (Config.MaxSessionWindow) and Config.Memory, which is asked with no lock
// held; a stream idle for a second shrinks back and returns the memory.
//
// mplex has no flow control. When an mplex stream's buffer
// (Config.MaxReceiveBuffer) is full, the session pushes back: it stops
// reading the connection, so that TCP slows the sender, for as long as
// the stream's reader keeps reading, and resets only a stream whose
// reader has not read for Config.MaxReceiveStall (250 ms by default). A
// fast sender and a reader descheduled for a few milliseconds is ordinary
// bulk transfer and never loses its stream; a reader that stopped holds
// up the other streams once, for at most that long.
//
// New streams push back the same way, yamux and mplex: a stream the peer
// opens when Config.AcceptBacklog streams already wait for AcceptStream
// stops the read loop until an AcceptStream makes room, for at most
// Config.MaxReceiveStall since the application last accepted (or began
// waiting in AcceptStream). A peer that opens hundreds of streams at once
// (js-libp2p and rust-yamux don't wait for ACKs) gets every one while the
// application keeps accepting; when nobody accepts, the streams beyond the
// backlog are refused with a reset, at once after the first stall.
//
// A Session is one side of a connection: Client on one end, Server on the
// other. Streams are net.Conns with half-close and resets that carry an
// error code:
//
//	sess, err := braid.Client(conn, nil) // nil: the default Config
//	if err != nil { ... }
//	defer sess.Close()
//	st, err := sess.OpenStream(ctx)
//	if err != nil { ... }
//	st.Write(request)
//	st.CloseWrite()
//	reply, err := io.ReadAll(st)
//
// A Config tunes a session. Its zero value is the default configuration
// (DefaultConfig spells it out), so set only what you change; each field's
// documentation gives its default and bounds, and Client refuses a value
// outside them with a *ConfigError:
//
//	sess, err := braid.Server(conn, &braid.Config{MaxStreamWindow: 4 << 20})
//
// braid needs Go 1.26 or later (go get github.com/braidmux/braid). To use
// it as a go-libp2p host's muxer, see the module
// github.com/braidmux/braid/libp2pmux.
//
// Errors are typed: errors.Is(err, ErrStreamReset) holds for every reset, a
// *StreamError carries the peer's code, a *GoAwayError the session's end,
// and a *ProtocolError what a misbehaving peer did (the session then closes
// with a go-away carrying GoAwayProtocolError). A stream that did not end
// with the peer's FIN never returns an error matching io.EOF; when the
// connection ended under it, the error matches ErrPeerClosedConn.
//
// The design the code follows (the writer, flow control, the wire formats,
// the bad-input policy) is described in docs/design.md in the repository.
package braid
