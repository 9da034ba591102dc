package contenders

import (
	"context"
	"io"
	"net"
	"sync/atomic"

	hyamux "github.com/hashicorp/yamux"
)

// Hashicorp is hashicorp/yamux with its default config, logging off.
func Hashicorp() Contender { return HashicorpConfig("hashicorp", nil) }

// HashicorpConfig is hashicorp/yamux with its default config changed by
// tune.
func HashicorpConfig(name string, tune func(*hyamux.Config)) Contender {
	return Contender{Name: name, New: func(c1, c2 net.Conn) (Session, Session, error) {
		cfg := hyamux.DefaultConfig()
		cfg.LogOutput = io.Discard
		if tune != nil {
			tune(cfg)
		}
		cw, sw := new(atomic.Uint64), new(atomic.Uint64)
		client, err := hyamux.Client(countingConn{c1, cw}, cfg)
		if err != nil {
			c1.Close()
			c2.Close()
			return nil, nil, err
		}
		server, err := hyamux.Server(countingConn{c2, sw}, cfg)
		if err != nil {
			client.Close()
			c2.Close()
			return nil, nil, err
		}
		return hashicorpSession{client, cw}, hashicorpSession{server, sw}, nil
	}}
}

type hashicorpSession struct {
	s      *hyamux.Session
	writes *atomic.Uint64
}

// Open opens a stream; hashicorp's OpenStream takes no context.
func (h hashicorpSession) Open(context.Context) (Stream, error) {
	s, err := h.s.OpenStream()
	if err != nil {
		return nil, err
	}
	return hashicorpStream{s}, nil
}

func (h hashicorpSession) Accept() (Stream, error) {
	s, err := h.s.AcceptStream()
	if err != nil {
		return nil, err
	}
	return hashicorpStream{s}, nil
}

func (h hashicorpSession) Close() error   { return h.s.Close() }
func (h hashicorpSession) Writes() uint64 { return h.writes.Load() }

// hashicorpStream adds CloseWrite: hashicorp's Close is already a
// half-close (it sends FIN and keeps reading).
type hashicorpStream struct{ *hyamux.Stream }

func (s hashicorpStream) CloseWrite() error { return s.Stream.Close() }
