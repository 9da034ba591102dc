package libp2pmux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p/core/network"
)

func TestParseError(t *testing.T) {
	if parseError(nil) != nil {
		t.Error("parseError(nil) != nil")
	}
	// Errors that are no reset pass through as they are.
	for _, err := range []error{io.EOF, os.ErrDeadlineExceeded, braid.ErrSessionClosed, braid.ErrStreamClosed, context.Canceled} {
		if got := parseError(err); got != err {
			t.Errorf("parseError(%v) = %v, want it unchanged", err, got)
		}
	}

	for _, err := range []error{
		&braid.StreamError{ErrorCode: 7, Remote: true},
		fmt.Errorf("wrapped: %w", &braid.StreamError{ErrorCode: 7, Remote: true}),
	} {
		got := parseError(err)
		var se *network.StreamError
		if !errors.As(got, &se) || se.ErrorCode != 7 || !se.Remote || se.TransportError != err {
			t.Errorf("parseError(%v) = %#v, want a *network.StreamError with code 7, remote", err, got)
		}
		if !errors.Is(got, network.ErrReset) || !errors.Is(got, braid.ErrStreamReset) {
			t.Errorf("parseError(%v) does not match network.ErrReset and braid.ErrStreamReset", err)
		}
		if !errors.Is(got, &network.StreamError{ErrorCode: 7, Remote: true}) {
			t.Errorf("parseError(%v) does not match its network.StreamError", err)
		}
		var bse *braid.StreamError
		if !errors.As(got, &bse) || bse.ErrorCode != 7 {
			t.Errorf("parseError(%v) does not unwrap to the *braid.StreamError", err)
		}
	}

	local := parseError(&braid.StreamError{ErrorCode: 3})
	var se *network.StreamError
	if !errors.As(local, &se) || se.Remote || se.ErrorCode != 3 {
		t.Errorf("local reset mapped to %#v", local)
	}

	// A go-away, alone or as the cause of a dead stream.
	for _, err := range []error{
		&braid.GoAwayError{ErrorCode: 9, Remote: true},
		fmt.Errorf("%w: %w", braid.ErrSessionClosed, &braid.GoAwayError{ErrorCode: 9, Remote: true}),
	} {
		got := parseError(err)
		var ce *network.ConnError
		if !errors.As(got, &ce) || ce.ErrorCode != 9 || !ce.Remote || ce.TransportError != err {
			t.Errorf("parseError(%v) = %#v, want a *network.ConnError with code 9, remote", err, got)
		}
		if !errors.Is(got, network.ErrReset) || !errors.Is(got, braid.ErrRemoteGoAway) {
			t.Errorf("parseError(%v) does not match network.ErrReset and braid.ErrRemoteGoAway", err)
		}
		var ge *braid.GoAwayError
		if !errors.As(got, &ge) || ge.ErrorCode != 9 {
			t.Errorf("parseError(%v) does not unwrap to the *braid.GoAwayError", err)
		}
	}

	// A stream cut short by its session's end: a reset, without a code.
	cut := fmt.Errorf("%w: %w", braid.ErrStreamReset, io.ErrUnexpectedEOF)
	got := parseError(cut)
	if !errors.Is(got, network.ErrReset) || !errors.Is(got, braid.ErrStreamReset) || !errors.Is(got, io.ErrUnexpectedEOF) {
		t.Errorf("parseError(%v) = %v, want it to match network.ErrReset and keep its causes", cut, got)
	}
	if errors.As(got, &se) {
		t.Errorf("parseError(%v) = %v, want no *network.StreamError", cut, got)
	}
}

// pipeConns returns a client and a server MuxedConn of tr over net.Pipe,
// closed at the end of the test.
func pipeConns(t *testing.T, tr network.Multiplexer, scope network.PeerScope) (client, server network.MuxedConn) {
	t.Helper()
	a, b := net.Pipe()
	client, err := tr.NewConn(a, false, scope)
	if err != nil {
		t.Fatal(err)
	}
	server, err = tr.NewConn(b, true, scope)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.Close()
		_ = server.Close()
	})
	return client, server
}

// openPair opens a stream on c1, writes a byte so that it reaches the
// peer, and accepts it on c2.
func openPair(t *testing.T, c1, c2 network.MuxedConn) (s1, s2 network.MuxedStream) {
	t.Helper()
	s1, err := c1.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	s2, err = c2.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s2, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return s1, s2
}

func TestStreamResetWithError(t *testing.T) {
	client, server := pipeConns(t, DefaultTransport, nil)
	cs, ss := openPair(t, client, server)

	if err := ss.ResetWithError(42); err != nil {
		t.Fatal(err)
	}
	_, err := cs.Read(make([]byte, 1))
	var se *network.StreamError
	if !errors.As(err, &se) || se.ErrorCode != 42 || !se.Remote {
		t.Fatalf("read after the peer's reset: %v, want a remote *network.StreamError with code 42", err)
	}
	if !errors.Is(err, network.ErrReset) {
		t.Errorf("read after the peer's reset: %v does not match network.ErrReset", err)
	}
	_, err = ss.Write([]byte{1})
	if !errors.As(err, &se) || se.ErrorCode != 42 || se.Remote || !errors.Is(err, network.ErrReset) {
		t.Errorf("write after a local reset: %v, want a local *network.StreamError with code 42", err)
	}
}

func TestCloseWithError(t *testing.T) {
	client, server := pipeConns(t, DefaultTransport, nil)
	cs, _ := openPair(t, client, server)

	if err := server.CloseWithError(network.ConnErrorCode(9)); err != nil {
		t.Fatal(err)
	}
	if !server.IsClosed() {
		t.Error("server conn not closed after CloseWithError")
	}
	_, err := cs.Read(make([]byte, 1))
	var ce *network.ConnError
	if !errors.As(err, &ce) || ce.ErrorCode != 9 || !ce.Remote || !errors.Is(err, network.ErrReset) {
		t.Errorf("read after the peer's CloseWithError: %v, want a remote *network.ConnError with code 9", err)
	}
	s, err := client.AcceptStream()
	if s != nil {
		t.Errorf("AcceptStream on a closed conn returned a stream: %#v", s)
	}
	if !errors.As(err, &ce) || ce.ErrorCode != 9 {
		t.Errorf("AcceptStream on a conn closed by the peer: %v, want a *network.ConnError", err)
	}
	waitFor(t, client.IsClosed, "the client conn to close")
	if s, err := client.OpenStream(context.Background()); s != nil || err == nil {
		t.Errorf("OpenStream on a closed conn: %v, %v", s, err)
	}
}

func TestAs(t *testing.T) {
	client, server := pipeConns(t, DefaultTransport, nil)
	cs, _ := openPair(t, client, server)

	var sess *braid.Session
	if !client.As(&sess) || sess == nil {
		t.Fatal("MuxedConn.As(**braid.Session) failed")
	}
	var bs *braid.Stream
	a, ok := cs.(interface{ As(any) bool })
	if !ok || !a.As(&bs) || bs == nil || bs.Session() != sess {
		t.Fatal("MuxedStream.As(**braid.Stream) failed")
	}
	var other *net.Conn
	if client.As(&other) || a.As(&other) || client.As(sess) {
		t.Error("As succeeded for a wrong target")
	}
}
