package interop_test

import (
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/braidmux/braid"
	yamux "github.com/libp2p/go-yamux/v5"
)

// go-yamux beyond the matrix: what only go-yamux exercises.

// yamuxConfig is go-yamux's default configuration without its logging.
func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	return cfg
}

// TestGoYamuxLargeTransfer proves that 64 MiB on one stream cross intact
// in each direction at once, long enough for braid's window growth and
// go-yamux's auto-tuning to meet (the matrix's 16 MiB end sooner).
func TestGoYamuxLargeTransfer(t *testing.T) {
	const size = 64 << 20
	for _, braidClient := range []bool{true, false} {
		t.Run(map[bool]string{true: "braid-client", false: "braid-server"}[braidClient], func(t *testing.T) {
			e := newMatrixEnv(t, goYamuxPeer(), braidClient)
			a, b := e.established(t, e.braidEnd(), e.peerEnd())
			var wg sync.WaitGroup
			for _, dir := range [][2]peerStream{{a, b}, {b, a}} {
				wg.Go(func() {
					if err := transfer(dir[0], dir[1], size); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestGoYamuxGoAwayWithCode proves that go-yamux's CloseWithError(3)
// reaches braid as a remote *GoAwayError with code 3, which ends braid's
// session and cuts its open stream with it (never io.EOF).
func TestGoYamuxGoAwayWithCode(t *testing.T) {
	for _, braidClient := range []bool{true, false} {
		t.Run(map[bool]string{true: "braid-client", false: "braid-server"}[braidClient], func(t *testing.T) {
			c1, c2 := tcpPair(t)
			braidConn, yamuxConn := c1, c2
			newBraid, newYamux := braid.Client, yamux.Server
			if !braidClient {
				braidConn, yamuxConn = c2, c1
				newBraid, newYamux = braid.Server, yamux.Client
			}
			bs, err := newBraid(braidConn, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer bs.Close()
			ys, err := newYamux(yamuxConn, yamuxConfig(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ys.Close()
			st, err := bs.OpenStream(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, err := ys.AcceptStream(); err != nil {
				t.Fatal(err)
			}
			if err := ys.CloseWithError(3); err != nil {
				t.Fatal(err)
			}
			want := braid.GoAwayError{ErrorCode: 3, Remote: true}
			_ = st.SetDeadline(deadlineIn())
			for what, err := range map[string]error{"Read": readErr(st), "Session.Err": bs.Err()} {
				var ga *braid.GoAwayError
				switch {
				case errors.Is(err, io.EOF):
					t.Errorf("%s: %q matches io.EOF", what, err)
				case !errors.As(err, &ga) || *ga != want:
					t.Errorf("%s: %v, want %v", what, err, &want)
				case !errors.Is(err, braid.ErrRemoteGoAway) || !errors.Is(err, braid.ErrSessionClosed) || !errors.Is(err, braid.ErrStreamReset):
					t.Errorf("%s: %v does not match ErrRemoteGoAway, ErrSessionClosed and ErrStreamReset", what, err)
				}
			}
			if _, err := bs.OpenStream(t.Context()); !errors.Is(err, braid.ErrSessionClosed) {
				t.Errorf("OpenStream: %v", err)
			}
		})
	}
}
