package libp2pmux

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p/core/network"
)

// conn is a *braid.Session seen as a network.MuxedConn, with the resource
// span that accounts its memory.
type conn struct {
	sess *braid.Session

	// span is the connection's span of the peer scope (nil without a
	// scope). It ends once, when the session has ended and released what
	// it had reserved.
	span       network.ResourceScopeSpan
	spanOnce   sync.Once
	localClose atomic.Bool // Close or CloseWithError was called
}

var _ network.MuxedConn = (*conn)(nil)

// NewMuxedConn returns sess as a network.MuxedConn, for sessions made with
// braid.Client or braid.Server directly; a nil sess is ErrNilSession.
// Memory accounting is whatever sess was configured with, and closing the
// MuxedConn closes sess. Transport.NewConn is the usual way to get a
// MuxedConn.
func NewMuxedConn(sess *braid.Session) (network.MuxedConn, error) {
	if sess == nil {
		return nil, ErrNilSession
	}
	return &conn{sess: sess}, nil
}

// newConn wraps sess; when span is not nil, it ends the span once the
// session has ended, however it ends.
func newConn(sess *braid.Session, span network.ResourceScopeSpan) *conn {
	c := &conn{sess: sess, span: span}
	if span != nil {
		go c.watch()
	}
	return c
}

// watch ends the span when the session ends on its own: the peer closed
// it, the connection failed, the keep-alive timed out. braid has no hook
// for that, so a goroutine waits on the session's close channel; it costs
// a parked goroutine per connection that has a scope.
func (c *conn) watch() {
	<-c.sess.CloseChan()
	if c.localClose.Load() {
		return // Close ends the span after the session is done.
	}
	// Close, even a second one, returns once the session has released
	// all the memory it reserved and will reserve no more.
	_ = c.sess.Close()
	c.endSpan()
}

// endSpan ends the span, once.
func (c *conn) endSpan() {
	if c.span != nil {
		c.spanOnce.Do(c.span.Done)
	}
}

// Close closes the session and the underlying connection: the peer gets a
// normal go-away, open streams are reset, and all memory reserved for the
// connection is released.
func (c *conn) Close() error {
	c.localClose.Store(true)
	err := c.sess.Close()
	c.endSpan()
	return err
}

// CloseWithError closes like Close, sending code in the go-away; the peer's
// streams and calls fail with a *network.ConnError carrying it, and ours
// with one carrying it too. mplex has no go-away: there the peer sees the
// connection end, and its streams fail with network.ErrReset.
func (c *conn) CloseWithError(code network.ConnErrorCode) error {
	c.localClose.Store(true)
	err := c.sess.CloseWithError(uint32(code))
	c.endSpan()
	return err
}

// IsClosed reports whether the session is closed or closing, or can no
// longer open streams because the peer sent a go-away. go-libp2p's swarm
// leaves a closed connection out when it picks one for a new stream, and
// when OpenStream fails it dials again only if IsClosed is true. Without
// the go-away here, a host would fail every new stream to a peer that
// drains its streams after a go-away (js-libp2p's graceful close) instead
// of dialing it again, as it does with go-yamux, whose session ends at the
// go-away. The streams already open go on.
func (c *conn) IsClosed() bool { return c.sess.IsClosed() || c.sess.RemoteGoAway() }

// OpenStream opens a new stream; errors are mapped by parseError.
func (c *conn) OpenStream(ctx context.Context) (network.MuxedStream, error) {
	s, err := c.sess.OpenStream(ctx)
	if err != nil {
		return nil, parseError(err)
	}
	return (*stream)(s), nil
}

// AcceptStream waits for a stream the peer opens; errors are mapped by
// parseError.
func (c *conn) AcceptStream() (network.MuxedStream, error) {
	s, err := c.sess.AcceptStream()
	if err != nil {
		return nil, parseError(err)
	}
	return (*stream)(s), nil
}

// As sets target, which must be a non-nil **braid.Session, to the
// underlying braid session and reports whether it did, like errors.As.
func (c *conn) As(target any) bool {
	if t, ok := target.(**braid.Session); ok && t != nil {
		*t = c.sess
		return true
	}
	return false
}
