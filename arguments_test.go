package braid

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every exported constructor and method with nil, zero and odd arguments,
// and on a closed session: each returns a documented error or works, and
// nothing panics, in the caller's goroutine or in the session's (a panic
// there would end the test binary). goleak (TestMain) checks that a refused
// constructor started no goroutine.

// nilConn is a net.Conn type whose methods dereference their receiver, as
// most do: a nil *nilConn would panic in the session's goroutines.
type nilConn struct{ net.Conn }

func (c *nilConn) Read(b []byte) (int, error) { return c.Conn.Read(b) }

func TestNilConn(t *testing.T) {
	conns := map[string]net.Conn{
		"nil":              nil,
		"nil *net.TCPConn": (*net.TCPConn)(nil),
		"nil *nilConn":     (*nilConn)(nil),
	}
	for name, conn := range conns {
		for _, cfg := range []*Config{nil, {}, DefaultConfig(), {Protocol: Mplex}} {
			for side, ctor := range map[string]func(net.Conn, *Config) (*Session, error){"Client": Client, "Server": Server} {
				s, err := ctor(conn, cfg)
				if s != nil || !errors.Is(err, ErrNilConn) || !errors.Is(err, os.ErrInvalid) {
					t.Errorf("%s(%s, %+v) = %v, %v; want ErrNilConn", side, name, cfg, s, err)
				}
			}
		}
	}
	// A nil conn is reported before an invalid config: the conn is the
	// first argument.
	if _, err := Client(nil, &Config{MaxBatchBytes: -1}); !errors.Is(err, ErrNilConn) {
		t.Errorf("Client(nil, invalid) = %v, want ErrNilConn", err)
	}
}

func bothProtocols(t *testing.T, f func(t *testing.T, cfg *Config)) {
	for _, p := range []Protocol{Yamux, Mplex} {
		t.Run(p.String(), func(t *testing.T) { f(t, &Config{Protocol: p}) })
	}
}

// TestSessionArguments: Session methods with nil and odd arguments.
func TestSessionArguments(t *testing.T) {
	bothProtocols(t, func(t *testing.T, cfg *Config) {
		client, server := sessionPair(t, cfg)

		//lint:ignore SA1012 a nil context is the point
		st, err := client.OpenStream(nil)
		if st != nil || !errors.Is(err, ErrNilContext) || !errors.Is(err, os.ErrInvalid) {
			t.Errorf("OpenStream(nil) = %v, %v; want ErrNilContext", st, err)
		}

		// An already cancelled context: the context's error, and no
		// stream opened (as net.Dialer.DialContext dials nothing).
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		st, err = client.OpenStream(ctx)
		require.ErrorIs(t, err, context.Canceled)
		require.Nil(t, st)
		require.Zero(t, client.NumStreams(), "no stream opened")
		// An expired deadline: the same.
		ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		if st, err := client.OpenStream(ctx); err == nil {
			peer, aerr := server.AcceptStream()
			require.NoError(t, aerr)
			require.NoError(t, st.Reset())
			_ = peer.Reset()
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("OpenStream(expired) = %v, want context.DeadlineExceeded or a stream", err)
		}

		if _, err := client.Ping(); cfg.Protocol == Mplex && !errors.Is(err, ErrNotSupported) {
			t.Errorf("mplex Ping: %v, want ErrNotSupported", err)
		} else if cfg.Protocol == Yamux && err != nil {
			t.Errorf("Ping: %v", err)
		}
		require.NoError(t, server.GoAway())
		require.NoError(t, server.GoAway()) // twice is fine
		if client.LocalAddr() == nil || client.RemoteAddr() == nil {
			t.Error("nil address")
		}
		_ = client.Stats()
		_ = client.RTT()
		require.NoError(t, client.CloseWithError(math.MaxUint32))
		require.NoError(t, server.Close())
	})
}

// TestClosedSession: every method of a closed session returns at once,
// with ErrSessionClosed where it fails.
func TestClosedSession(t *testing.T) {
	bothProtocols(t, func(t *testing.T, cfg *Config) {
		client, server := sessionPair(t, cfg)
		st, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		peer, err := server.AcceptStream()
		require.NoError(t, err)
		require.NoError(t, client.Close())
		require.NoError(t, client.Close())
		require.NoError(t, client.CloseWithError(GoAwayInternalError))

		if !client.IsClosed() {
			t.Error("IsClosed after Close is false")
		}
		select {
		case <-client.CloseChan():
		default:
			t.Error("CloseChan not closed after Close")
		}
		if err := client.Err(); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("Err = %v, want ErrSessionClosed", err)
		}
		if _, err := client.OpenStream(context.Background()); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("OpenStream = %v, want ErrSessionClosed", err)
		}
		if _, err := client.AcceptStream(); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("AcceptStream = %v, want ErrSessionClosed", err)
		}
		if _, err := client.Ping(); !errors.Is(err, ErrSessionClosed) && !errors.Is(err, ErrNotSupported) {
			t.Errorf("Ping = %v, want ErrSessionClosed", err)
		}
		if err := client.GoAway(); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("GoAway = %v, want ErrSessionClosed", err)
		}
		if n := client.NumStreams(); n != 0 {
			t.Errorf("NumStreams = %d", n)
		}
		_, _, _ = client.Stats(), client.RTT(), client.Config()
		_, _ = client.LocalAddr(), client.RemoteAddr()

		// The stream of a closed session: a reset, never io.EOF.
		if _, err := st.Read(make([]byte, 1)); !errors.Is(err, ErrStreamReset) || errors.Is(err, io.EOF) {
			t.Errorf("Read = %v, want a reset", err)
		}
		if _, err := st.Write([]byte("x")); !errors.Is(err, ErrStreamReset) {
			t.Errorf("Write = %v, want a reset", err)
		}
		if n, err := st.Write(nil); n != 0 || !errors.Is(err, ErrStreamReset) {
			// Writing nothing reports the state a Write would fail
			// with, as a net.Conn's zero-length Write does after Close
			// or past its deadline.
			t.Errorf("Write(nil) = %d, %v, want a reset", n, err)
		}
		_ = st.CloseWrite()
		_ = st.CloseRead()
		_ = st.Close()
		require.NoError(t, st.Reset())
		require.NoError(t, st.ResetWithError(1))
		require.NoError(t, st.SetDeadline(time.Now()))
		require.NoError(t, st.SetReadDeadline(time.Time{}))
		require.NoError(t, st.SetWriteDeadline(time.Unix(0, 0)))
		if st.Session() != client || st.LocalAddr() == nil || st.RemoteAddr() == nil {
			t.Error("stream accessors")
		}

		// The peer's side ends too, with a reset, not io.EOF.
		_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(peer); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Error("peer's stream still open 5 s after the session closed")
		}
	})
}

// TestStreamArguments: Stream methods with nil buffers, zero-length
// writes, deadlines in the past and every reset code, and calls repeated
// after the stream is closed.
func TestStreamArguments(t *testing.T) {
	bothProtocols(t, func(t *testing.T, cfg *Config) {
		_, _, a, b := streamPair(t, cfg)

		for _, p := range [][]byte{nil, {}} {
			if n, err := a.Write(p); n != 0 || err != nil {
				t.Errorf("Write(%v) = %d, %v", p, n, err)
			}
			// A zero-length Read returns at once, without data waiting.
			if n, err := b.Read(p); n != 0 || err != nil {
				t.Errorf("Read(%v) = %d, %v", p, n, err)
			}
		}
		// A zero-length Read with data waiting takes nothing.
		_, err := a.Write([]byte("ab"))
		require.NoError(t, err)
		got := make([]byte, 2)
		_, err = io.ReadFull(b, got[:1])
		require.NoError(t, err)
		if n, err := b.Read(nil); n != 0 || err != nil {
			t.Errorf("Read(nil) with data = %d, %v", n, err)
		}
		_, err = io.ReadFull(b, got[1:])
		require.NoError(t, err)
		require.Equal(t, "ab", string(got))

		// Deadlines in the past and the zero time.
		for _, d := range []time.Time{time.Unix(0, 0), time.Now().Add(-time.Hour), time.Time{}.Add(1)} {
			require.NoError(t, b.SetReadDeadline(d))
			if _, err := b.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("Read past deadline %v: %v", d, err)
			}
		}
		require.NoError(t, b.SetReadDeadline(time.Time{})) // no deadline again
		require.NoError(t, a.SetWriteDeadline(time.Unix(0, 0)))
		if _, err := a.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Write past deadline: %v", err)
		}
		require.NoError(t, a.SetDeadline(time.Time{}))

		// Closing twice, and every call after Close.
		require.NoError(t, a.CloseWrite())
		require.NoError(t, a.CloseWrite())
		if _, err := a.Write([]byte("x")); !errors.Is(err, ErrStreamClosed) {
			t.Errorf("Write after CloseWrite: %v", err)
		}
		require.NoError(t, a.CloseRead())
		require.NoError(t, a.CloseRead())
		if _, err := a.Read(make([]byte, 1)); !errors.Is(err, ErrStreamClosed) {
			t.Errorf("Read after CloseRead: %v", err)
		}
		require.NoError(t, a.Close())
		// b resets first (a's FIN may have arrived, a's RST can't have):
		// its own reset, with the largest code, is what its calls report.
		require.NoError(t, b.ResetWithError(math.MaxUint32))
		require.NoError(t, b.ResetWithError(0))
		require.NoError(t, b.Close())
		var se *StreamError
		if _, err := b.Write([]byte("x")); !errors.As(err, &se) || se.ErrorCode != math.MaxUint32 || se.Remote {
			t.Errorf("Write after ResetWithError(MaxUint32): %v", err)
		}
		require.NoError(t, a.Reset())
		require.NoError(t, a.Reset())
	})
}

// TestProtocolString: an unknown Protocol prints as such.
func TestProtocolString(t *testing.T) {
	if s := Protocol(-1).String(); s != "unknown protocol" {
		t.Errorf("Protocol(-1) = %q", s)
	}
}

// brokenConn breaks the io contracts its way: Read or Write returns a
// count outside [0, len(p)].
type brokenConn struct {
	net.Conn
	readN, writeN func(len int) int // nil: the real count
}

func (c brokenConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.readN != nil && n > 0 {
		return c.readN(len(p)), err
	}
	return n, err
}

func (c brokenConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.writeN != nil {
		return c.writeN(len(p)), err
	}
	return n, err
}

// TestBrokenConn: a conn whose Read or Write returns an impossible count
// ends the session with an error instead of a panic in its goroutines.
func TestBrokenConn(t *testing.T) {
	counts := map[string]func(int) int{
		"negative":    func(int) int { return -1 },
		"over len(p)": func(n int) int { return n + 1 },
	}
	for name, count := range counts {
		for _, side := range []string{"read", "write"} {
			t.Run(side+" "+name, func(t *testing.T) {
				c1, c2 := tcpPair(t)
				bc := brokenConn{Conn: c1}
				if side == "read" {
					bc.readN = count
				} else {
					bc.writeN = count
				}
				broken, err := Client(bc, nil)
				require.NoError(t, err)
				peer, err := Server(c2, nil)
				require.NoError(t, err)
				defer peer.Close()
				// Traffic both ways: the broken side writes its SYN, the
				// peer's ACK and pong reach its read loop.
				if st, err := broken.OpenStream(context.Background()); err == nil {
					_, _ = st.Write([]byte("x"))
				}
				select {
				case <-broken.CloseChan():
				case <-time.After(5 * time.Second):
					t.Fatal("session still open 5 s after its conn broke the io contract")
				}
				want := errInvalidRead
				if side == "write" {
					want = errInvalidWrite
				}
				if err := broken.Err(); !errors.Is(err, want) || !errors.Is(err, ErrSessionClosed) {
					t.Errorf("Err = %v, want %v", err, want)
				}
				broken.Close()
			})
		}
	}
}
