package libp2pmux

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	tmux "github.com/libp2p/go-libp2p/p2p/muxer/testsuite"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	mplex "github.com/libp2p/go-mplex"
)

func TestMplexTransport(t *testing.T) {
	if MplexID != braid.Mplex.String() {
		t.Fatalf("MplexID %q, braid.Mplex %q", MplexID, braid.Mplex.String())
	}
	cfg := MplexTransport.Config()
	if cfg.Protocol != braid.Mplex {
		t.Fatalf("MplexTransport speaks %v", cfg.Protocol)
	}
	if cfg.AcceptBacklog != hostMplexAcceptBacklog {
		t.Fatalf("accept backlog %d", cfg.AcceptBacklog)
	}
	// Everything else is DefaultConfig's.
	cfg.Protocol = braid.Yamux
	cfg.AcceptBacklog = DefaultConfig().AcceptBacklog
	if *cfg != *DefaultConfig() {
		t.Fatalf("MplexConfig differs from DefaultConfig beyond the protocol: %+v", cfg)
	}
	if DefaultTransport.Config().Protocol != braid.Yamux {
		t.Fatal("DefaultTransport changed protocol")
	}
	// MplexConfig returns a fresh copy each time.
	c := MplexConfig()
	c.MaxReceiveBuffer = 1
	if MplexConfig().MaxReceiveBuffer != braid.DefaultMaxReceiveBuffer || MplexTransport.Config().MaxReceiveBuffer != braid.DefaultMaxReceiveBuffer {
		t.Fatal("MplexConfig is shared")
	}
	// The sessions it makes speak mplex: no pings.
	a, b := net.Pipe()
	mc, err := MplexTransport.NewConn(a, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	ms, err := MplexTransport.NewConn(b, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	var sess *braid.Session
	if !mc.As(&sess) {
		t.Fatal("not a braid session")
	}
	if _, err := sess.Ping(); !errors.Is(err, braid.ErrNotSupported) {
		t.Fatalf("Ping on an mplex session: %v", err)
	}
}

// TestMplexConformance runs go-libp2p v0.52.0's muxer conformance suite,
// all of it, against MplexTransport. All 11 subtests pass. One needs
// MplexConfig's larger accept backlog: SubtestStress1Conn1000Stream10Msg
// opens 1000 streams at once, and mplex has no stream ACK to make the
// opener wait, so with braid's default backlog of 256 the streams that
// arrive while 256 wait for AcceptStream are reset (go-mplex instead
// stops reading the whole connection until its accept loop catches up).
// TestMplexAcceptBacklogBurst in the braid package shows the refusal.
func TestMplexConformance(t *testing.T) {
	if n := len(tmux.Subtests); n != conformanceSubtests {
		t.Fatalf("the suite has %d subtests, want %d", n, conformanceSubtests)
	}
	tmux.SubtestAll(t, MplexTransport)
}

// TestMplexConformanceMemory runs every subtest again with a counting peer
// scope on both sides: all memory reserved is released, every span ends.
func TestMplexConformanceMemory(t *testing.T) {
	names := make([]string, 0, len(tmux.Subtests))
	for name := range tmux.Subtests {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			scope := &countingScope{}
			tmux.Subtests[name](t, scopedTransport{tr: MplexTransport, scope: scope})
			scope.check(t, !strings.HasSuffix(name, ".SubtestWriteAfterClose"))
		})
	}
}

// goMplexTransport is go-mplex v0.7.0 as a network.Multiplexer, as
// go-libp2p's own mplex adapter was before go-libp2p dropped it: the
// reference implementation for the host test.
type goMplexTransport struct{}

func (goMplexTransport) NewConn(nc net.Conn, isServer bool, scope network.PeerScope) (network.MuxedConn, error) {
	var mm mplex.MemoryManager
	if scope != nil {
		mm = scope
	}
	m, err := mplex.NewMultiplex(nc, !isServer, mm)
	if err != nil {
		return nil, err
	}
	return (*goMplexConn)(m), nil
}

type goMplexConn mplex.Multiplex

func (c *goMplexConn) mp() *mplex.Multiplex                       { return (*mplex.Multiplex)(c) }
func (c *goMplexConn) Close() error                               { return c.mp().Close() }
func (c *goMplexConn) CloseWithError(network.ConnErrorCode) error { return c.mp().Close() }
func (c *goMplexConn) IsClosed() bool                             { return c.mp().IsClosed() }
func (c *goMplexConn) As(any) bool                                { return false }

func (c *goMplexConn) OpenStream(ctx context.Context) (network.MuxedStream, error) {
	s, err := c.mp().NewStream(ctx)
	return (*goMplexStream)(s), err
}

func (c *goMplexConn) AcceptStream() (network.MuxedStream, error) {
	s, err := c.mp().Accept()
	return (*goMplexStream)(s), err
}

type goMplexStream mplex.Stream

func (s *goMplexStream) st() *mplex.Stream { return (*mplex.Stream)(s) }

func goMplexErr(err error) error {
	if errors.Is(err, mplex.ErrStreamReset) {
		return fmt.Errorf("%w: %w", network.ErrReset, err)
	}
	return err
}

func (s *goMplexStream) Read(b []byte) (int, error) {
	n, err := s.st().Read(b)
	return n, goMplexErr(err)
}

func (s *goMplexStream) Write(b []byte) (int, error) {
	n, err := s.st().Write(b)
	return n, goMplexErr(err)
}

func (s *goMplexStream) Close() error                                 { return s.st().Close() }
func (s *goMplexStream) CloseRead() error                             { return s.st().CloseRead() }
func (s *goMplexStream) CloseWrite() error                            { return s.st().CloseWrite() }
func (s *goMplexStream) Reset() error                                 { return s.st().Reset() }
func (s *goMplexStream) ResetWithError(network.StreamErrorCode) error { return s.st().Reset() }
func (s *goMplexStream) SetDeadline(t time.Time) error                { return s.st().SetDeadline(t) }
func (s *goMplexStream) SetReadDeadline(t time.Time) error            { return s.st().SetReadDeadline(t) }
func (s *goMplexStream) SetWriteDeadline(t time.Time) error           { return s.st().SetWriteDeadline(t) }

const mplexEchoProtocol = "/braid-test/mplex-echo/1.0.0"

// newMplexHost is a go-libp2p host on 127.0.0.1 over TCP and noise with
// the given muxers, in order of preference, serving an echo protocol.
func newMplexHost(t *testing.T, muxers ...libp2p.Option) host.Host {
	t.Helper()
	opts := append([]libp2p.Option{
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.DisableRelay(),
	}, muxers...)
	h, err := libp2p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	h.SetStreamHandler(mplexEchoProtocol, func(s network.Stream) {
		if _, err := io.Copy(s, s); err != nil {
			_ = s.Reset()
			return
		}
		_ = s.Close()
	})
	return h
}

// mplexHostEcho sends size random bytes from h to p's echo handler and
// compares the SHA-256 of what comes back.
func mplexHostEcho(ctx context.Context, h host.Host, p peer.ID, size int) error {
	s, err := h.NewStream(ctx, p, mplexEchoProtocol)
	if err != nil {
		return fmt.Errorf("new stream: %w", err)
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	data := make([]byte, size)
	_, _ = rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		b := data
		for i := 1; len(b) > 0; i++ {
			n := min(len(b), 1000*i)
			if _, err := s.Write(b[:n]); err != nil {
				errc <- fmt.Errorf("write: %w", err)
				return
			}
			b = b[n:]
		}
		errc <- s.CloseWrite()
	}()
	hash := sha256.New()
	n, err := io.Copy(hash, s)
	if err != nil {
		_ = s.Reset()
		<-errc
		return fmt.Errorf("read after %d bytes: %w", n, err)
	}
	if err := <-errc; err != nil {
		return err
	}
	want := sha256.Sum256(data)
	if n != int64(size) || string(hash.Sum(nil)) != string(want[:]) {
		return fmt.Errorf("echo of %d bytes differs (%d back)", size, n)
	}
	return nil
}

// TestMplexHosts runs an echo protocol (4 streams of 1 MiB opened by each
// host at once, SHA-256 checked) between two go-libp2p hosts over TCP and
// noise on 127.0.0.1. go-libp2p v0.52.0 ships no mplex muxer, so the
// reference peer is go-mplex v0.7.0 behind goMplexTransport, the adapter
// go-libp2p used to have. The last case offers yamux and mplex on the
// braid host: it negotiates mplex with a go-mplex-only peer.
func TestMplexHosts(t *testing.T) {
	braidMplex := libp2p.Muxer(MplexID, MplexTransport)
	goMplex := libp2p.Muxer(MplexID, goMplexTransport{})
	braidBoth := libp2p.ChainOptions(libp2p.Muxer(ID, DefaultTransport), braidMplex)
	cases := []struct {
		name             string
		dialer, listener libp2p.Option
		braidDialer      bool
		braidListener    bool
	}{
		{"braid-to-braid", braidMplex, braidMplex, true, true},
		{"braid-to-go-mplex", braidMplex, goMplex, true, false},
		{"go-mplex-to-braid", goMplex, braidMplex, false, true},
		{"braid-yamux+mplex-to-go-mplex", braidBoth, goMplex, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dialer, listener := newMplexHost(t, c.dialer), newMplexHost(t, c.listener)
			if err := dialer.Connect(ctx, peer.AddrInfo{ID: listener.ID(), Addrs: listener.Addrs()}); err != nil {
				t.Fatal(err)
			}
			for _, side := range []struct {
				h     host.Host
				p     peer.ID
				braid bool
			}{{dialer, listener.ID(), c.braidDialer}, {listener, dialer.ID(), c.braidListener}} {
				conns := side.h.Network().ConnsToPeer(side.p)
				if len(conns) != 1 {
					t.Fatalf("%d connections", len(conns))
				}
				if got := conns[0].ConnState().StreamMultiplexer; got != MplexID {
					t.Fatalf("negotiated %q, want %q", got, MplexID)
				}
				var sess *braid.Session
				if isBraid := conns[0].As(&sess); isBraid != side.braid {
					t.Fatalf("connection served by braid: %v, want %v", isBraid, side.braid)
				}
			}
			var wg sync.WaitGroup
			for _, pair := range [][2]host.Host{{dialer, listener}, {listener, dialer}} {
				for range 4 {
					wg.Go(func() {
						if err := mplexHostEcho(ctx, pair[0], pair[1].ID(), 1<<20); err != nil {
							t.Error(err)
						}
					})
				}
			}
			wg.Wait()
		})
	}
}

// TestMplexHostsResetAndOverflow: over real hosts, a reset crosses both
// ways as network.ErrReset, and a braid stream whose reader never reads is
// reset once its receive buffer overflows, while the connection keeps
// working.
func TestMplexHostsResetAndOverflow(t *testing.T) {
	cfg := MplexConfig()
	cfg.MaxReceiveBuffer = 256 << 10
	small, err := NewTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	braidHost := newMplexHost(t, libp2p.Muxer(MplexID, small))
	goHost := newMplexHost(t, libp2p.Muxer(MplexID, goMplexTransport{}))
	const sink = "/braid-test/sink/1.0.0"
	never := make(chan network.Stream, 1)
	braidHost.SetStreamHandler(sink, func(s network.Stream) {
		// Say hello, so the flood starts after protocol negotiation;
		// then never read.
		_, _ = s.Write([]byte("ok"))
		never <- s
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := goHost.Connect(ctx, peer.AddrInfo{ID: braidHost.ID(), Addrs: braidHost.Addrs()}); err != nil {
		t.Fatal(err)
	}

	s, err := goHost.NewStream(ctx, braidHost.ID(), sink)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	if _, err := io.ReadFull(s, buf[:2]); err != nil {
		t.Fatal(err)
	}
	var werr error
	for total := 0; werr == nil && total < 64<<20; total += len(buf) {
		_, werr = s.Write(buf)
	}
	if werr == nil {
		t.Fatal("64 MiB written to a stream nobody reads, without a reset")
	}
	bs := <-never
	if _, err := bs.Read(buf); !errors.Is(err, braid.ErrReceiveBufferOverflow) || !errors.Is(err, network.ErrReset) {
		t.Fatalf("braid read on the overflowed stream: %v", err)
	}
	// The connection still works.
	if err := mplexHostEcho(ctx, goHost, braidHost.ID(), 100<<10); err != nil {
		t.Fatal(err)
	}
	if err := mplexHostEcho(ctx, braidHost, goHost.ID(), 100<<10); err != nil {
		t.Fatal(err)
	}

	// braid resets: the go-mplex side reads network.ErrReset.
	got := make(chan error, 1)
	goHost.SetStreamHandler(sink, func(s network.Stream) {
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := s.Write([]byte("ok")); err != nil {
			got <- err
			return
		}
		_, err := io.Copy(io.Discard, s)
		got <- err
	})
	s2, err := braidHost.NewStream(ctx, goHost.ID(), sink)
	if err != nil {
		t.Fatal(err)
	}
	_ = s2.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(s2, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	_ = s2.Reset()
	if err := <-got; !errors.Is(err, network.ErrReset) {
		t.Fatalf("go-mplex side read after braid's reset: %v", err)
	}
}
