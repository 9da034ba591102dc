package libp2pmux_test

import (
	"fmt"
	"log"
	"time"

	"github.com/braidmux/braid"
	"github.com/braidmux/braid/libp2pmux"
	"github.com/libp2p/go-libp2p"
)

// A host that multiplexes with braid instead of go-libp2p's yamux. It
// talks to every yamux peer: the protocol id and the wire format are
// yamux's.
func Example() {
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Muxer(libp2pmux.ID, libp2pmux.DefaultTransport),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	fmt.Println("listening on", h.Addrs())
}

// A transport tuned from DefaultConfig: a small delay lets the writer fill
// fuller packets, at some latency cost, and windows are capped at 4 MiB.
func ExampleNewTransport() {
	cfg := libp2pmux.DefaultConfig()
	cfg.CoalesceDelay = time.Millisecond
	cfg.MaxStreamWindow = 4 << 20
	tr, err := libp2pmux.NewTransport(cfg)
	if err != nil {
		log.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Muxer(libp2pmux.ID, tr))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
}

// Reaching the braid session under each of a host's connections, for its
// statistics.
func Example_session() {
	h, err := libp2p.New(libp2p.Muxer(libp2pmux.ID, libp2pmux.DefaultTransport))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	// ... connect to peers ...
	for _, c := range h.Network().Conns() {
		var sess *braid.Session
		if c.As(&sess) {
			st := sess.Stats()
			fmt.Printf("%s: rtt %v, %d frames in %d writes\n", c.RemotePeer(), sess.RTT(), st.FramesSent, st.Writes)
		}
	}
}
