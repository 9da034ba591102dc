package libp2pmux_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/libp2pmux"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// Two hosts that multiplex with braid instead of go-libp2p's yamux, on
// loopback TCP. braid negotiates yamux's protocol id and speaks its wire
// format, so either host could as well run go-libp2p's stock yamux.
func Example() {
	newHost := func() host.Host {
		h, err := libp2p.New(
			libp2p.Muxer(libp2pmux.ID, libp2pmux.DefaultTransport),
			libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
			libp2p.Transport(tcp.NewTCPTransport),
		)
		if err != nil {
			log.Fatal(err)
		}
		return h
	}
	server, client := newHost(), newHost()
	defer server.Close()
	defer client.Close()

	// The server answers "hello, <request>" on /greet/1.0.0.
	server.SetStreamHandler("/greet/1.0.0", func(s network.Stream) {
		req, err := io.ReadAll(s)
		if err != nil {
			s.Reset()
			return
		}
		fmt.Fprintf(s, "hello, %s", req)
		s.Close()
	})

	ctx := context.Background()
	err := client.Connect(ctx, peer.AddrInfo{ID: server.ID(), Addrs: server.Addrs()})
	if err != nil {
		log.Fatal(err)
	}
	s, err := client.NewStream(ctx, server.ID(), "/greet/1.0.0")
	if err != nil {
		log.Fatal(err)
	}
	s.Write([]byte("braid"))
	s.CloseWrite()
	reply, err := io.ReadAll(s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply))
	fmt.Println("muxer:", s.Conn().ConnState().StreamMultiplexer)
	// Output:
	// hello, braid
	// muxer: /yamux/1.0.0
}

// A transport tuned from DefaultConfig: a small delay lets the writer fill
// fuller packets, at some latency cost, and windows are capped at 4 MiB.
// NewTransport validates the Config, so a host never gets a bad one.
func ExampleNewTransport() {
	cfg := libp2pmux.DefaultConfig()
	cfg.CoalesceDelay = time.Millisecond
	cfg.MaxStreamWindow = 4 << 20
	tr, err := libp2pmux.NewTransport(cfg)
	if err != nil {
		log.Fatal(err)
	}
	h, err := libp2p.New(
		libp2p.Muxer(libp2pmux.ID, tr),
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	fmt.Println("delay:", tr.Config().CoalesceDelay, "window:", tr.Config().MaxStreamWindow>>20, "MiB")

	_, err = libp2pmux.NewTransport(&braid.Config{CoalesceDelay: time.Second})
	var ce *braid.ConfigError
	if errors.As(err, &ce) {
		fmt.Println("refused:", ce.Field)
	}
	// Output:
	// delay: 1ms window: 4 MiB
	// refused: CoalesceDelay
}

// Reaching the braid session under a host's connection, for its
// statistics and round-trip time.
func Example_session() {
	newHost := func() host.Host {
		h, err := libp2p.New(
			libp2p.Muxer(libp2pmux.ID, libp2pmux.DefaultTransport),
			libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
			libp2p.Transport(tcp.NewTCPTransport),
		)
		if err != nil {
			log.Fatal(err)
		}
		return h
	}
	a, b := newHost(), newHost()
	defer a.Close()
	defer b.Close()
	err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()})
	if err != nil {
		log.Fatal(err)
	}

	for _, c := range a.Network().ConnsToPeer(b.ID()) {
		var sess *braid.Session
		if !c.As(&sess) {
			continue // another muxer
		}
		if _, err := sess.Ping(); err != nil {
			log.Fatal(err)
		}
		st := sess.Stats()
		fmt.Println("braid session, round trip measured:", sess.RTT() > 0)
		// Writes is counted as each conn write starts, FramesSent as
		// each batch's write ends: while the host's own streams write,
		// the two may be a batch apart, so only their sign is printed.
		fmt.Println("frames sent:", st.FramesSent > 0, "conn writes:", st.Writes > 0)
	}
	// Output:
	// braid session, round trip measured: true
	// frames sent: true conn writes: true
}

// NewMuxedConn turns a braid session made by hand into go-libp2p's
// network.MuxedConn, and errors come back as go-libp2p's: a reset is a
// *network.StreamError with the peer's code, matching network.ErrReset,
// with braid's *braid.StreamError inside.
func ExampleNewMuxedConn() {
	c1, c2 := net.Pipe()
	cs, _ := braid.Client(c1, nil)
	ss, _ := braid.Server(c2, nil)
	client, _ := libp2pmux.NewMuxedConn(cs)
	server, _ := libp2pmux.NewMuxedConn(ss)
	defer client.Close()
	defer server.Close()

	st, err := client.OpenStream(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	peer, err := server.AcceptStream()
	if err != nil {
		log.Fatal(err)
	}
	peer.ResetWithError(7)

	_, err = io.ReadAll(st)
	var se *network.StreamError
	if errors.As(err, &se) {
		fmt.Println("code", se.ErrorCode, "remote", se.Remote, "reset:", errors.Is(err, network.ErrReset))
	}
	var be *braid.StreamError
	fmt.Println("braid's error inside:", errors.As(err, &be))
	// Output:
	// code 7 remote true reset: true
	// braid's error inside: true
}
