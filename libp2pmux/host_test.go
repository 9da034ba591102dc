package libp2pmux

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	goyamux "github.com/libp2p/go-yamux/v5"
)

const echoProtocol = protocol.ID("/braid-test/echo/1.0.0")

const (
	streamsPerSide = 4       // concurrent streams each host opens
	bytesPerStream = 1 << 20 // random bytes sent, and echoed, on each
)

type muxerKind int

const (
	useBraid muxerKind = iota
	useYamux
)

func (k muxerKind) String() string {
	if k == useBraid {
		return "braid"
	}
	return "yamux"
}

type securityKind int

const (
	useNoise securityKind = iota
	useTLS
)

func (k securityKind) String() string {
	if k == useNoise {
		return "noise"
	}
	return "tls"
}

// testHost is a go-libp2p host on 127.0.0.1 over TCP, with one muxer and
// one security protocol, and its own resource manager (so that its memory
// accounting can be read back).
type testHost struct {
	host.Host
	muxer muxerKind
	rm    network.ResourceManager
}

func newTestHost(t *testing.T, mk muxerKind, sk securityKind) *testHost {
	t.Helper()
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(rcmgr.DefaultLimits.AutoScale()))
	if err != nil {
		t.Fatal(err)
	}
	opts := []libp2p.Option{
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.ResourceManager(rm),
		libp2p.DisableRelay(),
	}
	switch mk {
	case useBraid:
		opts = append(opts, libp2p.Muxer(ID, DefaultTransport))
	case useYamux:
		opts = append(opts, libp2p.Muxer(yamux.ID, yamux.DefaultTransport))
	}
	switch sk {
	case useNoise:
		opts = append(opts, libp2p.Security(noise.ID, noise.New))
	case useTLS:
		opts = append(opts, libp2p.Security(libp2ptls.ID, libp2ptls.New))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	// The host closes the resource manager it was given.
	t.Cleanup(func() { _ = h.Close() })
	h.SetStreamHandler(echoProtocol, echo)
	return &testHost{Host: h, muxer: mk, rm: rm}
}

// echo sends back everything it reads, then closes its side.
func echo(s network.Stream) {
	if _, err := io.Copy(s, s); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}

// peerMemory returns the memory the host's resource manager accounts to
// peer p.
func (h *testHost) peerMemory(t *testing.T, p peer.ID) int64 {
	var mem int64
	err := h.rm.ViewPeer(p, func(s network.PeerScope) error {
		mem = s.Stat().Memory
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

// TestHosts runs an echo protocol between two real go-libp2p hosts: braid
// against go-libp2p's stock yamux, both ways round, and braid against
// braid, over noise and over TLS.
func TestHosts(t *testing.T) {
	cases := []struct {
		dialer, listener muxerKind
		security         securityKind
	}{
		{useBraid, useYamux, useNoise},
		{useYamux, useBraid, useNoise},
		{useBraid, useBraid, useNoise},
		{useBraid, useBraid, useTLS},
		{useBraid, useYamux, useTLS},
		{useYamux, useBraid, useTLS},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%v-to-%v/%v", c.dialer, c.listener, c.security)
		t.Run(name, func(t *testing.T) {
			dialer := newTestHost(t, c.dialer, c.security)
			listener := newTestHost(t, c.listener, c.security)
			testEcho(t, dialer, listener)
		})
	}
}

func testEcho(t *testing.T, dialer, listener *testHost) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dialer.Connect(ctx, peer.AddrInfo{ID: listener.ID(), Addrs: listener.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*testHost{dialer, listener} {
		other := listener
		if h == listener {
			other = dialer
		}
		checkMuxer(t, h, other.ID())
		if h.muxer == useBraid {
			checkReserves(t, ctx, h, other.ID())
		}
	}

	// Both hosts open streams at once, each to the other's echo handler.
	var wg sync.WaitGroup
	errs := make(chan error, 2*streamsPerSide)
	for _, pair := range [][2]*testHost{{dialer, listener}, {listener, dialer}} {
		from, to := pair[0], pair[1]
		for range streamsPerSide {
			wg.Go(func() {
				if err := echoRoundTrip(ctx, from, to.ID()); err != nil {
					errs <- fmt.Errorf("%v to %v: %w", from.muxer, to.muxer, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	for _, h := range []*testHost{dialer, listener} {
		if h.muxer != useBraid {
			continue
		}
		other := listener
		if h == listener {
			other = dialer
		}
		// The writer counts a write once the conn's Write returns, which
		// can be after the peer read and echoed it: every round trip has
		// ended, but this side's last write may not be counted yet.
		sess := braidSession(t, h, other.ID())
		want := uint64(2 * streamsPerSide * bytesPerStream)
		waitFor(t, func() bool { return sess.Stats().BytesSent >= want },
			fmt.Sprintf("the braid session to count %d bytes sent", want))
	}

	// Closing the connection releases all memory braid reserved in the
	// peer's scope of the resource manager.
	if err := dialer.Network().ClosePeer(listener.ID()); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*testHost{dialer, listener} {
		if h.muxer != useBraid {
			continue
		}
		other := listener
		if h == listener {
			other = dialer
		}
		waitFor(t, func() bool { return h.peerMemory(t, other.ID()) == 0 },
			"memory of the braid host's peer scope to drop to 0")
	}
}

// checkMuxer checks that h's connection to p negotiated yamux's id and is
// really served by the muxer h was built with.
func checkMuxer(t *testing.T, h *testHost, p peer.ID) {
	t.Helper()
	conns := h.Network().ConnsToPeer(p)
	if len(conns) != 1 {
		t.Fatalf("%d connections to the peer, want 1", len(conns))
	}
	c := conns[0]
	if got := c.ConnState().StreamMultiplexer; got != ID {
		t.Errorf("stream multiplexer %q, want %q", got, ID)
	}
	var bs *braid.Session
	var ys *goyamux.Session
	isBraid, isYamux := c.As(&bs), c.As(&ys)
	switch h.muxer {
	case useBraid:
		if !isBraid || bs == nil || isYamux {
			t.Errorf("%v host: connection is not a braid session (braid %v, yamux %v)", h.muxer, isBraid, isYamux)
		}
	case useYamux:
		if isBraid || !isYamux {
			t.Errorf("%v host: connection is not a yamux session (braid %v, yamux %v)", h.muxer, isBraid, isYamux)
		}
	}
}

// checkReserves checks that an open braid stream's initial window is
// accounted in the peer's scope of h's resource manager.
func checkReserves(t *testing.T, ctx context.Context, h *testHost, p peer.ID) {
	t.Helper()
	s, err := h.NewStream(ctx, p, echoProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if mem := h.peerMemory(t, p); mem < braid.InitialStreamWindow {
		t.Errorf("peer scope holds %d bytes with a braid stream open, want at least %d", mem, braid.InitialStreamWindow)
	}
}

// braidSession returns the braid session of h's connection to p.
func braidSession(t *testing.T, h *testHost, p peer.ID) *braid.Session {
	t.Helper()
	conns := h.Network().ConnsToPeer(p)
	if len(conns) == 0 {
		t.Fatal("no connection to the peer")
	}
	var sess *braid.Session
	if !conns[0].As(&sess) {
		t.Fatal("connection is not a braid session")
	}
	return sess
}

// echoRoundTrip opens an echo stream from h to p, sends bytesPerStream
// random bytes while reading the echo, and compares SHA-256 sums.
func echoRoundTrip(ctx context.Context, h *testHost, p peer.ID) error {
	s, err := h.NewStream(ctx, p, echoProtocol)
	if err != nil {
		return fmt.Errorf("new stream: %w", err)
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	data := make([]byte, bytesPerStream)
	_, _ = rand.Read(data)
	sent := sha256.Sum256(data)

	writeErr := make(chan error, 1)
	go func() {
		// Uneven writes, so that frames of all sizes cross.
		b := data
		for i := 1; len(b) > 0; i++ {
			n := min(len(b), 1000*i)
			if _, err := s.Write(b[:n]); err != nil {
				writeErr <- fmt.Errorf("write: %w", err)
				return
			}
			b = b[n:]
		}
		writeErr <- s.CloseWrite()
	}()

	hash := sha256.New()
	n, err := io.Copy(hash, s)
	if err != nil {
		_ = s.Reset()
		<-writeErr
		return fmt.Errorf("read after %d bytes: %w", n, err)
	}
	if err := <-writeErr; err != nil {
		return err
	}
	if n != bytesPerStream {
		return fmt.Errorf("echoed %d bytes, sent %d", n, bytesPerStream)
	}
	var got [sha256.Size]byte
	hash.Sum(got[:0])
	if got != sent {
		return errors.New("echoed data differs from the data sent")
	}
	return nil
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostNewStreamAfterPeerGoAway: once the peer has sent a go-away (as
// js-libp2p's yamux does when it closes a connection gracefully, keeping
// it open while its streams drain), the connection can't carry new
// streams of ours, and IsClosed says so: go-libp2p's swarm then opens new
// streams on another connection, dialing one, so a host reaches the peer
// again, as it does with go-libp2p's yamux (whose session ends at the
// go-away). While IsClosed stayed false every NewStream to the peer
// failed for as long as the old connection stayed open. The streams
// already open on the old connection keep working.
func TestHostNewStreamAfterPeerGoAway(t *testing.T) {
	dialer := newTestHost(t, useBraid, useNoise)
	listener := newTestHost(t, useBraid, useNoise)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dialer.Connect(ctx, peer.AddrInfo{ID: listener.ID(), Addrs: listener.Addrs()}); err != nil {
		t.Fatal(err)
	}
	old, err := dialer.NewStream(ctx, listener.ID(), echoProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	_ = old.SetDeadline(time.Now().Add(time.Minute))
	echoOnce := func(s network.Stream) error {
		if _, err := s.Write([]byte{1}); err != nil {
			return err
		}
		_, err := io.ReadFull(s, make([]byte, 1))
		return err
	}
	if err := echoOnce(old); err != nil { // the listener has accepted it
		t.Fatal(err)
	}
	// The listener's side of the connection sends a go-away.
	if err := braidSession(t, listener, dialer.ID()).GoAway(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return old.Conn().IsClosed() }, "the go-away to arrive")

	s, err := dialer.NewStream(ctx, listener.ID(), echoProtocol)
	if err != nil {
		t.Fatalf("NewStream after the peer's go-away: %v", err)
	}
	defer s.Close()
	if s.Conn() == old.Conn() {
		t.Error("the new stream is on the connection the peer went away from")
	}
	_ = s.SetDeadline(time.Now().Add(time.Minute))
	if err := echoOnce(s); err != nil {
		t.Errorf("echo on the new stream: %v", err)
	}
	if err := echoOnce(old); err != nil {
		t.Errorf("echo on the stream opened before the go-away: %v", err)
	}
}
