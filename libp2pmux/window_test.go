package libp2pmux

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/slowconn"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	ma "github.com/multiformats/go-multiaddr"
)

// Promise: on a long link, a stream's grown receive window is reserved in
// go-libp2p's resource manager (the peer scope NewConn is given), and an
// idle stream returns the growth to it while still open (braid's idle
// shrink, issue #15 target 4), not only when it closes.
func TestWindowShrinkResourceManager(t *testing.T) {
	const transfer = 8 << 20
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(rcmgr.DefaultLimits.AutoScale()))
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	p, err := peer.Decode("12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := rm.OpenConnection(network.DirInbound, false, ma.StringCast("/ip4/127.0.0.1/tcp/4001"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Done()
	if err := cs.SetPeer(p); err != nil {
		t.Fatal(err)
	}
	peerMemory := func() (mem int64) {
		if err := rm.ViewPeer(p, func(s network.PeerScope) error {
			mem = s.Stat().Memory
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return mem
	}

	c1, c2 := slowconn.Pipe(slowconn.Link{Bandwidth: 1e9, Latency: 25 * time.Millisecond})
	client, err := DefaultTransport.NewConn(c1, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := DefaultTransport.NewConn(c2, true, cs.PeerScope())
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	waitFor(t, func() bool {
		_, err := server.(*conn).sess.Ping() // the path's RTT is known
		return err == nil
	}, "no pong")

	st, err := client.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	werr := make(chan error, 1)
	go func() {
		_, err := st.Write(make([]byte, transfer))
		werr <- err
	}()
	peerSt, err := server.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	defer peerSt.Close()
	if _, err := io.ReadFull(peerSt, make([]byte, transfer)); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	grown := peerMemory()
	if grown <= braid.InitialStreamWindow {
		t.Fatalf("resource manager holds %d B for a stream that moved %d B on a long link: the window did not grow", grown, transfer)
	}
	// Idle and open: the growth goes back within two shrink checks (1-2 s).
	waitFor(t, func() bool { return peerMemory() == braid.InitialStreamWindow },
		"idle stream's grown window never returned to the resource manager")
	t.Logf("peer memory: %d B after the transfer, %d B once idle", grown, peerMemory())
	if err := peerSt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return peerMemory() == 0 }, "memory still reserved after both ends closed")
}
