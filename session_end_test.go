package braid

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/braidmux/braid/slowconn"
)

// TestPendingCallsAtSessionEnd ends the connection in every way of
// connEnds while calls wait on the session: a Read, a Write blocked on the
// peer's window, an OpenStream blocked on the ACK backlog, an
// AcceptStream and a Ping. Each must return within closeBound of the end
// with an error matching the way's cause and ErrSessionClosed (a stream's
// also ErrStreamReset), never io.EOF.
func TestPendingCallsAtSessionEnd(t *testing.T) { forEachConnEnd(t, testPendingAtEnd) }

// closeBound is what Close may take: its flush and its linger, each at
// most a second, and a little.
const closeBound = closeFlushTimeout + closeLinger + 500*time.Millisecond

func testPendingAtEnd(t *testing.T, proto Protocol, ce connEnd) {
	// One stream may wait for its ACK: the next OpenStream waits.
	s, fc, p, st, _ := connEndSession(t, proto, ce, func(c *Config) { c.MaxUnackedStreams = 1 })
	cfg := s.cfg

	type result struct {
		what   string
		err    error
		stream bool
		at     time.Time
	}
	results := make(chan result, 8)
	pending := 0
	start := func(what string, stream bool, f func() error) {
		pending++
		go func() {
			err := f()
			results <- result{what, err, stream, time.Now()}
		}()
	}
	start("Read", true, func() error { _, err := st.Read(make([]byte, 10)); return err })
	start("AcceptStream", false, func() error { _, err := s.AcceptStream(); return err })
	pingBlocks := proto == Yamux && cfg.ConnectionWriteTimeout > closeBound
	if proto == Yamux {
		// Our stream, which the raw peer never acknowledges: the next
		// OpenStream waits for the ACK backlog, and a Write of more than
		// the window waits for credit.
		ours, err := s.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		start("Write", true, func() error { _, err := ours.Write(make([]byte, 2*InitialStreamWindow)); return err })
		start("OpenStream", false, func() error { _, err := s.OpenStream(context.Background()); return err })
		if pingBlocks {
			start("Ping", false, func() error { _, err := s.Ping(); return err })
		}
	}
	time.Sleep(100 * time.Millisecond) // every call waits
	select {
	case r := <-results:
		t.Fatalf("%s returned before the end: %v", r.what, r.err)
	default:
	}
	ended := time.Now()
	ce.end(t, p, fc, st)
	timeout := time.After(closeBound + time.Since(ended))
	for range pending {
		var r result
		select {
		case r = <-results:
		case <-timeout:
			t.Fatalf("a call still blocked %v after the end", time.Since(ended))
		}
		t.Logf("%s after %v: %v", r.what, r.at.Sub(ended), r.err)
		switch {
		case r.err == nil:
			t.Errorf("%s: no error", r.what)
		case errors.Is(r.err, io.EOF):
			t.Errorf("%s: %q matches io.EOF", r.what, r.err)
		case errors.Is(r.err, os.ErrDeadlineExceeded):
			t.Errorf("%s: %q: timed out instead of ending with the session", r.what, r.err)
		case !errors.Is(r.err, ce.want):
			t.Errorf("%s: %q does not match %v", r.what, r.err, ce.want)
		case r.what == "OpenStream" && errors.Is(r.err, ErrRemoteGoAway):
			// The peer's normal go-away came first: the OpenStream
			// waiting for the ACK backlog fails with it, as it should.
		case !errors.Is(r.err, ErrSessionClosed):
			t.Errorf("%s: %q does not match ErrSessionClosed", r.what, r.err)
		case r.stream && !errors.Is(r.err, ErrStreamReset):
			t.Errorf("%s: %q does not match ErrStreamReset", r.what, r.err)
		}
	}
}

// TestKeepAliveLongFrameOnSlowLink: a peer sends one data frame that
// takes many keep-alive intervals to cross a slow link (go-yamux and
// hashicorp/yamux send a stream's whole window as one frame: 256 KiB at
// 1 Mbit/s is over two seconds). Bytes arrive all along, so the
// keep-alive, which closes only a session from which nothing at all
// arrived within ConnectionWriteTimeout of its ping, must not close it:
// the pong can't overtake the frame. In a synctest bubble over slowconn.
func TestKeepAliveLongFrameOnSlowLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DisableKeepAlive = false
		cfg.KeepAliveInterval = 100 * time.Millisecond
		cfg.ConnectionWriteTimeout = 300 * time.Millisecond
		link := slowconn.Link{Bandwidth: 1e6, Latency: 10 * time.Millisecond}
		c1, peer := slowconn.Pipe(link)
		discarded := make(chan struct{})
		go func() {
			defer close(discarded)
			_, _ = io.Copy(io.Discard, peer) // braid's ACK and pings
		}()
		defer func() { _ = peer.Close(); <-discarded }()
		s, err := Server(c1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		payload := make([]byte, InitialStreamWindow)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		frame := append(header{typ: typeData, flags: flagSYN, streamID: 1, length: uint32(len(payload))}.appendTo(nil), payload...)
		wrote := make(chan error, 1)
		go func() { _, err := peer.Write(frame); wrote <- err }()
		start := time.Now()
		st, err := s.AcceptStream()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(payload))
		if _, err := io.ReadFull(st, got); err != nil {
			t.Fatalf("reading a frame still arriving after %v: %v", time.Since(start), err)
		}
		t.Logf("the frame took %v (interval %v, write timeout %v)", time.Since(start), cfg.KeepAliveInterval, cfg.ConnectionWriteTimeout)
		if err := s.Err(); err != nil {
			t.Fatalf("session ended while the frame arrived: %v", err)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
	})
}
