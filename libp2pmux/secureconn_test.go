package libp2pmux

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/sec"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
)

// securePair secures both ends of a loopback TCP connection with the
// security transport that newTransport makes for a key.
func securePair(t *testing.T, newTransport func(crypto.PrivKey) (sec.SecureTransport, error)) (client, server sec.SecureConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	raw1, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	raw2 := <-accepted
	if raw2 == nil {
		t.Fatal("accept failed")
	}
	keys := make([]crypto.PrivKey, 2)
	trs := make([]sec.SecureTransport, 2)
	for i := range keys {
		if keys[i], _, err = crypto.GenerateEd25519Key(nil); err != nil {
			t.Fatal(err)
		}
		if trs[i], err = newTransport(keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	serverID, err := peer.IDFromPrivateKey(keys[1])
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		c   sec.SecureConn
		err error
	}
	inbound := make(chan result, 1)
	go func() {
		c, err := trs[1].SecureInbound(context.Background(), raw2, "")
		inbound <- result{c, err}
	}()
	client, err = trs[0].SecureOutbound(context.Background(), raw1, serverID)
	if err != nil {
		t.Fatal(err)
	}
	r := <-inbound
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

// TestBraidConnSeesThroughLibp2pTLS: over go-libp2p's TLS, braid gets the
// *tls.Conn the security conn carries (and so lent reads and the conn
// turn); over noise, the security conn itself.
func TestBraidConnSeesThroughLibp2pTLS(t *testing.T) {
	client, server := securePair(t, func(k crypto.PrivKey) (sec.SecureTransport, error) {
		return libp2ptls.New(libp2ptls.ID, k, nil)
	})
	for _, c := range []sec.SecureConn{client, server} {
		tc, ok := braidConn(c).(*tls.Conn)
		if !ok {
			t.Fatalf("braidConn(%T) = %T, want the *tls.Conn", c, braidConn(c))
		}
		if tc.ConnectionState().Version != tls.VersionTLS13 || tc.RemoteAddr().String() != c.RemoteAddr().String() {
			t.Fatalf("braidConn(%T) is not the security conn's own *tls.Conn", c)
		}
	}
	client, server = securePair(t, func(k crypto.PrivKey) (sec.SecureTransport, error) {
		return noise.New(noise.ID, k, nil)
	})
	for _, c := range []sec.SecureConn{client, server} {
		if got := braidConn(c); got != net.Conn(c) {
			t.Fatalf("braidConn(%T) = %T, want the noise conn itself", c, got)
		}
	}
}

// TestHostOverTLSLendsReads: between two go-libp2p hosts over TLS and
// TCP, a Read that waits with a large buffer gets the payload read
// straight into it (Stats.BytesLent): the session reads the *tls.Conn
// over go-multiaddr's wrapper of the TCP conn, both of which braid
// knows can be cut and resumed. Over noise nothing is lent.
//
// A frame is lent only if it comes while the Read waits, which is the
// scheduler's to decide: under -race one echo of 1 MiB once lent nothing
// (CI, session 45). So the echo goes on, a MiB at a time, until a byte
// was lent, up to lendRounds MiB; over noise all of them run, and none
// may be lent.
func TestHostOverTLSLendsReads(t *testing.T) {
	const (
		size       = 1 << 20
		lendRounds = 16
	)
	for _, sk := range []securityKind{useTLS, useNoise} {
		t.Run(sk.String(), func(t *testing.T) {
			dialer, listener := newTestHost(t, useBraid, sk), newTestHost(t, useBraid, sk)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := dialer.Connect(ctx, peer.AddrInfo{ID: listener.ID(), Addrs: listener.Addrs()}); err != nil {
				t.Fatal(err)
			}
			s, err := dialer.NewStream(ctx, listener.ID(), echoProtocol)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var lent uint64
			buf := make([]byte, size)
			for round := 0; round < lendRounds && (sk != useTLS || lent == 0); round++ {
				go func() {
					msg := make([]byte, 64<<10)
					for range size / len(msg) {
						if _, err := s.Write(msg); err != nil {
							return
						}
					}
				}()
				if _, err := io.ReadFull(s, buf); err != nil {
					t.Fatal(err)
				}
				lent = braidSession(t, dialer, listener.ID()).Stats().BytesLent
			}
			switch {
			case sk == useTLS && lent == 0:
				t.Fatalf("over TLS no byte was lent in %d MiB", lendRounds)
			case sk == useNoise && lent != 0:
				t.Fatalf("over noise %d bytes were lent", lent)
			}
		})
	}
}
