package contenders

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/braidmux/braid/internal/tlstest"
)

// RawTCP is the limit every multiplexer is measured against: each "stream"
// is a TCP connection of its own on loopback, written directly.
// Over TLS (see TLS) each connection is secured on its own.
func RawTCP() Contender {
	c := raw(false)
	c.overTLS = func() Contender { return raw(true) }
	return c
}

// raw is RawTCP, its connections secured with TLS if secure.
func raw(secure bool) Contender {
	return Contender{Name: "tcp", New: func(c1, c2 net.Conn) (Session, Session, error) {
		// The conns given carry nothing; streams get fresh connections.
		c1.Close()
		c2.Close()
		var sec *tlstest.Securer
		if secure {
			var err error
			if sec, err = tlstest.New(); err != nil {
				return nil, nil, err
			}
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		shared := &rawShared{ln: ln, sec: sec, accepted: make(chan halfCloser, rawAcceptBacklog), done: make(chan struct{})}
		return &rawClient{shared}, &rawServer{shared}, nil
	}}
}

// halfCloser is a connection with half-close: *net.TCPConn and *tls.Conn.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// rawAcceptBacklog bounds connections opened and not yet accepted; the
// workloads open at most a few hundred at once.
const rawAcceptBacklog = 1024

// rawShared is the listener both sides use. Close by either side closes it.
type rawShared struct {
	ln       net.Listener
	sec      *tlstest.Securer // nil: plain TCP
	accepted chan halfCloser
	done     chan struct{} // closed by close
	writes   atomic.Uint64
	once     sync.Once
	mu       sync.Mutex // guards conns
	conns    []net.Conn
}

func (r *rawShared) close() error {
	r.once.Do(func() {
		close(r.done)
		r.ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
	})
	return nil
}

func (r *rawShared) track(c net.Conn) {
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

type rawClient struct{ *rawShared }

func (r *rawClient) Open(ctx context.Context) (Stream, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", r.ln.Addr().String())
	if err != nil {
		return nil, err
	}
	r.track(c)
	sc, err := r.ln.Accept()
	if err != nil {
		c.Close()
		return nil, err
	}
	r.track(sc)
	var cc, ac halfCloser = c.(*net.TCPConn), sc.(*net.TCPConn)
	if r.sec != nil {
		if cc, ac, err = r.sec.Pair(c, sc); err != nil {
			return nil, err
		}
	}
	select {
	case r.accepted <- ac:
	default:
		c.Close()
		sc.Close()
		return nil, errors.New("raw tcp: accept backlog full")
	}
	return rawStream{cc, &r.writes}, nil
}

func (r *rawClient) Accept() (Stream, error) {
	return nil, errors.New("raw tcp: only the client opens")
}
func (r *rawClient) Close() error   { return r.close() }
func (r *rawClient) Writes() uint64 { return r.writes.Load() }

type rawServer struct{ *rawShared }

func (r *rawServer) Open(context.Context) (Stream, error) {
	return nil, errors.New("raw tcp: only the client opens")
}

func (r *rawServer) Accept() (Stream, error) {
	select {
	case c := <-r.accepted:
		return rawStream{c, &r.writes}, nil
	case <-r.done:
		return nil, net.ErrClosed
	}
}
func (r *rawServer) Close() error   { return r.close() }
func (r *rawServer) Writes() uint64 { return r.writes.Load() }

type rawStream struct {
	halfCloser
	writes *atomic.Uint64
}

func (s rawStream) Write(b []byte) (int, error) {
	s.writes.Add(1)
	return s.halfCloser.Write(b)
}
