package slowconn

import (
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

func TestWrapTCPCloseDeliversThenEOF(t *testing.T) {
	ra, rb, err := tcpPair()
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	l := Link{Bandwidth: 100e6, Latency: 20 * time.Millisecond}
	a := Wrap(ra, l)
	if _, ok := a.(closeWriter); !ok {
		t.Fatal("Wrap of a *net.TCPConn has no CloseWrite")
	}
	payload := make([]byte, 300<<10)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	start := time.Now()
	if _, err := a.Write(payload); err != nil {
		t.Fatal(err)
	}
	// Close returns once the queued bytes are handed to the socket.
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took, want := time.Since(start), modelTime(l, len(payload), len(payload)); took < want {
		t.Errorf("Close returned after %v, before the data could arrive (%v)", took, want)
	}
	got, err := io.ReadAll(rb)
	if err != nil || string(got) != string(payload) {
		t.Fatalf("peer read %d bytes, %v; want all %d", len(got), err, len(payload))
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v, want net.ErrClosed", err)
	}
}

func TestWrapCloseWrite(t *testing.T) {
	ra, rb, err := tcpPair()
	if err != nil {
		t.Fatal(err)
	}
	a, b := Wrap(ra, LAN()), Wrap(rb, LAN())
	defer a.Close()
	defer b.Close()
	a.Write([]byte("request"))
	if err := a.(closeWriter).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	if string(got) != "request" || err != nil {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	b.Write([]byte("response"))
	buf := make([]byte, 8)
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "response" {
		t.Errorf("ReadFull after CloseWrite = %q, %v", buf, err)
	}
}

func TestWrapWriteFailsAfterPeerCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ra, rb := net.Pipe()
		a := Wrap(ra, Link{Bandwidth: 10e6, Latency: time.Millisecond})
		defer a.Close()
		rb.Close()
		var err error
		for i := 0; err == nil && i < 1000; i++ {
			_, err = a.Write(make([]byte, 1024))
			time.Sleep(time.Millisecond)
		}
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("Write to a wrapped conn whose peer closed: %v, want io.ErrClosedPipe", err)
		}
	})
}

func TestWrapCloseLingerBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ra, rb := net.Pipe() // nobody reads rb
		defer rb.Close()
		a := Wrap(ra, Link{Latency: time.Millisecond})
		a.Write([]byte("unread"))
		start := time.Now()
		a.Close()
		if got, want := time.Since(start), time.Millisecond+closeLinger; got != want {
			t.Errorf("Close with an unread peer took %v, want latency + linger = %v", got, want)
		}
	})
}
