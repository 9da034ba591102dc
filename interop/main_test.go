package interop_test

import (
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// deadlineIn is the deadline of a call in a test that must not hang.
func deadlineIn() time.Time { return time.Now().Add(30 * time.Second) }

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tcpPair returns the two ends of a loopback TCP connection, closed when
// the test ends (closing one twice is harmless).
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
		c1.Close()
		t.Fatal(r.err)
	}
	t.Cleanup(func() {
		c1.Close()
		r.c.Close()
	})
	return c1, r.c
}

// readErr reads r until an error and returns it.
func readErr(r io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		if _, err := r.Read(buf); err != nil {
			return err
		}
	}
}
