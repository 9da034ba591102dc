package contenders

import (
	"context"
	"io"
	"net"
	"sync/atomic"

	yamux "github.com/libp2p/go-yamux/v5"
)

// Yamux is go-yamux v5 with its default config (as go-libp2p uses it, less
// the resource manager), logging off.
func Yamux() Contender { return YamuxConfig("yamux", nil) }

// YamuxConfig is go-yamux with its default config changed by tune.
func YamuxConfig(name string, tune func(*yamux.Config)) Contender {
	return Contender{Name: name, New: func(c1, c2 net.Conn) (Session, Session, error) {
		cfg := yamux.DefaultConfig()
		cfg.LogOutput = io.Discard
		if tune != nil {
			tune(cfg)
		}
		cw, sw := new(atomic.Uint64), new(atomic.Uint64)
		client, err := yamux.Client(countingConn{c1, cw}, cfg, nil)
		if err != nil {
			return nil, nil, err
		}
		server, err := yamux.Server(countingConn{c2, sw}, cfg, nil)
		if err != nil {
			client.Close()
			return nil, nil, err
		}
		return yamuxSession{client, cw}, yamuxSession{server, sw}, nil
	}}
}

type yamuxSession struct {
	s      *yamux.Session
	writes *atomic.Uint64
}

func (y yamuxSession) Open(ctx context.Context) (Stream, error) { return y.s.OpenStream(ctx) }
func (y yamuxSession) Accept() (Stream, error)                  { return y.s.AcceptStream() }
func (y yamuxSession) Close() error                             { return y.s.Close() }
func (y yamuxSession) Writes() uint64                           { return y.writes.Load() }
