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
	// (Config.MaxReceiveBuffer) and resets a stream whose reader falls
	// behind, instead of stalling the whole connection as go-mplex does.
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
	// DefaultMaxReceiveBuffer bounds an mplex stream's unread bytes; mplex
	// has no flow control, so this is the only bound on what a peer can
	// make a stream buffer.
	DefaultMaxReceiveBuffer = 4 * 1024 * 1024
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

	// MaxStreamWindow bounds each stream's receive window. Windows start
	// at InitialStreamWindow and grow towards the bandwidth-delay product
	// of the connection, measured from its round-trip time.
	MaxStreamWindow uint32

	// MaxReceiveBuffer bounds the unread bytes of a stream on protocols
	// without flow control (mplex): a stream whose reader lets more pile
	// up is reset with ErrReceiveBufferOverflow, and no other stream
	// waits for it. yamux streams are bounded by their window instead.
	MaxReceiveBuffer int

	// Memory, when not nil, is asked before a window grows and before a
	// stream is created; nil means unlimited.
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
		MaxReceiveBuffer:       DefaultMaxReceiveBuffer,
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
	case c.MaxReceiveBuffer <= 0:
		return &ConfigError{"MaxReceiveBuffer", "must be positive"}
	case c.EnableKeepAlive && c.KeepAliveInterval <= 0:
		return &ConfigError{"KeepAliveInterval", "must be positive when keep-alive is enabled"}
	case c.ConnectionWriteTimeout <= 0:
		return &ConfigError{"ConnectionWriteTimeout", "must be positive"}
	}
	return nil
}
