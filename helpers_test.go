package braid

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
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

// maxFloodPongs bounds the pongs a session answers to a ping flood from a
// peer that reads nothing until the flood is read: on a conn without
// writev (net.Pipe, as the flood tests use) the writer keeps each batch's
// final partial record for the next batch (writeFlat), so its first write
// that can block comes only once a whole record of pongs is buffered (less
// than a record kept, and one batch of at most maxQueuedPongs); then at most
// maxQueuedPongs more queue behind the blocked write, and the rest of the
// flood is dropped. So the bound is a record's worth of pongs and two
// batches, not the unbounded queue the tests rule out.
func maxFloodPongs() int {
	return (recordSize-1)/headerSize + 2*maxQueuedPongs
}

// echoMessages writes back each size-byte message st brings, until the
// peer's FIN at a message's boundary (nil) or an error.
func echoMessages(st *Stream, size int) error {
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(st, buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if _, err := st.Write(buf); err != nil {
			return err
		}
	}
}

// pingRoundTrips writes n size-byte messages on st, each different, and
// requires each back unchanged (echoMessages) before the next.
func pingRoundTrips(t *testing.T, st *Stream, n, size int) {
	t.Helper()
	msg, got := make([]byte, size), make([]byte, size)
	for i := range n {
		for j := range msg {
			msg[j] = byte(i + j)
		}
		_, err := st.Write(msg)
		require.NoError(t, err)
		_, err = io.ReadFull(st, got)
		require.NoError(t, err)
		require.True(t, bytes.Equal(msg, got), "round trip %d", i)
	}
}
