package braid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// The mplex push-back policy (issue #13, defect 2): mplex has no flow
// control, so a fast sender overruns a reader that is descheduled for a
// few milliseconds. braid then stops reading the connection (TCP pushes
// back on the sender) while the reader keeps reading, and resets only a
// stream whose reader has not read for Config.MaxReceiveStall. The other
// side of the policy, a reader that never reads, is slowReaderCheck's
// (mplex_test.go). interop/mplex_pushback_test.go runs the same with
// go-mplex v0.7.0 as the sender.

const (
	pushBackTotal   = 16 << 20  // bytes of the transfer
	pushBackMessage = 256 << 10 // one Write: js-libp2p's message size
	pushBackEvery   = 1 << 20   // the reader pauses after each MiB
	pushBackPause   = 20 * time.Millisecond
)

// pushBackConfig is mplexConfig with a 256 KiB receive buffer, so that
// every pause of the reader overruns it many times over.
func pushBackConfig() *Config {
	cfg := mplexConfig()
	cfg.MaxReceiveBuffer = 256 << 10
	return cfg
}

// pushBackByte is the transfer's byte at offset i.
func pushBackByte(i int) byte { return byte(i % 251) }

// pushBackCheck sends pushBackTotal bytes from e, as fast as it writes,
// to a braid session whose reader pauses pushBackPause after every
// pushBackEvery bytes. Every byte must arrive, in order, and the stream
// end with the sender's close: never a reset.
func pushBackCheck(t *testing.T, e mplexEnd, receiver *Session) {
	sent := make(chan error, 1)
	go func() {
		st, err := e.open(context.Background())
		if err != nil {
			sent <- err
			return
		}
		_ = st.SetDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, pushBackMessage)
		for off := 0; off < pushBackTotal; off += len(buf) {
			for i := range buf {
				buf[i] = pushBackByte(off + i)
			}
			if _, err := st.Write(buf); err != nil {
				sent <- fmt.Errorf("write at %d: %w", off, err)
				return
			}
		}
		sent <- st.CloseWrite()
	}()
	st, err := receiver.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64<<10)
	got, pauses := 0, 0
	start := time.Now()
	for {
		n, err := st.Read(buf)
		for i := range n {
			if buf[i] != pushBackByte(got+i) {
				t.Fatalf("byte %d: %d, want %d", got+i, buf[i], pushBackByte(got+i))
			}
		}
		if (got+n)/pushBackEvery != got/pushBackEvery {
			// A descheduled reader, reading flat out otherwise.
			time.Sleep(pushBackPause)
			pauses++
		}
		got += n
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read after %d bytes: %v", got, err)
		}
	}
	if got != pushBackTotal {
		t.Fatalf("read %d bytes, want %d", got, pushBackTotal)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MiB in %v with %d pauses of %v, no reset", got>>20, time.Since(start).Round(time.Millisecond), pauses, pushBackPause)
}

// TestMplexPushBackBraid: a braid sender and a braid reader that pauses.
func TestMplexPushBackBraid(t *testing.T) {
	c1, c2 := tcpPair(t)
	client, server := sessionPairOver(t, c1, c2, pushBackConfig())
	pushBackCheck(t, braidMplexEnd(client), server)
}

// TestMplexPushBackStoppedReader: a reader that read and then stopped is
// reset once MaxReceiveStall has passed since its last read, and the
// session goes on: an echo on another stream works after it.
func TestMplexPushBackStoppedReader(t *testing.T) {
	cfg := pushBackConfig()
	cfg.MaxReceiveStall = 50 * time.Millisecond
	c1, c2 := tcpPair(t)
	client, bs := sessionPairOver(t, c1, c2, cfg)
	e := braidMplexEnd(client)
	werr := make(chan error, 1)
	go func() {
		st, err := e.open(context.Background())
		if err != nil {
			werr <- err
			return
		}
		_ = st.SetDeadline(time.Now().Add(30 * time.Second))
		_, err = floodUntilReset(st, pushBackMessage, 0)
		werr <- err
	}()
	st, err := bs.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// The reader stops; the flood is reset.
	var se *StreamError
	if err := <-werr; !errors.As(err, &se) || !se.Remote {
		t.Fatalf("flood: %v, want a reset", err)
	}
	if waited := time.Since(stopped); waited < cfg.MaxReceiveStall {
		t.Fatalf("reset %v after the reader stopped, before MaxReceiveStall (%v)", waited, cfg.MaxReceiveStall)
	}
	var data [1 << 20]byte
	for {
		if _, err := st.Read(data[:]); err != nil {
			if !errors.Is(err, ErrReceiveBufferOverflow) {
				t.Fatalf("read after the reset: %v, want ErrReceiveBufferOverflow", err)
			}
			break
		}
	}
	// The session goes on.
	echo, err := e.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = echo.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := echo.Write([]byte("E")); err != nil {
		t.Fatal(err)
	}
	peer, err := bs.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	if _, err := io.ReadFull(peer, one[:]); err != nil || one[0] != 'E' {
		t.Fatalf("echo stream: %q, %v", one, err)
	}
}
