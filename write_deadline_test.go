package braid

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/braidmux/braid/internal/tlstest"
	"github.com/stretchr/testify/require"
)

// TestLargeWriteMeetsItsDeadline: a Write larger than refThreshold, to a
// peer that stopped reading, returns by its write deadline with
// os.ErrDeadlineExceeded, as a net.Conn's Write does, when the deadline is
// sooner than the longest a conn write may block (the write timeout). Its
// frames go by copy then, not from the caller's memory: a frame written
// from the caller's memory holds the Write until the conn write ends,
// which a stalled peer holds until the write timeout (here 5 s). On
// yamux (the peer granted a large window: the conn, not the credit, is
// what blocks) and mplex, over TCP (writev: inline by-reference writes)
// and TLS.
func TestLargeWriteMeetsItsDeadline(t *testing.T) {
	for _, proto := range []Protocol{Yamux, Mplex} {
		for _, secure := range []bool{false, true} {
			name := protoName(proto) + "/tcp"
			if secure {
				name = protoName(proto) + "/tls"
			}
			t.Run(name, func(t *testing.T) { testLargeWriteDeadline(t, proto, secure) })
		}
	}
}

func testLargeWriteDeadline(t *testing.T, proto Protocol, secure bool) {
	const (
		writeTimeout = 5 * time.Second
		ahead        = 300 * time.Millisecond
		stuck        = 64 << 20 // far more than loopback's socket buffers
	)
	cfg := DefaultConfig()
	cfg.Protocol = proto
	cfg.DisableKeepAlive = true
	cfg.ConnectionWriteTimeout = writeTimeout
	c1, c2 := tcpPair(t)
	var ours, peer net.Conn = c1, c2
	if secure {
		var err error
		if ours, peer, err = tlstest.Secure(c1, c2); err != nil {
			t.Fatal(err)
		}
	}
	defer peer.Close()
	s, err := Client(ours, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if proto == Yamux {
		grant := header{typ: typeWindowUpdate, flags: flagACK, streamID: st.ID(), length: stuck}.appendTo(nil)
		if _, err := peer.Write(grant); err != nil {
			t.Fatal(err)
		}
		require.Eventually(t, func() bool {
			s.w.mu.Lock()
			defer s.w.mu.Unlock()
			return st.send.window > InitialStreamWindow
		}, 5*time.Second, time.Millisecond, "the peer's credit")
	}
	if err := st.SetWriteDeadline(time.Now().Add(ahead)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := st.Write(make([]byte, stuck))
	took := time.Since(start)
	t.Logf("Write returned %d bytes and %v after %v", n, err, took)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write to a peer that reads nothing: %v, want os.ErrDeadlineExceeded", err)
	}
	if took > writeTimeout/2 {
		t.Fatalf("Write returned %v after its deadline, %v ahead: it waited for the conn write", took, ahead)
	}
	if n >= stuck {
		t.Fatalf("Write reports all %d bytes written to a peer that read none", n)
	}
}
