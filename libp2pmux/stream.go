package libp2pmux

import (
	"time"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p/core/network"
)

// stream is a *braid.Stream seen as a network.MuxedStream. It is a type
// conversion, not a wrapper: it costs no allocation.
type stream braid.Stream

var _ network.MuxedStream = (*stream)(nil)

func (s *stream) braid() *braid.Stream { return (*braid.Stream)(s) }

// Read reads from the stream; errors are mapped by parseError.
func (s *stream) Read(b []byte) (int, error) {
	n, err := s.braid().Read(b)
	return n, parseError(err)
}

// Write writes to the stream; errors are mapped by parseError.
func (s *stream) Write(b []byte) (int, error) {
	n, err := s.braid().Write(b)
	return n, parseError(err)
}

// Close closes both directions of the stream.
func (s *stream) Close() error { return parseError(s.braid().Close()) }

// CloseWrite half-closes the stream: the peer reads io.EOF.
func (s *stream) CloseWrite() error { return parseError(s.braid().CloseWrite()) }

// CloseRead stops reading; pending and later reads fail.
func (s *stream) CloseRead() error { return parseError(s.braid().CloseRead()) }

// Reset aborts the stream in both directions with code 0.
func (s *stream) Reset() error { return s.braid().Reset() }

// ResetWithError aborts the stream and sends code to the peer.
func (s *stream) ResetWithError(code network.StreamErrorCode) error {
	return s.braid().ResetWithError(uint32(code))
}

// SetDeadline sets the read and write deadlines.
func (s *stream) SetDeadline(t time.Time) error { return s.braid().SetDeadline(t) }

// SetReadDeadline sets the read deadline.
func (s *stream) SetReadDeadline(t time.Time) error { return s.braid().SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline.
func (s *stream) SetWriteDeadline(t time.Time) error { return s.braid().SetWriteDeadline(t) }

// As sets target, which must be a non-nil **braid.Stream, to the
// underlying braid stream and reports whether it did, like errors.As. It is
// not part of network.MuxedStream; reach it with an interface assertion:
//
//	var bs *braid.Stream
//	if a, ok := muxedStream.(interface{ As(any) bool }); ok && a.As(&bs) {
//		// use bs
//	}
func (s *stream) As(target any) bool {
	if t, ok := target.(**braid.Stream); ok && t != nil {
		*t = s.braid()
		return true
	}
	return false
}
