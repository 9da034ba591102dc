package interop_test

import (
	"context"
	"net"
	"testing"

	"github.com/braidmux/braid"
	yamux "github.com/libp2p/go-yamux/v5"
	"golang.org/x/net/nettest"
)

// TestStreamNetConnVsYamux runs the same suite on a braid stream whose peer
// is a go-yamux stream; the suite checks both ends, so go-yamux's stream
// must pass it too (it does in v5.1.0).
func TestStreamNetConnVsYamux(t *testing.T) {
	nettest.TestConn(t, func() (net.Conn, net.Conn, func(), error) {
		c1, c2 := tcpPair(t)
		bs, err := braid.Client(c1, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		ys, err := yamux.Server(c2, yamuxConfig(), nil)
		if err != nil {
			bs.Close()
			return nil, nil, nil, err
		}
		stop := func() {
			bs.Close()
			ys.Close()
		}
		a, err := bs.OpenStream(context.Background())
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		b, err := ys.AcceptStream()
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		return a, b, func() {
			a.Close()
			b.Close()
			stop()
		}, nil
	})
}
