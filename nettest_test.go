package braid

import (
	"context"
	"net"
	"testing"

	"golang.org/x/net/nettest"
)

// TestStreamNetConn runs golang.org/x/net/nettest's net.Conn conformance
// suite (deadlines, Close while blocked, concurrent use, io.EOF after
// close, ...) on a pair of braid streams, over TCP, TLS and net.Pipe, with
// yamux and with mplex.
func TestStreamNetConn(t *testing.T) {
	conns := connTypes()
	conns["tls"] = func(t testing.TB) (net.Conn, net.Conn) {
		c1, c2 := tlsPair(t)
		return c1, c2
	}
	for name, mk := range conns {
		for codec, cfg := range map[string]*Config{"yamux": nil, "mplex": mplexConfig()} {
			t.Run(name+"/"+codec, func(t *testing.T) {
				nettest.TestConn(t, func() (net.Conn, net.Conn, func(), error) {
					c1, c2 := mk(t)
					return braidStreamPair(c1, c2, cfg)
				})
			})
		}
	}
}

// braidStreamPair opens a stream between two fresh braid sessions over
// c1/c2 with cfg (nil for the defaults); stop closes the streams and the
// sessions.
func braidStreamPair(c1, c2 net.Conn, cfg *Config) (net.Conn, net.Conn, func(), error) {
	client, err := Client(c1, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	server, err := Server(c2, cfg)
	if err != nil {
		client.Close()
		return nil, nil, nil, err
	}
	stop := func() {
		client.Close()
		server.Close()
	}
	a, err := client.OpenStream(context.Background())
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	b, err := server.AcceptStream()
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return a, b, func() {
		a.Close()
		b.Close()
		stop()
	}, nil
}
