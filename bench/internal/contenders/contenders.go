// Package contenders puts braid and the multiplexers it is measured against
// behind one small interface, so that the benchmarks, the slowdown tests and
// the report tool measure every one the same way. Adding a contender is one
// file with one constructor.
package contenders

import (
	"context"
	"io"
	"net"
	"sync/atomic"
)

// Stream is what every multiplexer's stream offers.
type Stream interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// Session is one side of a multiplexed connection.
type Session interface {
	Open(ctx context.Context) (Stream, error)
	Accept() (Stream, error)
	Close() error
	// Writes returns the calls that reached the conn so far.
	Writes() uint64
}

// Contender makes the two sides of a multiplexed connection over two
// connected conns.
type Contender struct {
	Name string
	// New takes ownership of both conns: client runs over c1, server over c2.
	New func(c1, c2 net.Conn) (client, server Session, err error)
	// overTLS, if set, is this contender over TLS (see TLS), for
	// contenders that make conns of their own.
	overTLS func() Contender
}

// countingConn counts the Write calls that reach a conn, for multiplexers
// that don't count their own. It hides writev (net.Buffers falls back to one
// Write per buffer), so it is only used for multiplexers that never use it.
type countingConn struct {
	net.Conn
	writes *atomic.Uint64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}
