package libp2pmux

import (
	"errors"
	"io"
	"net"
	"testing"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p/core/network"
)

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.DisableCoalescing {
		t.Error("coalescing is off by default")
	}
	if cfg.MaxStreamWindow != 16<<20 {
		t.Errorf("MaxStreamWindow = %d, want 16 MiB", cfg.MaxStreamWindow)
	}
	if cfg.MaxIncomingStreams < 1<<31-1 {
		t.Errorf("MaxIncomingStreams = %d, want it left to the resource manager", cfg.MaxIncomingStreams)
	}
	if cfg.Memory != nil {
		t.Error("Memory is set")
	}
	if *DefaultTransport.Config() != *cfg {
		t.Error("DefaultTransport does not use DefaultConfig")
	}
	var zero Transport
	if *zero.Config() != *cfg {
		t.Error("the zero Transport does not use DefaultConfig")
	}
}

func TestNewTransport(t *testing.T) {
	tr, err := NewTransport(nil)
	if err != nil {
		t.Fatal(err)
	}
	if *tr.Config() != *DefaultConfig() {
		t.Error("NewTransport(nil) does not use DefaultConfig")
	}

	cfg := DefaultConfig()
	cfg.DisableCoalescing = true
	cfg.MaxStreamWindow = 1 << 20
	tr, err = NewTransport(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxStreamWindow = 2 << 20 // the transport keeps its own copy
	if got := tr.Config(); !got.DisableCoalescing || got.MaxStreamWindow != 1<<20 {
		t.Errorf("config not kept: %+v", got)
	}

	// A stream window above the default session window: the session
	// window's default follows it, as in braid.Client.
	big, err := NewTransport(&braid.Config{MaxStreamWindow: 128 << 20})
	if err != nil {
		t.Fatalf("NewTransport with a 128 MiB stream window: %v", err)
	}
	if got := big.Config().MaxSessionWindow; got != 128<<20-braid.InitialStreamWindow {
		t.Errorf("MaxSessionWindow %d, want %d", got, 128<<20-braid.InitialStreamWindow)
	}

	bad := DefaultConfig()
	bad.MaxStreamWindow = 1
	var ce *braid.ConfigError
	if _, err := NewTransport(bad); !errors.As(err, &ce) || ce.Field != "MaxStreamWindow" {
		t.Errorf("NewTransport with an invalid config: %v, want a *braid.ConfigError", err)
	}

	withMemory := DefaultConfig()
	withMemory.Memory = &countingSpan{parent: &countingScope{}}
	if _, err := NewTransport(withMemory); !errors.As(err, &ce) || ce.Field != "Memory" {
		t.Errorf("NewTransport with Memory set: %v, want a *braid.ConfigError for Memory", err)
	}
}

// TestZeroTransport checks that a zero Transport works, with DefaultConfig.
func TestZeroTransport(t *testing.T) {
	var tr Transport
	client, server := pipeConns(t, &tr, nil)
	cs, ss := openPair(t, client, server)
	go func() {
		_, _ = cs.Write([]byte("hello"))
		_ = cs.CloseWrite()
	}()
	b, err := io.ReadAll(ss)
	if err != nil || string(b) != "hello" {
		t.Errorf("read %q, %v", b, err)
	}
}

// refusingScope refuses every reservation.
type refusingScope struct{ countingScope }

type refusingSpan struct{ countingSpan }

func (s *refusingScope) BeginSpan() (network.ResourceScopeSpan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spans++
	return &refusingSpan{countingSpan{parent: &s.countingScope}}, nil
}

func (s *refusingSpan) ReserveMemory(int, uint8) error { return network.ErrResourceLimitExceeded }

// TestMemoryRefused checks that a scope that refuses memory refuses
// streams: ours fail to open, the peer's are reset.
func TestMemoryRefused(t *testing.T) {
	scope := &refusingScope{}
	a, b := net.Pipe()
	stingy, err := DefaultTransport.NewConn(a, false, scope)
	if err != nil {
		t.Fatal(err)
	}
	generous, err := DefaultTransport.NewConn(b, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer generous.Close()

	if _, err := stingy.OpenStream(t.Context()); !errors.Is(err, network.ErrResourceLimitExceeded) {
		t.Errorf("OpenStream with memory refused: %v, want the scope's error", err)
	}
	s, err := generous.OpenStream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Write([]byte{1})
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, network.ErrReset) {
		t.Errorf("read on a stream the peer refused: %v, want a reset", err)
	}
	if err := stingy.Close(); err != nil {
		t.Fatal(err)
	}
	scope.check(t, false)
}

// TestSpanEndsWhenPeerCloses checks that a connection's span ends when
// the peer closes the connection, without a local Close.
func TestSpanEndsWhenPeerCloses(t *testing.T) {
	scope := &countingScope{}
	a, b := net.Pipe()
	c1, err := DefaultTransport.NewConn(a, false, scope)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := DefaultTransport.NewConn(b, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	openPair(t, c1, c2)
	openPair(t, c2, c1)
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c1.IsClosed, "the conn to close")
	scope.check(t, true)
}
