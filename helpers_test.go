package braid

import (
	"net"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	c1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return c1, r.c
}

// sessionPair returns a client and a server session over loopback TCP,
// closed when the test ends.
func sessionPair(t testing.TB, cfg *Config) (*Session, *Session) {
	t.Helper()
	c1, c2 := tcpPair(t)
	return sessionPairOver(t, c1, c2, cfg)
}

func sessionPairOver(t testing.TB, c1, c2 net.Conn, cfg *Config) (*Session, *Session) {
	t.Helper()
	client, err := Client(c1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	server, err := Server(c2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server
}
