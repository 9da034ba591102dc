package contenders

import (
	"context"
	"net"
	"sync/atomic"

	mplex "github.com/libp2p/go-mplex"
)

// Mplex is go-mplex v0.7.0 as go-libp2p used it, without a memory manager
// (every buffer it asks for is granted).
func Mplex() Contender {
	return Contender{Name: "mplex", New: func(c1, c2 net.Conn) (Session, Session, error) {
		cw, sw := new(atomic.Uint64), new(atomic.Uint64)
		client, err := mplex.NewMultiplex(countingConn{c1, cw}, true, nil)
		if err != nil {
			c1.Close()
			c2.Close()
			return nil, nil, err
		}
		server, err := mplex.NewMultiplex(countingConn{c2, sw}, false, nil)
		if err != nil {
			client.Close()
			c2.Close()
			return nil, nil, err
		}
		return mplexSession{client, cw}, mplexSession{server, sw}, nil
	}}
}

type mplexSession struct {
	m      *mplex.Multiplex
	writes *atomic.Uint64
}

func (m mplexSession) Open(ctx context.Context) (Stream, error) { return m.m.NewStream(ctx) }
func (m mplexSession) Accept() (Stream, error)                  { return m.m.Accept() }
func (m mplexSession) Close() error                             { return m.m.Close() }
func (m mplexSession) Writes() uint64                           { return m.writes.Load() }
