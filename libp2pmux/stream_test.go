package libp2pmux

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// stalledWait bounds how long a test waits for a call it expects to
// return at once; the session's own timeouts (ConnectionWriteTimeout,
// 10 s) are far longer.
const stalledWait = 2 * time.Second

// TestCloseInterruptsReadWhileWriteStalls: network.MuxedStream's Close
// interrupts an in-progress Read, as go-libp2p's yamux adapter does (it
// closes the read side first), even while a Write of the same stream
// waits for the connection: the peer reads nothing, so the Write holds
// the stream's write side until the connection takes its bytes, and
// CloseWrite waits for it. While braid's Close closed the write side
// first, the Read stayed blocked until the session died (10 s).
func TestCloseInterruptsReadWhileWriteStalls(t *testing.T) {
	for _, tr := range []*Transport{DefaultTransport, MplexTransport} {
		t.Run(tr.Config().Protocol.String(), func(t *testing.T) {
			a, b := net.Pipe() // b is never read: every write on a waits
			c, err := tr.NewConn(a, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = b.Close() // first: the session's writes fail, so Close needn't wait for a flush
				_ = c.Close()
			})
			s, err := c.OpenStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			writeDone := make(chan error, 1)
			go func() {
				buf := make([]byte, 1024)
				for {
					if _, err := s.Write(buf); err != nil {
						writeDone <- err
						return
					}
				}
			}()
			readDone := make(chan error, 1)
			go func() {
				_, err := s.Read(make([]byte, 1))
				readDone <- err
			}()
			// Let the Write fill the stream's send queue and the Read
			// start waiting.
			time.Sleep(100 * time.Millisecond)
			select {
			case err := <-writeDone:
				t.Fatalf("Write returned before the Close: %v", err)
			case err := <-readDone:
				t.Fatalf("Read returned before the Close: %v", err)
			default:
			}

			go func() { _ = s.Close() }()
			select {
			case err := <-readDone:
				if err == nil || errors.Is(err, io.EOF) {
					t.Errorf("Read interrupted by Close: %v, want a non-EOF error", err)
				}
			case <-time.After(stalledWait):
				t.Errorf("Close did not interrupt the Read within %v", stalledWait)
			}
		})
	}
}
