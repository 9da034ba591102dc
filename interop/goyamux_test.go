package interop_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
	yamux "github.com/libp2p/go-yamux/v5"
	"github.com/stretchr/testify/require"
)

// Interop tests: braid on one end of a loopback TCP connection, go-yamux
// v5.1.0 (the reference implementation of the wire protocol) on the other,
// in both roles.

// muxStream is what both implementations' streams offer.
type muxStream interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// muxEnd is one end of an interop connection, whichever implementation.
type muxEnd struct {
	name   string
	open   func(context.Context) (muxStream, error)
	accept func() (muxStream, error)
	ping   func() (time.Duration, error)
}

func braidEnd(s *braid.Session) muxEnd {
	return muxEnd{
		name:   "braid",
		open:   func(ctx context.Context) (muxStream, error) { return s.OpenStream(ctx) },
		accept: func() (muxStream, error) { return s.AcceptStream() },
		ping:   s.Ping,
	}
}

func yamuxEnd(s *yamux.Session) muxEnd {
	return muxEnd{
		name:   "go-yamux",
		open:   func(ctx context.Context) (muxStream, error) { return s.OpenStream(ctx) },
		accept: func() (muxStream, error) { return s.AcceptStream() },
		ping:   s.Ping,
	}
}

// yamuxConfig is go-yamux's default configuration without its logging.
func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	return cfg
}

// interopPair connects a braid session and a go-yamux session over loopback
// TCP; braidClient picks which one is the client. Both are closed when the
// test ends.
func interopPair(t testing.TB, braidClient bool) (*braid.Session, *yamux.Session) {
	t.Helper()
	c1, c2 := tcpPair(t)
	var (
		bs  *braid.Session
		ys  *yamux.Session
		err error
	)
	if braidClient {
		bs, err = braid.Client(c1, nil)
		require.NoError(t, err)
		ys, err = yamux.Server(c2, yamuxConfig(), nil)
	} else {
		ys, err = yamux.Client(c1, yamuxConfig(), nil)
		require.NoError(t, err)
		bs, err = braid.Server(c2, nil)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = bs.Close()
		_ = ys.Close()
	})
	return bs, ys
}

// forBothRoles runs f with braid as the client and then as the server.
func forBothRoles(t *testing.T, f func(t *testing.T, bs *braid.Session, ys *yamux.Session)) {
	for _, braidClient := range []bool{true, false} {
		name := "braid-client"
		if !braidClient {
			name = "braid-server"
		}
		t.Run(name, func(t *testing.T) {
			bs, ys := interopPair(t, braidClient)
			f(t, bs, ys)
		})
	}
}

// genericEchoServer echoes every accepted stream until its peer half-closes.
func genericEchoServer(e muxEnd) {
	for {
		st, err := e.accept()
		if err != nil {
			return
		}
		go func() {
			_, _ = io.Copy(st, st)
			_ = st.CloseWrite()
		}()
	}
}

// genericEchoCheck sends size random bytes on a new stream of e and checks
// that the echo has the same SHA-256.
func genericEchoCheck(ctx context.Context, e muxEnd, size int) error {
	st, err := e.open(ctx)
	if err != nil {
		return fmt.Errorf("%s open: %w", e.name, err)
	}
	defer st.Close()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		_, err := st.Write(data)
		if err == nil {
			err = st.CloseWrite()
		}
		errc <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, st)
	if err != nil {
		return fmt.Errorf("%s read: %w", e.name, err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("%s write: %w", e.name, err)
	}
	want := sha256.Sum256(data)
	if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("%s: echo of %d bytes differs (got %d bytes)", e.name, size, n)
	}
	return nil
}

// TestInteropConcurrentEcho proves that streams opened from both sides at
// once, with sizes from 1 byte to beyond the initial window, are echoed
// intact between braid and go-yamux.
func TestInteropConcurrentEcho(t *testing.T) {
	forBothRoles(t, func(t *testing.T, bs *braid.Session, ys *yamux.Session) {
		b, y := braidEnd(bs), yamuxEnd(ys)
		go genericEchoServer(b)
		go genericEchoServer(y)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			for _, e := range []muxEnd{b, y} {
				wg.Add(1)
				go func(e muxEnd, size int) {
					defer wg.Done()
					if err := genericEchoCheck(ctx, e, size); err != nil {
						t.Error(err)
					}
				}(e, 1+i*29*1024)
			}
		}
		wg.Wait()
	})
}

// TestInteropHalfClose proves that CloseWrite on either side delivers io.EOF
// after the data, and that the other direction keeps working.
func TestInteropHalfClose(t *testing.T) {
	forBothRoles(t, func(t *testing.T, bs *braid.Session, ys *yamux.Session) {
		for _, dir := range [][2]muxEnd{{braidEnd(bs), yamuxEnd(ys)}, {yamuxEnd(ys), braidEnd(bs)}} {
			opener, acceptor := dir[0], dir[1]
			t.Run(opener.name+"-closes", func(t *testing.T) {
				st, err := opener.open(context.Background())
				require.NoError(t, err)
				defer st.Close()
				_, err = st.Write([]byte("hello"))
				require.NoError(t, err)
				require.NoError(t, st.CloseWrite())

				peer, err := acceptor.accept()
				require.NoError(t, err)
				defer peer.Close()
				got, err := io.ReadAll(peer) // ends with io.EOF, not an error
				require.NoError(t, err)
				require.Equal(t, "hello", string(got))

				// The half-closed side still reads what the peer writes.
				_, err = peer.Write([]byte("world"))
				require.NoError(t, err)
				require.NoError(t, peer.CloseWrite())
				got, err = io.ReadAll(st)
				require.NoError(t, err)
				require.Equal(t, "world", string(got))
			})
		}
	})
}

// readErr reads from r until an error and returns it.
func readErr(r io.Reader) error {
	buf := make([]byte, 1024)
	for {
		if _, err := r.Read(buf); err != nil {
			return err
		}
	}
}

// TestInteropResetCodes proves that reset error codes cross the wire both
// ways: braid's ResetWithError(7) is a remote *yamux.StreamError with code
// 7 at go-yamux, and go-yamux's ResetWithError(9) a remote *StreamError
// with code 9 at braid.
func TestInteropResetCodes(t *testing.T) {
	forBothRoles(t, func(t *testing.T, bs *braid.Session, ys *yamux.Session) {
		// braid resets.
		st, err := bs.OpenStream(context.Background())
		require.NoError(t, err)
		_, err = st.Write([]byte("x"))
		require.NoError(t, err)
		yst, err := ys.AcceptStream()
		require.NoError(t, err)
		require.NoError(t, st.ResetWithError(7))
		var yerr *yamux.StreamError
		rerr := readErr(yst)
		require.ErrorAs(t, rerr, &yerr)
		require.Equal(t, yamux.StreamError{ErrorCode: 7, Remote: true}, *yerr)

		// go-yamux resets.
		yst2, err := ys.OpenStream(context.Background())
		require.NoError(t, err)
		_, err = yst2.Write([]byte("y"))
		require.NoError(t, err)
		st2, err := bs.AcceptStream()
		require.NoError(t, err)
		require.NoError(t, yst2.ResetWithError(9))
		var berr *braid.StreamError
		rerr = readErr(st2)
		require.ErrorAs(t, rerr, &berr)
		require.Equal(t, braid.StreamError{ErrorCode: 9, Remote: true}, *berr)
		require.ErrorIs(t, rerr, braid.ErrStreamReset)
		// A reset stream leaves braid's table.
		require.Eventually(t, func() bool { return bs.NumStreams() == 0 }, 5*time.Second, 5*time.Millisecond)
	})
}

// TestInteropPing proves that pings are answered both ways.
func TestInteropPing(t *testing.T) {
	forBothRoles(t, func(t *testing.T, bs *braid.Session, ys *yamux.Session) {
		for _, e := range []muxEnd{braidEnd(bs), yamuxEnd(ys)} {
			rtt, err := e.ping()
			require.NoError(t, err, e.name)
			require.Positive(t, rtt, e.name)
		}
	})
}

// TestInteropGoAwayFromBraid proves that braid's CloseWithError(5) reaches
// go-yamux as a remote go-away with code 5, which ends its session.
func TestInteropGoAwayFromBraid(t *testing.T) {
	forBothRoles(t, func(t *testing.T, bs *braid.Session, ys *yamux.Session) {
		// A stream open on the go-yamux side must be cut by the go-away.
		st, err := bs.OpenStream(context.Background())
		require.NoError(t, err)
		_, err = st.Write([]byte("x"))
		require.NoError(t, err)
		yst, err := ys.AcceptStream()
		require.NoError(t, err)

		require.NoError(t, bs.CloseWithError(5))
		select {
		case <-ys.CloseChan():
		case <-time.After(5 * time.Second):
			t.Fatal("go-yamux session still open after braid's go-away")
		}
		// The go-away is in flight when braid closes the conn. go-yamux may
		// see its own write fail first (braid's close can turn into a TCP
		// RST that discards unread bytes, a caveat go-yamux documents for
		// its own CloseWithError), so the code is checked when it arrives.
		_, err = ys.AcceptStream()
		require.Error(t, err)
		if ga := (*yamux.GoAwayError)(nil); errors.As(err, &ga) {
			require.Equal(t, yamux.GoAwayError{ErrorCode: 5, Remote: true}, *ga)
		} else {
			t.Logf("go-yamux closed without seeing the go-away: %v", err)
		}
		require.Error(t, readErr(yst))

		// braid's own calls fail with the local go-away.
		_, err = bs.OpenStream(context.Background())
		var bga *braid.GoAwayError
		require.ErrorAs(t, err, &bga)
		require.Equal(t, braid.GoAwayError{ErrorCode: 5}, *bga)
	})
}

// TestInteropGoAwayFromYamux proves that go-yamux's CloseWithError reaches
// braid as a remote *GoAwayError, which ends braid's session.
func TestInteropGoAwayFromYamux(t *testing.T) {
	forBothRoles(t, func(t *testing.T, bs *braid.Session, ys *yamux.Session) {
		require.NoError(t, ys.CloseWithError(3))
		select {
		case <-bs.CloseChan():
		case <-time.After(5 * time.Second):
			t.Fatal("braid session still open after go-yamux's go-away")
		}
		err := bs.Err()
		var ga *braid.GoAwayError
		require.ErrorAs(t, err, &ga)
		require.Equal(t, braid.GoAwayError{ErrorCode: 3, Remote: true}, *ga)
		require.ErrorIs(t, err, braid.ErrRemoteGoAway)
		require.ErrorIs(t, err, braid.ErrSessionClosed)
		_, err = bs.OpenStream(context.Background())
		require.ErrorIs(t, err, braid.ErrSessionClosed)
	})
}

// TestInteropNormalGoAwayFromYamux proves braid's documented difference: a
// normal (code 0) go-away from go-yamux refuses new streams but keeps the
// session and its open streams working (until go-yamux closes the conn).
func TestInteropNormalGoAwayFromYamux(t *testing.T) {
	forBothRoles(t, func(t *testing.T, bs *braid.Session, ys *yamux.Session) {
		st, err := bs.OpenStream(context.Background())
		require.NoError(t, err)
		defer st.Close()
		_, err = st.Write([]byte("ping"))
		require.NoError(t, err)
		yst, err := ys.AcceptStream()
		require.NoError(t, err)
		defer yst.Close()

		require.NoError(t, ys.GoAway())
		require.Eventually(t, func() bool {
			_, err := bs.OpenStream(context.Background())
			return errors.Is(err, braid.ErrRemoteGoAway)
		}, 5*time.Second, 5*time.Millisecond)
		require.False(t, bs.IsClosed())

		// The open stream still carries data both ways.
		buf := make([]byte, 4)
		_, err = io.ReadFull(yst, buf)
		require.NoError(t, err)
		_, err = yst.Write([]byte("pong"))
		require.NoError(t, err)
		_, err = io.ReadFull(st, buf)
		require.NoError(t, err)
		require.Equal(t, "pong", string(buf))
	})
}

// TestInteropLargeTransfer proves that 64 MiB on one stream crosses intact
// in each direction at once (window updates and go-yamux's auto-tuning
// interoperate without stalls).
func TestInteropLargeTransfer(t *testing.T) {
	const size = 64 << 20
	forBothRoles(t, func(t *testing.T, bs *braid.Session, ys *yamux.Session) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, dir := range [][2]muxEnd{{braidEnd(bs), yamuxEnd(ys)}, {yamuxEnd(ys), braidEnd(bs)}} {
			wg.Add(1)
			go func(sender, receiver muxEnd) {
				defer wg.Done()
				if err := transferCheck(ctx, sender, receiver, size); err != nil {
					t.Error(err)
				}
			}(dir[0], dir[1])
		}
		wg.Wait()
	})
}

// transferCheck sends size pseudo-random bytes from sender to receiver on a
// new stream and compares SHA-256 hashes.
func transferCheck(ctx context.Context, sender, receiver muxEnd, size int) error {
	// Each side opens exactly one stream, so receiver.accept gets ours.
	st, err := sender.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	chunk := make([]byte, 1<<20)
	_, _ = rand.Read(chunk)
	want := sha256.New()
	errc := make(chan error, 1)
	go func() {
		for sent := 0; sent < size; sent += len(chunk) {
			chunk[0] = byte(sent >> 20) // vary the chunks
			want.Write(chunk)
			if _, err := st.Write(chunk); err != nil {
				errc <- err
				return
			}
		}
		errc <- st.CloseWrite()
	}()
	peer, err := receiver.accept()
	if err != nil {
		return err
	}
	defer peer.Close()
	got := sha256.New()
	n, err := io.Copy(got, peer)
	if err != nil {
		return fmt.Errorf("%s -> %s: read after %d bytes: %w", sender.name, receiver.name, n, err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("%s -> %s: write: %w", sender.name, receiver.name, err)
	}
	if n != int64(size) || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		return fmt.Errorf("%s -> %s: got %d bytes, hash differs", sender.name, receiver.name, n)
	}
	return nil
}

var _ net.Conn = (*braid.Stream)(nil)
