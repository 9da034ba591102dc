package braid

import (
	"log/slog"
	"reflect"
	"strconv"
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
// it replaces unless told otherwise. A zero Config field means the default
// of the same name.
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
	// DefaultMaxBatchBytes bounds one coalesced write: 64 KiB, the most
	// the kernel hands TCP segmentation offload at once (and loopback's
	// MTU), and four full 16 KiB TLS records. A layer below may still
	// split it: TLS writes it as four records, noise (at most 65,535
	// bytes a message) as two messages.
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
	// stream's reader to make room before resetting the stream, and how
	// long any session waits for the application's accept loop when the
	// accept backlog is full before refusing streams: longer than a
	// descheduled or garbage-collecting goroutine pauses, short enough
	// that a reader or an accept loop that stopped holds up the other
	// streams only briefly.
	DefaultMaxReceiveStall = 250 * time.Millisecond
	// DefaultKeepAliveInterval is how often an idle session pings its peer
	// (go-yamux: 30 s).
	DefaultKeepAliveInterval = 30 * time.Second
	// DefaultConnectionWriteTimeout is how long the connection may accept
	// no byte before the session gives up on it (go-yamux: 10 s).
	DefaultConnectionWriteTimeout = 10 * time.Second
)

// Bounds on Config values that the wire protocol or sanity imposes. Each
// is stated in its field's documentation too.
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
	// maxAcceptBacklog bounds the accept backlog, which a session
	// allocates up front (a pointer per slot): a larger backlog would cost
	// every session memory for streams that an accept loop this far behind
	// would never serve in time anyway.
	maxAcceptBacklog = 64 * 1024
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

// Config tunes a Session. Every field's zero value means its default, so
// &Config{} (or a nil *Config) is the default configuration, and a Config
// needs only the fields to change:
//
//	cfg := &braid.Config{DisableKeepAlive: true, MaxStreamWindow: 4 << 20}
//
// DefaultConfig returns the same configuration with every default spelled
// out. Client and Server validate the Config (see Validate) and keep their
// own copy; Session.Config shows the values in effect.
type Config struct {
	// Protocol is the wire protocol. The zero value is Yamux.
	Protocol Protocol

	// DisableCoalescing makes every frame its own write on the
	// connection, as go-yamux does. By default braid coalesces: frames
	// queued by many streams while the connection is busy leave in one
	// write. Coalescing adds no delay (the writer writes as soon as it is
	// free, and batches grow only while the connection is busy), so
	// disable it only to compare, or where each frame must be a write of
	// its own.
	DisableCoalescing bool

	// CoalesceDelay, when positive, lets the writer wait up to this long
	// for more frames when a batch is not full: fewer, fuller packets (for
	// relays) at the cost of latency. At most one timer is armed per
	// batch. The default, 0, never waits. At most 100 ms; a positive delay
	// with DisableCoalescing set is an error.
	CoalesceDelay time.Duration

	// MaxBatchBytes bounds the bytes of one coalesced write, and the
	// payload of one data frame; while one stream alone sends on a conn
	// fast enough to write more in 100 µs, its frames may carry up to
	// four times as much, in one write. No data frame carries more than
	// 1 MiB whatever this is (the largest rust-yamux accepts, and
	// MplexMaxMessage). Between 4 KiB and 16 MiB; 0 means
	// DefaultMaxBatchBytes (64 KiB).
	MaxBatchBytes int

	// MaxIncomingStreams bounds the streams the peer may have open towards
	// us at once; streams beyond it are reset at once. At least 1; 0 means
	// DefaultMaxIncomingStreams (1000).
	MaxIncomingStreams int

	// AcceptBacklog bounds the streams the peer opened that wait for
	// AcceptStream; streams are never queued beyond it. A peer may open
	// more at once than the backlog holds (js-libp2p and rust-yamux open
	// hundreds without waiting for acknowledgements), so when a new
	// stream finds the backlog full, the session pushes back while the
	// application is accepting: it stops reading the connection (TCP then
	// slows the peer) until AcceptStream takes a stream, for at most
	// MaxReceiveStall since AcceptStream last returned a stream (counted
	// from the session's start before the first, and from the moment the
	// backlog filled if an AcceptStream call is waiting then). An accept
	// loop that keeps up loses no stream, however many the peer opens at
	// once. Once that time passes with no Accept, the stream is refused
	// with a reset, and so is every further stream that finds the backlog
	// full, at once, until the next Accept: a flood nobody accepts costs
	// one stall, then is refused as fast as it arrives. While the session
	// pushes back, the other streams, pings and the keep-alive wait too;
	// that is the price, bounded by MaxReceiveStall. Between 1 and 65536
	// (the backlog is allocated with the session); 0 means
	// DefaultAcceptBacklog (256).
	AcceptBacklog int

	// MaxUnackedStreams bounds the streams we opened that the peer has not
	// acknowledged yet (the libp2p yamux ACK backlog); OpenStream waits
	// while that many are pending. At least 1; 0 means
	// DefaultMaxUnackedStreams (256). mplex has no acknowledgements and
	// ignores it.
	MaxUnackedStreams int

	// MaxStreamWindow bounds each stream's receive window. A new stream's
	// window starts at what the session's path needs (twice the
	// bandwidth-delay product, the rate assumed to be at least 1 Gbit/s
	// until arrivals show more; never less than InitialStreamWindow, which
	// is all a fast local link gets), granted with the SYN or the ACK,
	// and doubles while it limits the transfer. A window whose stream
	// received nothing for a second shrinks back to InitialStreamWindow
	// and returns the memory it reserved. At least 256 KiB; 0 means
	// DefaultMaxStreamWindow (16 MiB). mplex has no windows and ignores
	// it.
	MaxStreamWindow uint32

	// MaxSessionWindow bounds what all of a session's streams may hold in
	// receive windows beyond InitialStreamWindow each, together
	// (rust-yamux's max_connection_receive_window), so that many streams
	// can't make a session buffer without bound. It still counts credit a
	// peer was granted before a window shrank, until the peer uses it.
	// At least MaxStreamWindow - InitialStreamWindow; 0 means
	// DefaultMaxSessionWindow (64 MiB), or MaxStreamWindow -
	// InitialStreamWindow if that is more. mplex ignores it.
	MaxSessionWindow int

	// MaxReceiveBuffer bounds the unread bytes of a stream on protocols
	// without flow control (mplex). A frame that doesn't fit makes the
	// session push back: it stops reading the connection until the
	// stream's reader makes room (see MaxReceiveStall). An empty buffer
	// takes any one message, so a stream may hold up to
	// max(MaxReceiveBuffer, MplexMaxMessage) (1 MiB): a smaller bound
	// would refuse a whole message a peer may send. At least 1; 0 means
	// DefaultMaxReceiveBuffer (4 MiB). yamux streams are bounded by their
	// window instead and ignore it.
	MaxReceiveBuffer int

	// MaxReceiveStall bounds how long the session stops reading the
	// connection to push back on the peer. On mplex, a stream whose
	// buffer is full and whose reader has not read for this long (or
	// never read since the stream opened) is reset with
	// ErrReceiveBufferOverflow, and the session reads on. A reader that
	// keeps reading is never reset, however fast the sender, but the
	// other streams wait while it catches up: mplex has no per-stream
	// flow control. On both protocols it bounds the accept push-back: a
	// new stream that finds the accept backlog full waits at most this
	// long since the last Accept (see AcceptBacklog). The keep-alive does
	// not count such a stall against the peer: the answer to its ping
	// may wait unread meanwhile. A negative value is an error; 0 means
	// DefaultMaxReceiveStall (250 ms).
	MaxReceiveStall time.Duration

	// Memory, when not nil, is asked before a stream is created and
	// before a receive window grows (mplex, which has no windows: before
	// a stream's buffer holds more than it reserved), always with no lock
	// of the session held, and told when a window shrinks or a stream
	// ends, so that it can cap what peers make the session buffer. The
	// default, nil, is no limit. A nil pointer stored in the interface is
	// an error.
	Memory MemoryManager

	// DisableKeepAlive stops the keep-alive. By default an idle session
	// pings its peer every KeepAliveInterval and closes with
	// ErrKeepAliveTimeout when no frame comes back within
	// ConnectionWriteTimeout (the bytes of a long frame still arriving at
	// 2 KiB/s or more count as one). mplex has no pings and never keeps
	// alive.
	DisableKeepAlive bool

	// KeepAliveInterval is how long a session may receive nothing before
	// it pings its peer. A negative value is an error; 0 means
	// DefaultKeepAliveInterval (30 s). Ignored when DisableKeepAlive is
	// set.
	KeepAliveInterval time.Duration

	// ConnectionWriteTimeout closes the session with
	// ErrConnectionWriteTimeout when the connection accepts no byte for
	// this long (a peer that stopped reading; the conn's write deadline is
	// renewed once per eighth of it, so the session ends between 1 and
	// 1.125 times this after the last byte went); it also bounds how long
	// Ping and the keep-alive wait for an answer. A negative value is an
	// error; 0 means DefaultConnectionWriteTimeout (10 s).
	ConnectionWriteTimeout time.Duration

	// Logger receives rare diagnostic events (protocol errors, streams
	// refused). The default, nil, logs nothing; a Logger without a handler
	// (&slog.Logger{}) is an error.
	Logger *slog.Logger
}

// DefaultConfig returns the default configuration with every default
// spelled out: yamux, coalescing on without delay, keep-alive on, and
// go-yamux's limits. It is what &Config{} means; change what you need.
func DefaultConfig() *Config {
	return &Config{
		Protocol:               Yamux,
		MaxBatchBytes:          DefaultMaxBatchBytes,
		MaxIncomingStreams:     DefaultMaxIncomingStreams,
		AcceptBacklog:          DefaultAcceptBacklog,
		MaxUnackedStreams:      DefaultMaxUnackedStreams,
		MaxStreamWindow:        DefaultMaxStreamWindow,
		MaxSessionWindow:       DefaultMaxSessionWindow,
		MaxReceiveBuffer:       DefaultMaxReceiveBuffer,
		MaxReceiveStall:        DefaultMaxReceiveStall,
		KeepAliveInterval:      DefaultKeepAliveInterval,
		ConnectionWriteTimeout: DefaultConnectionWriteTimeout,
	}
}

// withDefaults returns a copy of c (nil: the zero Config) with every zero
// field set to its default. Values out of range stay as they are, for
// Validate to report.
func (c *Config) withDefaults() Config {
	var r Config
	if c != nil {
		r = *c
	}
	setDefault(&r.MaxBatchBytes, DefaultMaxBatchBytes)
	setDefault(&r.MaxIncomingStreams, DefaultMaxIncomingStreams)
	setDefault(&r.AcceptBacklog, DefaultAcceptBacklog)
	setDefault(&r.MaxUnackedStreams, DefaultMaxUnackedStreams)
	setDefault(&r.MaxStreamWindow, DefaultMaxStreamWindow)
	if r.MaxSessionWindow == 0 {
		r.MaxSessionWindow = max(DefaultMaxSessionWindow, int(r.MaxStreamWindow)-InitialStreamWindow)
	}
	setDefault(&r.MaxReceiveBuffer, DefaultMaxReceiveBuffer)
	setDefault(&r.MaxReceiveStall, DefaultMaxReceiveStall)
	setDefault(&r.KeepAliveInterval, DefaultKeepAliveInterval)
	setDefault(&r.ConnectionWriteTimeout, DefaultConnectionWriteTimeout)
	return r
}

// setDefault sets *v to def when it is zero.
func setDefault[T int | uint32 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate reports the first invalid field as a *ConfigError. A zero field
// is valid (it stands for its default), and so is a nil *Config; the bound
// of each field is in its documentation. Client and Server call Validate,
// so calling it is only needed to check a Config early.
func (c *Config) Validate() error {
	r := c.withDefaults()
	switch {
	case r.Protocol != Yamux && r.Protocol != Mplex:
		return &ConfigError{"Protocol", "unknown protocol " + strconv.Itoa(int(r.Protocol))}
	case r.CoalesceDelay < 0 || r.CoalesceDelay > maxCoalesceDelay:
		return &ConfigError{"CoalesceDelay", "must be between 0 and " + maxCoalesceDelay.String()}
	case r.CoalesceDelay > 0 && r.DisableCoalescing:
		return &ConfigError{"CoalesceDelay", "must be 0 when DisableCoalescing is set"}
	case r.MaxBatchBytes < minBatchBytes || r.MaxBatchBytes > maxBatchBytes:
		return &ConfigError{"MaxBatchBytes", "must be between 4 KiB and 16 MiB, or 0 for the default (64 KiB)"}
	case r.MaxIncomingStreams < 0:
		return &ConfigError{"MaxIncomingStreams", "must be at least 1, or 0 for the default (1000)"}
	case r.AcceptBacklog < 0 || r.AcceptBacklog > maxAcceptBacklog:
		return &ConfigError{"AcceptBacklog", "must be between 1 and 65536, or 0 for the default (256)"}
	case r.MaxUnackedStreams < 0:
		return &ConfigError{"MaxUnackedStreams", "must be at least 1, or 0 for the default (256)"}
	case r.MaxStreamWindow < InitialStreamWindow:
		return &ConfigError{"MaxStreamWindow", "must be at least the initial window, 256 KiB, or 0 for the default (16 MiB)"}
	case r.MaxSessionWindow < int(r.MaxStreamWindow)-InitialStreamWindow:
		return &ConfigError{"MaxSessionWindow", "must be at least MaxStreamWindow less the initial window, or 0 for the default (64 MiB)"}
	case r.MaxReceiveStall < 0:
		return &ConfigError{"MaxReceiveStall", "must not be negative (0 means the default, 250ms)"}
	case r.MaxReceiveBuffer < 0:
		return &ConfigError{"MaxReceiveBuffer", "must be at least 1, or 0 for the default (4 MiB)"}
	case r.Memory != nil && isNilPointer(r.Memory):
		return &ConfigError{"Memory", "is a nil pointer; leave the interface nil for no limit"}
	case r.Logger != nil && r.Logger.Handler() == nil:
		return &ConfigError{"Logger", "has no handler; make it with slog.New"}
	case r.KeepAliveInterval < 0 && !r.DisableKeepAlive:
		return &ConfigError{"KeepAliveInterval", "must not be negative (0 means the default, 30s)"}
	case r.ConnectionWriteTimeout < 0:
		return &ConfigError{"ConnectionWriteTimeout", "must not be negative (0 means the default, 10s)"}
	}
	return nil
}

// resolve validates cfg and returns it with every default applied: the
// configuration a session runs with.
func resolve(cfg *Config) (Config, error) {
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg.withDefaults(), nil
}

// Config returns a copy of the configuration the session runs with: the
// Config given to Client or Server with every zero field set to its
// default.
func (s *Session) Config() *Config {
	c := s.cfg
	return &c
}

// isNilPointer reports whether v is nil or holds a nil pointer (or another
// nil reference), on which a method call would panic in the session's
// goroutines.
func isNilPointer(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
