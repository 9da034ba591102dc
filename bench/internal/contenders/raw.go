package contenders

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// RawTCP is the limit every multiplexer is measured against: each "stream"
// is a TCP connection of its own on loopback, written directly.
func RawTCP() Contender {
	return Contender{Name: "tcp", New: func(c1, c2 net.Conn) (Session, Session, error) {
		// The conns given carry nothing; streams get fresh connections.
		c1.Close()
		c2.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		shared := &rawShared{ln: ln, accepted: make(chan net.Conn, rawAcceptBacklog), done: make(chan struct{})}
		return &rawClient{shared}, &rawServer{shared}, nil
	}}
}

// rawAcceptBacklog bounds connections opened and not yet accepted; the
// workloads open at most a few hundred at once.
const rawAcceptBacklog = 1024

// rawShared is the listener both sides use. Close by either side closes it.
type rawShared struct {
	ln       net.Listener
	accepted chan net.Conn
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
	select {
	case r.accepted <- sc:
	default:
		c.Close()
		sc.Close()
		return nil, errors.New("raw tcp: accept backlog full")
	}
	return rawStream{c.(*net.TCPConn), &r.writes}, nil
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
		return rawStream{c.(*net.TCPConn), &r.writes}, nil
	case <-r.done:
		return nil, net.ErrClosed
	}
}
func (r *rawServer) Close() error   { return r.close() }
func (r *rawServer) Writes() uint64 { return r.writes.Load() }

type rawStream struct {
	*net.TCPConn
	writes *atomic.Uint64
}

func (s rawStream) Write(b []byte) (int, error) {
	s.writes.Add(1)
	return s.TCPConn.Write(b)
}
