package braid

import (
	"log/slog"
	"time"
)

// Protocol selects the wire protocol a Session speaks.
type Protocol int

const (
	// Yamux is /yamux/1.0.0, byte-for-byte compatible with go-yamux and
	// every other yamux implementation. It is the default.
	Yamux Protocol = iota
	// Mplex is /mplex/6.7.0, compatible with go-mplex v0.7.0, for peers
	// that still use it. mplex has no flow control, pings, go-aways or
	// reset codes: braid bounds each stream's receive buffer
	// (Config.MaxReceiveBuffer). When a stream's buffer is full, the
	// session stops reading the connection, so that TCP pushes back on
	// the sender, for as long as the stream's reader keeps reading; a
	// stream whose reader has not read for Config.MaxReceiveStall is
	// reset, and the other streams go on (go-mplex stalls the whole
	// connection for up to 5 s instead).
	Mplex
)

// String returns the libp2p protocol id.
func (p Protocol) String() string {
	switch p {
	case Yamux:
		return "/yamux/1.0.0"
	case Mplex:
		return "/mplex/6.7.0"
	}
	return "unknown protocol"
}

// Defaults, chosen to match go-yamux v5 so that braid behaves like the muxer
// it replaces unless told otherwise.
const (
	// DefaultMaxIncomingStreams bounds the streams the peer may have open
	// towards us at once (go-yamux: 1000).
	DefaultMaxIncomingStreams = 1000
	// DefaultAcceptBacklog bounds the streams opened by the peer and not yet
	// returned by AcceptStream (go-yamux: 256).
	DefaultAcceptBacklog = 256
	// DefaultMaxUnackedStreams is the libp2p yamux ACK backlog: at most 256
	// streams we opened may wait for the peer's ACK.
	DefaultMaxUnackedStreams = 256
	// InitialStreamWindow is the yamux protocol's initial window: each
	// side may send this much on a new stream before any window update.
	InitialStreamWindow = 256 * 1024
	// DefaultMaxStreamWindow bounds the receive window auto-tuning grows
	// to (go-yamux: 16 MiB).
	DefaultMaxStreamWindow = 16 * 1024 * 1024
	// DefaultMaxBatchBytes bounds one coalesced write. 64 KiB is the size
	// of a TCP segment offload and of most TLS/noise record budgets, so a
	// batch rarely ends up split by the layers below.
	DefaultMaxBatchBytes = 64 * 1024
	// DefaultMaxSessionWindow bounds the receive windows of all of a
	// session's streams together, beyond the initial 256 KiB each: four
	// streams at DefaultMaxStreamWindow.
	DefaultMaxSessionWindow = 4 * DefaultMaxStreamWindow
	// DefaultMaxReceiveBuffer bounds an mplex stream's unread bytes; mplex
	// has no flow control, so this is the only bound on what a peer can
	// make a stream buffer.
	DefaultMaxReceiveBuffer = 4 * 1024 * 1024
	// DefaultMaxReceiveStall is how long an mplex session waits for a
	// stream's reader to make room before resetting the stream: longer
	// than a descheduled or garbage-collecting reader pauses, short
	// enough that a reader that stopped holds up the other streams only
	// briefly.
	DefaultMaxReceiveStall = 250 * time.Millisecond
	// DefaultKeepAliveInterval is how often an idle session pings its peer
	// (go-yamux: 30 s).
	DefaultKeepAliveInterval = 30 * time.Second
	// DefaultConnectionWriteTimeout is how long the connection may accept
	// no byte before the session gives up on it (go-yamux: 10 s).
	DefaultConnectionWriteTimeout = 10 * time.Second
)

// Bounds on Config values that the wire protocol or sanity imposes.
const (
	// minBatchBytes keeps a batch large enough for a header and a useful
	// payload; below it coalescing would cost more writes than it saves.
	minBatchBytes = 4 * 1024
	// maxBatchBytes keeps one batch from holding the connection for long
	// while control frames wait.
	maxBatchBytes = 16 * 1024 * 1024
	// maxCoalesceDelay keeps the optional Nagle-like delay in the range
	// where it trades latency for fewer packets, not for stalls.
	maxCoalesceDelay = 100 * time.Millisecond
)

// MemoryManager is asked before a session grows a stream's receive window,
// so that an application (go-libp2p's resource manager, say) can cap what
// peers may make it buffer. It is called from the session's goroutines and
// from stream calls, so it must be safe for concurrent use.
type MemoryManager interface {
	// ReserveMemory reserves size bytes with a priority (255 = must have,
	// 0 = nice to have). A non-nil error refuses the reservation: the
	// window stays as it is, or a new stream is refused.
	ReserveMemory(size int, prio uint8) error
	// ReleaseMemory returns size bytes reserved earlier.
	ReleaseMemory(size int)
}

// Config tunes a Session. Get one from DefaultConfig and change what you
// need; Client and Server validate it and keep their own copy.
type Config struct {
	// Protocol is the wire protocol; Yamux is the default.
	Protocol Protocol

	// Coalesce packs frames queued by many streams into one write on the
	// connection. It adds no delay: the writer writes as soon as it is
	// free, and batches grow only while the connection is busy. With
	// Coalesce false, every frame is its own write, as in go-yamux.
	Coalesce bool

	// CoalesceDelay, when positive, lets the writer wait up to this long
	// for more frames when a batch is not full: fewer, fuller packets for
	// relays at the cost of latency. At most one timer per batch. Off (0)
	// by default, and ignored unless Coalesce is set.
	CoalesceDelay time.Duration

	// MaxBatchBytes bounds the bytes of one coalesced write.
	MaxBatchBytes int

	// MaxIncomingStreams bounds the streams the peer may have open
	// towards us at once; streams beyond it are reset at once.
	MaxIncomingStreams int

	// AcceptBacklog bounds the opened streams waiting for AcceptStream;
	// streams beyond it are reset at once, never queued without bound.
	AcceptBacklog int

	// MaxUnackedStreams bounds the streams we opened that the peer has
	// not acknowledged yet (the libp2p ACK backlog); OpenStream waits.
	MaxUnackedStreams int

	// MaxStreamWindow bounds each stream's receive window. A new stream's
	// window starts at what the session's path needs (twice the
	// bandwidth-delay product, the rate assumed to be at least 1 Gbit/s
	// until arrivals show more; never less than InitialStreamWindow, which
	// is all a fast local link gets), granted with the SYN or the ACK,
	// and doubles while it limits the transfer. A window whose stream
	// received nothing for a second shrinks back to InitialStreamWindow
	// and returns the memory it reserved.
	MaxStreamWindow uint32

	// MaxSessionWindow bounds what all of a session's streams may hold in
	// receive windows beyond InitialStreamWindow each, together
	// (rust-yamux's max_connection_receive_window), so that many streams
	// can't make a session buffer without bound. It still counts credit a
	// peer was granted before a window shrank, until the peer uses it.
	// Must be at least MaxStreamWindow - InitialStreamWindow.
	MaxSessionWindow int

	// MaxReceiveBuffer bounds the unread bytes of a stream on protocols
	// without flow control (mplex). A frame that doesn't fit makes the
	// session push back: it stops reading the connection until the
	// stream's reader makes room. yamux streams are bounded by their
	// window instead.
	MaxReceiveBuffer int

	// MaxReceiveStall bounds the mplex push-back: a stream whose buffer is
	// full and whose reader has not read for this long (or never read
	// since the stream opened) is reset with ErrReceiveBufferOverflow,
	// and the session reads on. A reader that keeps reading is never
	// reset, however fast the sender, but the other streams wait while
	// it catches up: mplex has no per-stream flow control.
	MaxReceiveStall time.Duration

	// Memory, when not nil, is asked before a window grows and before a
	// stream is created, always with no lock of the session held, and
	// told when a window shrinks or a stream ends; nil means unlimited.
	Memory MemoryManager

	// EnableKeepAlive makes an idle session ping its peer every
	// KeepAliveInterval and close when no answer comes back within
	// ConnectionWriteTimeout.
	EnableKeepAlive   bool
	KeepAliveInterval time.Duration

	// ConnectionWriteTimeout closes the session when the connection
	// accepts no byte for this long (a peer that stopped reading).
	ConnectionWriteTimeout time.Duration

	// Logger receives rare diagnostic events (protocol errors, streams
	// refused). nil logs nothing.
	Logger *slog.Logger
}

// DefaultConfig returns the default configuration: yamux, coalescing on
// without delay, and go-yamux's limits.
func DefaultConfig() *Config {
	return &Config{
		Protocol:               Yamux,
		Coalesce:               true,
		MaxBatchBytes:          DefaultMaxBatchBytes,
		MaxIncomingStreams:     DefaultMaxIncomingStreams,
		AcceptBacklog:          DefaultAcceptBacklog,
		MaxUnackedStreams:      DefaultMaxUnackedStreams,
		MaxStreamWindow:        DefaultMaxStreamWindow,
		MaxSessionWindow:       DefaultMaxSessionWindow,
		MaxReceiveBuffer:       DefaultMaxReceiveBuffer,
		MaxReceiveStall:        DefaultMaxReceiveStall,
		EnableKeepAlive:        true,
		KeepAliveInterval:      DefaultKeepAliveInterval,
		ConnectionWriteTimeout: DefaultConnectionWriteTimeout,
	}
}

// Validate reports the first invalid field as a *ConfigError.
func (c *Config) Validate() error {
	switch {
	case c.Protocol != Yamux && c.Protocol != Mplex:
		return &ConfigError{"Protocol", "unknown protocol"}
	case c.CoalesceDelay < 0 || c.CoalesceDelay > maxCoalesceDelay:
		return &ConfigError{"CoalesceDelay", "must be between 0 and " + maxCoalesceDelay.String()}
	case c.MaxBatchBytes < minBatchBytes || c.MaxBatchBytes > maxBatchBytes:
		return &ConfigError{"MaxBatchBytes", "must be between 4 KiB and 16 MiB"}
	case c.MaxIncomingStreams <= 0:
		return &ConfigError{"MaxIncomingStreams", "must be positive"}
	case c.AcceptBacklog <= 0:
		return &ConfigError{"AcceptBacklog", "must be positive"}
	case c.MaxUnackedStreams <= 0:
		return &ConfigError{"MaxUnackedStreams", "must be positive"}
	case c.MaxStreamWindow < InitialStreamWindow:
		return &ConfigError{"MaxStreamWindow", "must be at least the initial window, 256 KiB"}
	case c.MaxSessionWindow < int(c.MaxStreamWindow)-InitialStreamWindow:
		return &ConfigError{"MaxSessionWindow", "must be at least MaxStreamWindow less the initial window"}
	case c.MaxReceiveBuffer <= 0:
		return &ConfigError{"MaxReceiveBuffer", "must be positive"}
	case c.MaxReceiveStall <= 0:
		return &ConfigError{"MaxReceiveStall", "must be positive"}
	case c.EnableKeepAlive && c.KeepAliveInterval <= 0:
		return &ConfigError{"KeepAliveInterval", "must be positive when keep-alive is enabled"}
	case c.ConnectionWriteTimeout <= 0:
		return &ConfigError{"ConnectionWriteTimeout", "must be positive"}
	}
	return nil
}
