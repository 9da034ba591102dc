package contenders

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/xtaci/smux"
)

// Smux is xtaci/smux with its default config (protocol version 1) and
// keep-alive off, so that no timer fires during a measurement.
func Smux() Contender {
	return Contender{Name: "smux", New: func(c1, c2 net.Conn) (Session, Session, error) {
		cfg := smux.DefaultConfig()
		cfg.KeepAliveDisabled = true
		cw, sw := new(atomic.Uint64), new(atomic.Uint64)
		// countingConn has no WriteBuffers, so smux writes each frame with
		// one Write and every conn write is counted.
		client, err := smux.Client(countingConn{c1, cw}, cfg)
		if err != nil {
			c1.Close()
			c2.Close()
			return nil, nil, err
		}
		server, err := smux.Server(countingConn{c2, sw}, cfg)
		if err != nil {
			client.Close()
			c2.Close()
			return nil, nil, err
		}
		return smuxSession{client, cw}, smuxSession{server, sw}, nil
	}}
}

type smuxSession struct {
	s      *smux.Session
	writes *atomic.Uint64
}

// Open opens a stream; smux's OpenStream takes no context.
func (s smuxSession) Open(context.Context) (Stream, error) { return s.s.OpenStream() }
func (s smuxSession) Accept() (Stream, error)              { return s.s.AcceptStream() }
func (s smuxSession) Close() error                         { return s.s.Close() }
func (s smuxSession) Writes() uint64                       { return s.writes.Load() }
