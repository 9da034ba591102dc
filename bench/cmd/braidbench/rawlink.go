package main

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/slowconn"
)

// rawLink is the raw-TCP limit over a simulated link: like
// contenders.RawTCP each stream is a connection of its own, here a fresh
// slowconn.Pipe over link. The TCP handshake is not modelled: the limit
// gets its connections for free.
func rawLink(link slowconn.Link) contenders.Contender {
	return contenders.Contender{Name: rawName, New: func(c1, c2 net.Conn) (contenders.Session, contenders.Session, error) {
		c1.Close() // streams get fresh pipes
		c2.Close()
		s := &rawLinkShared{link: link, accepted: make(chan net.Conn, rawLinkBacklog), done: make(chan struct{})}
		return rawLinkClient{s}, rawLinkServer{s}, nil
	}}
}

// rawLinkBacklog bounds streams opened and not yet accepted.
const rawLinkBacklog = 64

type rawLinkShared struct {
	link     slowconn.Link
	accepted chan net.Conn
	done     chan struct{} // closed by close
	writes   atomic.Uint64
	once     sync.Once
	mu       sync.Mutex // guards conns
	conns    []net.Conn
}

func (r *rawLinkShared) close() error {
	r.once.Do(func() {
		close(r.done)
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.conns {
			c.Close()
		}
	})
	return nil
}

func (r *rawLinkShared) Writes() uint64 { return r.writes.Load() }
func (r *rawLinkShared) Close() error   { return r.close() }

type rawLinkClient struct{ *rawLinkShared }

func (r rawLinkClient) Open(context.Context) (contenders.Stream, error) {
	a, b := slowconn.Pipe(r.link)
	r.mu.Lock()
	r.conns = append(r.conns, a, b)
	r.mu.Unlock()
	select {
	case r.accepted <- b:
	case <-r.done:
		return nil, net.ErrClosed
	default:
		return nil, errors.New("raw link: accept backlog full")
	}
	return rawLinkStream{a.(halfCloser), &r.writes}, nil
}

func (r rawLinkClient) Accept() (contenders.Stream, error) {
	return nil, errors.New("raw link: only the client opens")
}

type rawLinkServer struct{ *rawLinkShared }

func (r rawLinkServer) Open(context.Context) (contenders.Stream, error) {
	return nil, errors.New("raw link: only the client opens")
}

func (r rawLinkServer) Accept() (contenders.Stream, error) {
	select {
	case c := <-r.accepted:
		return rawLinkStream{c.(halfCloser), &r.writes}, nil
	case <-r.done:
		return nil, net.ErrClosed
	}
}

// halfCloser is a conn with CloseWrite, as slowconn's are.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

type rawLinkStream struct {
	halfCloser
	writes *atomic.Uint64
}

func (s rawLinkStream) Write(b []byte) (int, error) {
	s.writes.Add(1)
	return s.halfCloser.Write(b)
}
