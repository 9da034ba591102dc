package slowconn

import (
	"net"
	"testing"

	"golang.org/x/net/nettest"
)

// TestConnContract runs the standard net.Conn conformance suite over Pipe
// and Wrap.
func TestConnContract(t *testing.T) {
	pipe := func(l Link) nettest.MakePipe {
		return func() (net.Conn, net.Conn, func(), error) {
			a, b := Pipe(l)
			return a, b, func() { a.Close(); b.Close() }, nil
		}
	}
	wrap := func(l Link, base func() (net.Conn, net.Conn, error)) nettest.MakePipe {
		return func() (net.Conn, net.Conn, func(), error) {
			a, b, err := base()
			if err != nil {
				return nil, nil, nil, err
			}
			wa, wb := Wrap(a, l), Wrap(b, l)
			// Close both ends at once: a Close lingers while the peer
			// neither reads nor closes, as it would over TCP.
			stop := func() {
				done := make(chan struct{})
				go func() { wa.Close(); close(done) }()
				wb.Close()
				<-done
			}
			return wa, wb, stop, nil
		}
	}
	memPipe := func() (net.Conn, net.Conn, error) {
		a, b := net.Pipe()
		return a, b, nil
	}
	// Jitter, without loss: PingPong makes 1000 round trips.
	jittery := LAN()
	jittery.Jitter = jittery.Latency / 2
	t.Run("Pipe/Unlimited", func(t *testing.T) { nettest.TestConn(t, pipe(Unlimited())) })
	t.Run("Pipe/LAN", func(t *testing.T) { nettest.TestConn(t, pipe(LAN())) })
	t.Run("Pipe/LANJitter", func(t *testing.T) { nettest.TestConn(t, pipe(jittery)) })
	t.Run("Wrap/NetPipe", func(t *testing.T) { nettest.TestConn(t, wrap(LAN(), memPipe)) })
	t.Run("Wrap/TCP", func(t *testing.T) { nettest.TestConn(t, wrap(LAN(), tcpPair)) })
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair() (net.Conn, net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type result struct {
		c   net.Conn
		err error
	}
	accepted := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		accepted <- result{c, err}
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	r := <-accepted
	if r.err != nil {
		a.Close()
		return nil, nil, r.err
	}
	return a, r.c, nil
}
