package braid

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// connTypes are the conns every behaviour test runs over.
func connTypes() map[string]func(t testing.TB) (net.Conn, net.Conn) {
	return map[string]func(t testing.TB) (net.Conn, net.Conn){
		"tcp":  tcpPair,
		"pipe": func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() },
	}
}

func TestEchoManyStreams(t *testing.T) {
	for name, mk := range connTypes() {
		for _, coalesce := range []bool{true, false} {
			t.Run(name+map[bool]string{true: "/coalesce", false: "/plain"}[coalesce], func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.DisableCoalescing = !coalesce
				c1, c2 := mk(t)
				client, server := sessionPairOver(t, c1, c2, cfg)
				go echoServer(server)
				var wg sync.WaitGroup
				for i := 0; i < 20; i++ {
					wg.Add(1)
					go func(size int) {
						defer wg.Done()
						if err := echoCheck(client, size); err != nil {
							t.Error(err)
						}
					}(1 + i*37*1024)
				}
				wg.Wait()
			})
		}
	}
}

// echoServer accepts streams and echoes each until its peer closes it.
func echoServer(s *Session) {
	for {
		st, err := s.AcceptStream()
		if err != nil {
			return
		}
		go func() {
			_, _ = io.Copy(st, st)
			_ = st.CloseWrite()
		}()
	}
}

// echoCheck sends size random bytes over a new stream and checks that the
// echo hashes the same.
func echoCheck(s *Session, size int) error {
	st, err := s.OpenStream(context.Background())
	if err != nil {
		return err
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
		return err
	}
	if err := <-errc; err != nil {
		return err
	}
	want := sha256.Sum256(data)
	if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		return errors.New("echo differs")
	}
	return nil
}

func TestPing(t *testing.T) {
	client, server := sessionPair(t, nil)
	for _, s := range []*Session{client, server} {
		rtt, err := s.Ping()
		if err != nil || rtt <= 0 {
			t.Fatalf("ping: %v %v", rtt, err)
		}
	}
}

func TestResetCarriesCode(t *testing.T) {
	client, server := sessionPair(t, nil)
	st, err := client.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	peer, err := server.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ResetWithError(42); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	var rerr error
	for rerr == nil {
		_, rerr = peer.Read(buf)
	}
	var se *StreamError
	if !errors.As(rerr, &se) || se.ErrorCode != 42 || !se.Remote || !errors.Is(rerr, ErrStreamReset) {
		t.Fatalf("got %v", rerr)
	}
	if _, err := st.Write([]byte("x")); !errors.As(err, &se) || se.Remote || se.ErrorCode != 42 {
		t.Fatalf("local write after reset: %v", err)
	}
}

// TestSessionCloseCutsStreams proves that closing a session wakes the
// peer's Read already blocked on an open stream with an error matching
// ErrStreamReset, never io.EOF. In a synctest bubble over net.Pipe,
// synctest.Wait tells when the Read has blocked.
func TestSessionCloseCutsStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c1, c2 := net.Pipe()
		client, server := sessionPairOver(t, c1, c2, nil)
		st, err := client.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		peer, err := server.AcceptStream()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			b := make([]byte, 10)
			for {
				if _, err := peer.Read(b); err != nil {
					done <- err
					return
				}
			}
		}()
		synctest.Wait() // the "x" is read; Read blocks for more
		select {
		case err := <-done:
			t.Fatalf("Read returned %v before the session closed", err)
		default:
		}
		client.Close()
		select {
		case err := <-done:
			if err == io.EOF || !errors.Is(err, ErrStreamReset) {
				t.Fatalf("cut stream read returned %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("read not woken")
		}
	})
}
