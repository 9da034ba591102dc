package contenders

import (
	"context"
	"net"

	"github.com/braidmux/braid"
)

// Braid is braid with coalescing on or off, otherwise default.
func Braid(coalesce bool) Contender {
	name := "braid"
	if !coalesce {
		name = "braid-nocoalesce"
	}
	return BraidConfig(name, func(c *braid.Config) { c.DisableCoalescing = !coalesce })
}

// BraidConfig is braid with a default Config changed by tune.
func BraidConfig(name string, tune func(*braid.Config)) Contender {
	return Contender{Name: name, New: func(c1, c2 net.Conn) (Session, Session, error) {
		cfg := braid.DefaultConfig()
		if tune != nil {
			tune(cfg)
		}
		client, err := braid.Client(c1, cfg)
		if err != nil {
			return nil, nil, err
		}
		server, err := braid.Server(c2, cfg)
		if err != nil {
			client.Close()
			return nil, nil, err
		}
		return braidSession{client}, braidSession{server}, nil
	}}
}

type braidSession struct{ s *braid.Session }

func (b braidSession) Open(ctx context.Context) (Stream, error) { return b.s.OpenStream(ctx) }
func (b braidSession) Accept() (Stream, error)                  { return b.s.AcceptStream() }
func (b braidSession) Close() error                             { return b.s.Close() }
func (b braidSession) Writes() uint64                           { return b.s.Stats().Writes }
