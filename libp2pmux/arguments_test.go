package libp2pmux

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p/core/network"
)

// The transport, its connections and streams with nil, zero and odd
// arguments: a documented error or a working call, and no panic in any
// goroutine (one in braid's would end the test binary).

// TestTransportZeroFields: a zero field of the Config given to
// NewTransport means DefaultConfig's value (MplexConfig's for mplex), so
// &braid.Config{} is DefaultTransport's configuration.
func TestTransportZeroFields(t *testing.T) {
	for _, base := range []*braid.Config{DefaultConfig(), MplexConfig()} {
		typ := reflect.TypeFor[braid.Config]()
		for i := range typ.NumField() {
			cfg := *base
			reflect.ValueOf(&cfg).Elem().Field(i).SetZero()
			if cfg.Protocol != base.Protocol {
				continue // zeroing Protocol makes an mplex config yamux's
			}
			tr, err := NewTransport(&cfg)
			if err != nil {
				t.Fatalf("zero %s: %v", typ.Field(i).Name, err)
			}
			if got := *tr.Config(); got != *base {
				t.Errorf("%v with zero %s: %+v, want %+v", base.Protocol, typ.Field(i).Name, got, *base)
			}
		}
	}
	for _, cfg := range []*braid.Config{nil, {}} {
		tr, err := NewTransport(cfg)
		if err != nil || *tr.Config() != *DefaultConfig() {
			t.Errorf("NewTransport(%v) = %+v, %v; want DefaultConfig", cfg, tr.Config(), err)
		}
	}
	tr, err := NewTransport(&braid.Config{Protocol: braid.Mplex})
	if err != nil || *tr.Config() != *MplexConfig() {
		t.Errorf("NewTransport(mplex) = %+v, %v; want MplexConfig", tr.Config(), err)
	}
	if *MplexTransport.Config() != *MplexConfig() {
		t.Error("MplexTransport does not use MplexConfig")
	}
	var nilTransport *Transport
	if *nilTransport.Config() != *DefaultConfig() {
		t.Error("a nil *Transport does not use DefaultConfig")
	}
}

// TestNewConnArguments: a nil conn is braid.ErrNilConn, and the span begun
// for it ends; a nil *Transport and a nil scope work.
func TestNewConnArguments(t *testing.T) {
	scope := &countingScope{}
	for _, nc := range []net.Conn{nil, (*net.TCPConn)(nil)} {
		for _, isServer := range []bool{false, true} {
			for _, sc := range []network.PeerScope{nil, scope} {
				c, err := DefaultTransport.NewConn(nc, isServer, sc)
				if c != nil || !errors.Is(err, braid.ErrNilConn) {
					t.Errorf("NewConn(%v, %v, %v) = %v, %v; want braid.ErrNilConn", nc, isServer, sc, c, err)
				}
			}
		}
	}
	scope.check(t, false)

	var nilTransport *Transport
	client, server := pipeConns(t, nilTransport, nil)
	openPair(t, client, server)

	if c, err := NewMuxedConn(nil); c != nil || !errors.Is(err, ErrNilSession) || !errors.Is(err, os.ErrInvalid) {
		t.Errorf("NewMuxedConn(nil) = %v, %v; want ErrNilSession", c, err)
	}
	a, b := net.Pipe()
	sa, err := braid.Client(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := braid.Server(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewMuxedConn(sa)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := NewMuxedConn(sb)
	if err != nil {
		t.Fatal(err)
	}
	openPair(t, ca, cb)
	if err := ca.Close(); err != nil || !sa.IsClosed() {
		t.Errorf("Close = %v, session closed %v", err, sa.IsClosed())
	}
	_ = cb.Close()
}

// TestConnArguments: MuxedConn and MuxedStream methods with nil and zero
// arguments, and on a closed connection.
func TestConnArguments(t *testing.T) {
	for _, tr := range []*Transport{DefaultTransport, MplexTransport} {
		t.Run(tr.Config().Protocol.String(), func(t *testing.T) {
			client, server := pipeConns(t, tr, nil)
			//lint:ignore SA1012 a nil context is the point
			if s, err := client.OpenStream(nil); s != nil || !errors.Is(err, braid.ErrNilContext) {
				t.Errorf("OpenStream(nil) = %v, %v; want braid.ErrNilContext", s, err)
			}
			if client.As(nil) || client.As((**braid.Session)(nil)) {
				t.Error("As(nil) reported success")
			}
			cs, ss := openPair(t, client, server)
			a := cs.(interface{ As(any) bool })
			if a.As(nil) || a.As((**braid.Stream)(nil)) {
				t.Error("stream As(nil) reported success")
			}
			for _, p := range [][]byte{nil, {}} {
				if n, err := cs.Write(p); n != 0 || err != nil {
					t.Errorf("Write(%v) = %d, %v", p, n, err)
				}
				if n, err := ss.Read(p); n != 0 || err != nil {
					t.Errorf("Read(%v) = %d, %v", p, n, err)
				}
			}
			if err := ss.SetReadDeadline(time.Unix(0, 0)); err != nil {
				t.Fatal(err)
			}
			if _, err := ss.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("Read past deadline: %v", err)
			}
			if err := ss.SetDeadline(time.Time{}); err != nil {
				t.Fatal(err)
			}
			if err := cs.ResetWithError(math.MaxUint32); err != nil {
				t.Fatal(err)
			}
			_, _ = cs.Close(), cs.Reset()
			_, _, _ = cs.CloseRead(), cs.CloseWrite(), ss.Reset()

			// A closed connection.
			if err := client.CloseWithError(math.MaxUint32); err != nil {
				t.Fatal(err)
			}
			if err := client.Close(); err != nil {
				t.Fatal(err)
			}
			if !client.IsClosed() {
				t.Error("IsClosed after Close is false")
			}
			if _, err := client.OpenStream(context.Background()); err == nil {
				t.Error("OpenStream on a closed conn succeeded")
			}
			if _, err := client.AcceptStream(); err == nil {
				t.Error("AcceptStream on a closed conn succeeded")
			}
			if _, err := io.ReadAll(ss); err == nil || errors.Is(err, io.EOF) {
				t.Errorf("read on a reset stream: %v, want a reset", err)
			}
		})
	}
}
