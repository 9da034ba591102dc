package hostbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/libp2pmux"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// stream is what a scenario reads and writes: a libp2p stream or a TCP
// connection.
type stream interface {
	io.ReadWriteCloser
	CloseWrite() error
	SetDeadline(time.Time) error
}

// scenarioProtocol is the protocol id the hosts serve a scenario under.
func scenarioProtocol(s Scenario) protocol.ID {
	return protocol.ID("/braidbench/" + string(s) + "/1.0.0")
}

// endpoints are a client and a server connected as a Spec asks: two hosts
// with one connection between them, or a raw TCP listener. The server
// runs handler on every stream the client opens.
type endpoints struct {
	open func(ctx context.Context) (stream, error)
	// serverErr receives the first error a handler returns.
	serverErr chan error
	closers   []func()
	wg        sync.WaitGroup // the raw server's goroutines
}

// close ends everything, last started first.
func (ep *endpoints) close() {
	for i := len(ep.closers) - 1; i >= 0; i-- {
		ep.closers[i]()
	}
	ep.wg.Wait()
}

// openStream opens a stream to the server and puts ctx's deadline, if
// any, on it.
func (ep *endpoints) openStream(ctx context.Context) (stream, error) {
	st, err := ep.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(d)
	}
	return st, nil
}

// fail records a handler's error; only the first is kept.
func (ep *endpoints) fail(err error) {
	select {
	case ep.serverErr <- err:
	default:
	}
}

// serverError returns the handler's error, if any, added to err.
func (ep *endpoints) serverError(err error) error {
	select {
	case serr := <-ep.serverErr:
		return fmt.Errorf("%w (server: %v)", err, serr)
	default:
		return err
	}
}

// newEndpoints connects a client to a server running handler.
func newEndpoints(ctx context.Context, s Spec, handler func(stream) error) (*endpoints, error) {
	ep := &endpoints{serverErr: make(chan error, 1)}
	var err error
	if s.Muxer == RawTCP {
		err = ep.startRaw(s, handler)
	} else {
		err = ep.startHosts(ctx, s, handler)
	}
	if err != nil {
		ep.close()
		return nil, err
	}
	return ep, nil
}

// startRaw listens on loopback and serves a TCP connection per stream.
func (ep *endpoints) startRaw(s Spec, handler func(stream) error) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var mu sync.Mutex // guards conns and closed
	var conns []net.Conn
	closed := false
	ep.closers = append(ep.closers, func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	ep.wg.Add(1)
	go func() {
		defer ep.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns = append(conns, c)
			mu.Unlock()
			ep.wg.Add(1)
			go func() {
				defer ep.wg.Done()
				defer c.Close()
				if err := handler(c.(*net.TCPConn)); err != nil {
					ep.fail(err)
				}
			}()
		}
	}()
	target := ln.Addr().String()
	if s.shaped() {
		p, err := startProxy(target, s.Link)
		if err != nil {
			return err
		}
		ep.closers = append(ep.closers, p.close)
		target = p.addr().String()
	}
	var d net.Dialer
	ep.open = func(ctx context.Context) (stream, error) {
		c, err := d.DialContext(ctx, "tcp", target)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return c.(*net.TCPConn), nil
	}
	return nil
}

// startHosts builds two hosts with s's muxer, connects them (through a
// shaped proxy if s has a link) and waits until each has identified the
// other, so that the timed work does not share the link with identify.
func (ep *endpoints) startHosts(ctx context.Context, s Spec, handler func(stream) error) error {
	listener, err := newHost(s.Muxer, s.Security, true)
	if err != nil {
		return err
	}
	ep.closers = append(ep.closers, func() { listener.Close() })
	dialer, err := newHost(s.Muxer, s.Security, false)
	if err != nil {
		return err
	}
	ep.closers = append(ep.closers, func() { dialer.Close() })
	proto := scenarioProtocol(s.Scenario)
	listener.SetStreamHandler(proto, func(st network.Stream) {
		if err := handler(st); err != nil {
			ep.fail(err)
			_ = st.Reset()
			return
		}
		_ = st.Close()
	})
	addrs := listener.Addrs()
	if s.shaped() {
		target, err := tcpAddr(addrs)
		if err != nil {
			return err
		}
		p, err := startProxy(target, s.Link)
		if err != nil {
			return err
		}
		ep.closers = append(ep.closers, p.close)
		pa, err := manet.FromNetAddr(p.addr())
		if err != nil {
			return err
		}
		addrs = []ma.Multiaddr{pa}
	}
	var subs []event.Subscription
	for _, h := range []host.Host{dialer, listener} {
		sub, err := h.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
		if err != nil {
			return err
		}
		ep.closers = append(ep.closers, func() { sub.Close() })
		subs = append(subs, sub)
	}
	dialer.Peerstore().AddAddrs(listener.ID(), addrs, peerstore.PermanentAddrTTL)
	if err := dialer.Connect(ctx, peer.AddrInfo{ID: listener.ID()}); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if err := checkMuxer(dialer, listener.ID(), s.Muxer); err != nil {
		return err
	}
	for _, sub := range subs {
		select {
		case <-sub.Out():
		case <-ctx.Done():
			return fmt.Errorf("waiting for identify: %w", context.Cause(ctx))
		}
	}
	ep.open = func(ctx context.Context) (stream, error) {
		return dialer.NewStream(ctx, listener.ID(), proto)
	}
	return nil
}

// newHost builds a go-libp2p host on loopback TCP with security sec and
// muxer m, otherwise as libp2p.New makes it; a listener listens on a free
// port.
func newHost(m Muxer, sec Security, listen bool) (host.Host, error) {
	opts := []libp2p.Option{
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.DisableRelay(),
	}
	if sec == TLS {
		opts = append(opts, libp2p.Security(libp2ptls.ID, libp2ptls.New))
	} else {
		opts = append(opts, libp2p.Security(noise.ID, noise.New))
	}
	if listen {
		opts = append(opts, libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	} else {
		opts = append(opts, libp2p.NoListenAddrs)
	}
	switch m {
	case Braid:
		opts = append(opts, libp2p.Muxer(libp2pmux.ID, libp2pmux.DefaultTransport))
	case BraidNoCoalesce:
		cfg := libp2pmux.DefaultConfig()
		cfg.DisableCoalescing = true
		t, err := libp2pmux.NewTransport(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, libp2p.Muxer(libp2pmux.ID, t))
	case Yamux:
		opts = append(opts, libp2p.Muxer(yamux.ID, yamux.DefaultTransport))
	default:
		return nil, fmt.Errorf("%w: muxer %q has no host", ErrSpec, m)
	}
	return libp2p.New(opts...)
}

// checkMuxer makes sure the connection to p runs the muxer asked for, so
// that a mislabelled result can't happen.
func checkMuxer(h host.Host, p peer.ID, m Muxer) error {
	conns := h.Network().ConnsToPeer(p)
	if len(conns) != 1 {
		return fmt.Errorf("%d connections to the peer, want 1", len(conns))
	}
	var bs *braid.Session
	isBraid := conns[0].As(&bs) && bs != nil
	if want := m != Yamux; isBraid != want {
		return fmt.Errorf("connection runs braid = %v, want %v for %s", isBraid, want, m)
	}
	return nil
}

// tcpAddr is the host:port of the first TCP address in addrs.
func tcpAddr(addrs []ma.Multiaddr) (string, error) {
	for _, a := range addrs {
		na, err := manet.ToNetAddr(a)
		if err != nil {
			continue
		}
		if t, ok := na.(*net.TCPAddr); ok {
			return t.String(), nil
		}
	}
	return "", errors.New("listener has no TCP address")
}
