package hostbench

import (
	"errors"
	"io"
	"net"
	"sync"

	"github.com/braidmux/braid/slowconn"
)

// proxy forwards TCP connections on loopback to target through a
// simulated link: each connection it accepts is paired with one it dials
// to target, and both directions go through slowconn.Wrap. go-libp2p's
// TCP transport dials real sockets, so the link sits between them rather
// than under them.
type proxy struct {
	ln     net.Listener
	target string
	link   slowconn.Link

	wg sync.WaitGroup // the accept loop and two copy goroutines per pair

	mu     sync.Mutex // guards conns and closed
	conns  []net.Conn
	closed bool
}

// startProxy listens on a loopback port and forwards to target over link.
// Its goroutines run until close.
func startProxy(target string, link slowconn.Link) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, link: link}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// addr is the address to dial instead of the target.
func (p *proxy) addr() *net.TCPAddr { return p.ln.Addr().(*net.TCPAddr) }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		a, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			a.Close()
			continue
		}
		wa, wb := slowconn.Wrap(a, p.link), slowconn.Wrap(b, p.link)
		if !p.track(wa, wb) {
			wa.Close()
			wb.Close()
			return
		}
		var pair sync.WaitGroup
		pair.Add(2)
		p.wg.Add(2)
		go p.copy(wb, wa, &pair)
		go p.copy(wa, wb, &pair)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pair.Wait()
			wa.Close()
			wb.Close()
		}()
	}
}

// track records a pair for close; false once the proxy is closed.
func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns = append(p.conns, cs...)
	return true
}

// copy moves src's bytes to dst, then half-closes dst as src's peer did.
func (p *proxy) copy(dst, src net.Conn, pair *sync.WaitGroup) {
	defer p.wg.Done()
	defer pair.Done()
	if _, err := io.Copy(dst, src); err != nil && !errors.Is(err, net.ErrClosed) {
		dst.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// close stops the proxy and every connection through it, and waits for
// its goroutines.
func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
