package slowconn

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// Tests from a review of the net.Conn contract: what a call returns once
// the conn is closed or half-closed, whatever else is pending.

const (
	// callsAfterClose is how many Reads and Writes
	// TestCallsAfterCloseReturnErrClosed makes on a closed conn. Before the
	// fix each returned a timeout about one time in three, so this many
	// calls all returning net.ErrClosed by chance is out of the question.
	callsAfterClose = 100
	// closeRaceTrials is how many Pipes TestWriteRacingCloseReturnsErrClosed
	// closes under a busy writer. Before the fix about one in twenty Writes
	// cut by Close returned io.ErrClosedPipe (on 2 cores; the test skips
	// at GOMAXPROCS 1).
	closeRaceTrials = 1000
	// closeRaceSpread varies how long Close waits after the writer starts
	// (in scheduler yields), so Close lands at different points of a Write.
	closeRaceSpread = 7
	// hugeSendBuffer keeps a writer from ever blocking on the send buffer.
	hugeSendBuffer = 1 << 30
	// blockedWriteSize is a Write much larger than a one-packet send
	// buffer, so it blocks while nobody reads.
	blockedWriteSize = 1 << 20
)

// TestCallsAfterCloseReturnErrClosed: once a conn is closed, Read and Write
// return net.ErrClosed, never a timeout, even if a deadline had already
// passed before Close (as *net.TCPConn and net.Pipe do). A caller that
// retries on timeouts must not mistake a closed conn for a slow one.
func TestCallsAfterCloseReturnErrClosed(t *testing.T) {
	for _, name := range []string{"Pipe", "Wrap"} {
		t.Run(name, func(t *testing.T) {
			var a, b net.Conn
			if name == "Pipe" {
				a, b = Pipe(LAN())
			} else {
				ra, rb := net.Pipe()
				a, b = Wrap(ra, LAN()), rb
			}
			defer b.Close()
			a.SetDeadline(time.Now().Add(-time.Second))
			if err := a.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for i := range callsAfterClose {
				if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
					t.Fatalf("Read %d after Close with a past deadline: %v, want net.ErrClosed", i, err)
				}
				if _, err := a.Write([]byte{1}); !errors.Is(err, net.ErrClosed) {
					t.Fatalf("Write %d after Close with a past deadline: %v, want net.ErrClosed", i, err)
				}
			}
		})
	}
}

// TestWriteRacingCloseReturnsErrClosed: a Write cut short by a concurrent
// Close of its own conn returns net.ErrClosed, not io.ErrClosedPipe (which
// says the peer went away).
func TestWriteRacingCloseReturnsErrClosed(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		// The busy writer would hold the only thread until preempted
		// (10 ms a yield), and the race needs two threads anyway.
		t.Skip("needs GOMAXPROCS >= 2 for Write and Close to run at once")
	}
	for i := range closeRaceTrials {
		a, b := Pipe(Link{SendBuffer: hugeSendBuffer})
		done := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			close(started)
			for {
				if _, err := a.Write([]byte{1}); err != nil {
					done <- err
					return
				}
			}
		}()
		<-started
		for range i % closeRaceSpread {
			runtime.Gosched()
		}
		a.Close()
		err := <-done
		b.Close()
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("trial %d: Write racing Close returned %v, want net.ErrClosed", i, err)
		}
	}
}

// TestCloseWriteWakesBlockedWrite: CloseWrite ends a Write blocked on a
// full send buffer at once, with an error and the count of bytes queued, as
// shutdown(SHUT_WR) does to a send blocked on a TCP socket. Before, the
// Write stayed blocked until the peer read (forever if it never did).
func TestCloseWriteWakesBlockedWrite(t *testing.T) {
	l := Link{Bandwidth: 10e6, SendBuffer: 1} // one packet of buffer
	t.Run("Pipe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a, b := Pipe(l)
			defer a.Close()
			defer b.Close()
			checkCloseWriteWakesWrite(t, a)
		})
	})
	t.Run("Wrap", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ra, rb := net.Pipe() // nobody reads rb
			defer rb.Close()
			a := Wrap(halfCloser{ra}, l)
			defer a.Close()
			checkCloseWriteWakesWrite(t, a)
		})
	})
}

// halfCloser gives a net.Pipe end the CloseWrite method Wrap looks for;
// the test never lets the FIN arrive, so it does nothing.
type halfCloser struct{ net.Conn }

// CloseWrite does nothing.
func (halfCloser) CloseWrite() error { return nil }

// checkCloseWriteWakesWrite blocks a large Write on c, whose peer does not
// read, then half-closes c and checks that the Write returns.
func checkCloseWriteWakesWrite(t *testing.T, c net.Conn) {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.Write(make([]byte, blockedWriteSize))
		done <- result{n, err}
	}()
	synctest.Wait()
	select {
	case r := <-done:
		t.Fatalf("Write into a full buffer returned %d, %v without a reader", r.n, r.err)
	default:
	}
	if err := c.(closeWriter).CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	synctest.Wait()
	select {
	case r := <-done:
		if !errors.Is(r.err, io.ErrClosedPipe) || r.n <= 0 || r.n >= blockedWriteSize {
			t.Errorf("Write cut by CloseWrite = %d, %v; want the bytes queued before it and io.ErrClosedPipe", r.n, r.err)
		}
	default:
		t.Fatal("Write blocked on a full send buffer is still blocked after CloseWrite")
	}
}

// TestDeadlineMovedWhileBlocked: a deadline extended while a Read or Write
// waits applies to that call (it times out at the new time, not the old),
// and one cleared while a call waits lets the call complete; the error is
// os.ErrDeadlineExceeded and a net.Error whose Timeout is true.
func TestDeadlineMovedWhileBlocked(t *testing.T) {
	const (
		first  = 10 * time.Millisecond // the deadline set before the call
		moveAt = 5 * time.Millisecond  // when it is moved
		second = 30 * time.Millisecond // the deadline it is moved to
	)
	l := Link{Bandwidth: 10e6, Latency: time.Millisecond, SendBuffer: 1}
	calls := map[string]struct {
		set  func(c net.Conn, t time.Time) error
		call func(c net.Conn) error
	}{
		"Read": {net.Conn.SetReadDeadline, func(c net.Conn) error {
			_, err := c.Read(make([]byte, 1))
			return err
		}},
		"Write": {net.Conn.SetWriteDeadline, func(c net.Conn) error {
			_, err := c.Write(make([]byte, blockedWriteSize))
			return err
		}},
	}
	for name, op := range calls {
		t.Run(name+"/Extended", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := Pipe(l)
				defer a.Close()
				defer b.Close()
				start := time.Now()
				op.set(a, start.Add(first))
				go func() {
					time.Sleep(moveAt)
					op.set(a, start.Add(second))
				}()
				err := op.call(a)
				var nerr net.Error
				if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &nerr) || !nerr.Timeout() {
					t.Errorf("%s error %v, want a timeout", name, err)
				}
				if got := time.Since(start); got != second {
					t.Errorf("%s timed out after %v, want the extended %v", name, got, second)
				}
			})
		})
		t.Run(name+"/Cleared", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := Pipe(l)
				defer a.Close()
				defer b.Close()
				op.set(a, time.Now().Add(first))
				go func() {
					time.Sleep(moveAt)
					op.set(a, time.Time{})
					time.Sleep(second)
					// Unblock the call: data for a Read, a reader for a Write.
					if name == "Read" {
						b.Write([]byte{1})
					} else {
						io.Copy(io.Discard, b)
					}
				}()
				if err := op.call(a); err != nil {
					t.Errorf("%s with its deadline cleared: %v", name, err)
				}
				a.Close()
			})
		})
	}
}
