package braid

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

// Sentinel errors. Match them with errors.Is; never compare error text.
var (
	// ErrStreamReset matches every error caused by a stream reset: a
	// *StreamError (local or remote reset, with its code), a go-away, and
	// a stream cut short because its session died.
	ErrStreamReset = errors.New("braid: stream reset")

	// ErrSessionClosed is returned by calls on a session that has been
	// closed, locally or because its connection failed. The error that
	// ended the session is wrapped beside it where there is one.
	ErrSessionClosed = errors.New("braid: session closed")

	// ErrStreamClosed is returned by Write after CloseWrite or Close, and by
	// Read after CloseRead or Close. It matches net.ErrClosed too, as a closed
	// net.Conn would.
	ErrStreamClosed = fmt.Errorf("braid: stream closed: %w", net.ErrClosed)

	// ErrRemoteGoAway matches a *GoAwayError sent by the peer: the peer
	// accepts no new streams. Existing streams keep working.
	ErrRemoteGoAway = errors.New("braid: remote sent go-away")

	// ErrLocalGoAway is returned by OpenStream after this side sent a go-away.
	ErrLocalGoAway = errors.New("braid: go-away sent, no new streams")

	// ErrStreamsExhausted is returned by OpenStream when the 32-bit stream
	// id space of this session is used up.
	ErrStreamsExhausted = errors.New("braid: stream ids exhausted")

	// ErrKeepAliveTimeout ends a session whose peer did not answer a
	// keep-alive ping in time.
	ErrKeepAliveTimeout = errors.New("braid: keep-alive timeout")

	// ErrConnectionWriteTimeout ends a session whose connection accepted no
	// byte for Config.ConnectionWriteTimeout.
	ErrConnectionWriteTimeout = errors.New("braid: connection write timeout")

	// ErrReceiveBufferOverflow is the reset error of a stream (on a
	// protocol without flow control) whose unread bytes exceeded
	// Config.MaxReceiveBuffer. It matches ErrStreamReset.
	ErrReceiveBufferOverflow = fmt.Errorf("%w: receive buffer overflow", ErrStreamReset)

	// ErrNotSupported is returned by Ping on a protocol without pings
	// (mplex).
	ErrNotSupported = errors.New("braid: not supported by the protocol")

	// ErrPeerClosedConn matches the error of a session whose connection
	// ended from the peer's side: reading it returned io.EOF (the peer
	// closed it, at a frame boundary), or io.ErrUnexpectedEOF (in the
	// middle of a frame; the error matches that too), or a write failed
	// with io.EOF. It takes their place: no error of a stream the peer did
	// not finish with a FIN matches io.EOF, by == or by errors.Is, so that
	// code testing for the end of a stream can't take truncated data as
	// complete. A peer's go-away before the end is in the error too, as a
	// *GoAwayError.
	ErrPeerClosedConn = errors.New("braid: connection closed by peer")

	// ErrProtocol matches every *ProtocolError.
	ErrProtocol = errors.New("braid: protocol error")

	// ErrNilConn is returned by Client and Server for a nil net.Conn (or
	// one holding a nil pointer). It matches os.ErrInvalid.
	ErrNilConn = fmt.Errorf("braid: nil net.Conn: %w", os.ErrInvalid)

	// ErrNilContext is returned by OpenStream for a nil context.Context.
	// It matches os.ErrInvalid.
	ErrNilContext = fmt.Errorf("braid: nil context.Context: %w", os.ErrInvalid)
)

// Errors of a net.Conn that breaks the io.Reader or io.Writer contract by
// returning a count outside [0, len(p)]. Either ends the session.
var (
	errInvalidRead  = errors.New("braid: net.Conn Read returned an invalid count")
	errInvalidWrite = errors.New("braid: net.Conn Write returned an invalid count")
)

// Go-away codes of the yamux protocol.
const (
	GoAwayNormal        uint32 = 0 // a clean shutdown
	GoAwayProtocolError uint32 = 1 // the peer broke the protocol
	GoAwayInternalError uint32 = 2 // the sender failed internally
)

// StreamError is the error of a stream that was reset. ErrorCode is the code
// the resetting side gave (0 when none); Remote tells whether the peer reset
// the stream. errors.Is(err, ErrStreamReset) holds for every *StreamError.
type StreamError struct {
	ErrorCode uint32
	Remote    bool
}

// Error describes the reset.
func (e *StreamError) Error() string {
	if e.Remote {
		return fmt.Sprintf("braid: stream reset by peer, code %d", e.ErrorCode)
	}
	return fmt.Sprintf("braid: stream reset, code %d", e.ErrorCode)
}

// Is reports whether target is ErrStreamReset or an equal *StreamError.
func (e *StreamError) Is(target error) bool {
	if target == ErrStreamReset {
		return true
	}
	t, ok := target.(*StreamError)
	return ok && *t == *e
}

// GoAwayError is the error of a session that ended with a go-away. ErrorCode
// is one of the GoAway constants or a code the application chose; Remote
// tells whether the peer sent it. A go-away also resets the streams still
// open on the session, so errors.Is(err, ErrStreamReset) holds for it.
type GoAwayError struct {
	ErrorCode uint32
	Remote    bool
}

// Error describes the go-away.
func (e *GoAwayError) Error() string {
	if e.Remote {
		return fmt.Sprintf("braid: peer sent go-away, code %d", e.ErrorCode)
	}
	return fmt.Sprintf("braid: sent go-away, code %d", e.ErrorCode)
}

// Is reports whether target is ErrRemoteGoAway (for a remote go-away), an
// equal *GoAwayError, or ErrStreamReset and ErrSessionClosed for a go-away
// that ended the session (every one but the peer's normal go-away, which
// only refuses new streams).
func (e *GoAwayError) Is(target error) bool {
	switch target {
	case ErrStreamReset, ErrSessionClosed:
		return !e.Remote || e.ErrorCode != GoAwayNormal
	case ErrRemoteGoAway:
		return e.Remote
	}
	t, ok := target.(*GoAwayError)
	return ok && *t == *e
}

// ProtocolError reports a peer that broke the wire protocol: a malformed
// frame, a window exceeded, a stream id of the wrong parity and so on. The
// session that sees one sends a go-away with GoAwayProtocolError and closes.
// errors.Is(err, ErrProtocol) holds for every *ProtocolError.
type ProtocolError struct {
	Reason   string // what the peer did, e.g. "receive window exceeded"
	StreamID uint32 // the stream concerned, 0 for the session
}

// Error describes the violation.
func (e *ProtocolError) Error() string {
	if e.StreamID != 0 {
		return fmt.Sprintf("braid: protocol error on stream %d: %s", e.StreamID, e.Reason)
	}
	return "braid: protocol error: " + e.Reason
}

// Is reports whether target is ErrProtocol.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field  string // the Config field, e.g. "MaxStreamWindow"
	Reason string // what is wrong with it
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return "braid: invalid Config." + e.Field + ": " + e.Reason
}

// peerClosedError is the cause of a session whose conn ended from the
// peer's side (see ErrPeerClosedConn). It keeps the conn's error text but
// not the error, so that errors.Is never reaches io.EOF through it.
type peerClosedError struct {
	text     string // the conn's error, when it says more than EOF
	midFrame bool   // the conn ended inside a frame
}

func (e *peerClosedError) Error() string {
	msg := ErrPeerClosedConn.Error()
	if e.midFrame {
		msg += " in the middle of a frame"
	}
	if e.text != "" {
		msg += " (" + e.text + ")"
	}
	return msg
}

// Is reports whether target is ErrPeerClosedConn, or io.ErrUnexpectedEOF
// for a conn that ended in the middle of a frame.
func (e *peerClosedError) Is(target error) bool {
	return target == ErrPeerClosedConn || (e.midFrame && target == io.ErrUnexpectedEOF)
}

// hideEOF replaces a cause that matches io.EOF or io.ErrUnexpectedEOF (the
// conn ended) by a *peerClosedError; other causes stay as they are.
func hideEOF(cause error) error {
	var pc *peerClosedError
	if cause == nil || errors.As(cause, &pc) {
		return cause
	}
	eof, unexpected := errors.Is(cause, io.EOF), errors.Is(cause, io.ErrUnexpectedEOF)
	if !eof && !unexpected {
		return cause
	}
	pc = &peerClosedError{midFrame: unexpected}
	if cause != io.EOF && cause != io.ErrUnexpectedEOF {
		pc.text = cause.Error()
	}
	return pc
}

// sessionClosedError wraps the cause of a session's end so that it matches
// ErrSessionClosed, and the cause itself (io.EOF hidden by hideEOF).
func sessionClosedError(cause error) error {
	cause = hideEOF(cause)
	if cause == nil || errors.Is(cause, ErrSessionClosed) {
		if cause == nil {
			return ErrSessionClosed
		}
		return cause
	}
	return fmt.Errorf("%w: %w", ErrSessionClosed, cause)
}

// streamCutError is what a stream's blocked or later calls return when its
// session ends under it: a reset (never a clean io.EOF), wrapping the cause.
func streamCutError(sessionErr error) error {
	if errors.Is(sessionErr, ErrStreamReset) {
		return sessionErr
	}
	return fmt.Errorf("%w: %w", ErrStreamReset, sessionErr)
}
