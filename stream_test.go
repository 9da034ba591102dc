package braid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// streamPair opens a stream on a client session and accepts it on the
// server; both sessions are closed when the test ends.
func streamPair(t testing.TB, cfg *Config) (client, server *Session, a, b *Stream) {
	t.Helper()
	client, server = sessionPair(t, cfg)
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	b, err = server.AcceptStream()
	require.NoError(t, err)
	return client, server, a, b
}

// errWithin waits up to 5 s for an error from errc.
func errWithin(t testing.TB, errc <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s still blocked after 5 s", what)
		return nil
	}
}

// readInBackground starts a Read of n bytes on st and returns the
// channel its error comes on.
func readInBackground(st *Stream, n int) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := st.Read(make([]byte, n))
		errc <- err
	}()
	return errc
}

// pipeStreamPair is streamPair over net.Pipe. Inside a synctest bubble
// nothing of the two sessions then waits on a socket, so synctest.Wait
// returns once every call that can block has blocked, and time is the
// bubble's: deadlines fire at their exact instant.
func pipeStreamPair(t testing.TB, cfg *Config) (client, server *Session, a, b *Stream) {
	t.Helper()
	c1, c2 := net.Pipe()
	client, server = sessionPairOver(t, c1, c2, cfg)
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	b, err = server.AcceptStream()
	require.NoError(t, err)
	return client, server, a, b
}

// requireBlocked fails unless nothing was sent on c: the call that sends
// its result there is still blocked. Call it after synctest.Wait.
func requireBlocked(t testing.TB, c <-chan error, what string) {
	t.Helper()
	select {
	case err := <-c:
		t.Fatalf("%s returned (%v) instead of blocking", what, err)
	default:
	}
}

// TestDeadlineSetWhileBlocked proves that a deadline set (in the past or
// the near future) while Read or Write is already blocked, with no
// deadline set before, wakes the call with os.ErrDeadlineExceeded, at the
// deadline and not before. This is what net.Conn users do to cancel a
// blocked call (and nettest checks).
func TestDeadlineSetWhileBlocked(t *testing.T) {
	const future = 20 * time.Millisecond
	for _, when := range []struct {
		name  string
		after time.Duration // from the moment the deadline is set; <= 0 is in the past
	}{
		{"past", -time.Hour},
		{"future", future},
	} {
		t.Run(when.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, _, a, _ := pipeStreamPair(t, nil)
				readc := readInBackground(a, 10)
				// Exhaust the send window (the peer never reads) so that
				// Write blocks too.
				writec := make(chan error, 1)
				go func() {
					_, err := a.Write(make([]byte, 2*InitialStreamWindow))
					writec <- err
				}()
				synctest.Wait() // both calls are blocked, with no deadline
				requireBlocked(t, readc, "Read")
				requireBlocked(t, writec, "Write")
				set := time.Now()
				require.NoError(t, a.SetReadDeadline(set.Add(when.after)))
				require.NoError(t, a.SetWriteDeadline(set.Add(when.after)))
				require.ErrorIs(t, errWithin(t, readc, "Read"), os.ErrDeadlineExceeded)
				require.ErrorIs(t, errWithin(t, writec, "Write"), os.ErrDeadlineExceeded)
				require.Equal(t, max(when.after, 0), time.Since(set), "woken at the deadline")
			})
		})
	}
}

// TestWriteDeadlineWindowExhausted proves that a Write blocked on an
// exhausted send window (the peer doesn't read) returns
// os.ErrDeadlineExceeded at its deadline with the count of bytes it did
// send, and that the stream works after the deadline is cleared: every
// byte written arrives once, in order. In a synctest bubble the window's
// worth of bytes is sent before the deadline however slow the machine.
func TestWriteDeadlineWindowExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, a, b := pipeStreamPair(t, nil)
		msg := make([]byte, 2*InitialStreamWindow)
		for i := range msg {
			msg[i] = byte(i % 251)
		}
		const after = 100 * time.Millisecond
		start := time.Now()
		require.NoError(t, a.SetWriteDeadline(start.Add(after)))
		n, err := a.Write(msg)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.Equal(t, after, time.Since(start), "Write returned before or after its deadline")
		require.Equal(t, InitialStreamWindow, n, "bytes sent before the window ran out")
		// Still expired: a new Write fails at once.
		_, err = a.Write([]byte("x"))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)

		require.NoError(t, a.SetWriteDeadline(time.Time{}))
		errc := make(chan error, 1)
		go func() {
			_, err := a.Write(msg[n:])
			if err == nil {
				err = a.CloseWrite()
			}
			errc <- err
		}()
		got, err := io.ReadAll(b)
		require.NoError(t, err)
		require.NoError(t, errWithin(t, errc, "Write after clearing the deadline"))
		require.Equal(t, msg, got)
	})
}

// TestReadDeadline proves that Read times out at its deadline with
// os.ErrDeadlineExceeded (a net.Error with Timeout true), keeps timing out
// while the deadline is past, and reads normally once the deadline is
// cleared.
func TestReadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, a, b := pipeStreamPair(t, nil)
		const after = 50 * time.Millisecond
		start := time.Now()
		require.NoError(t, a.SetReadDeadline(start.Add(after)))
		buf := make([]byte, 10)
		_, err := a.Read(buf)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		var ne net.Error
		require.ErrorAs(t, err, &ne)
		require.True(t, ne.Timeout())
		require.Equal(t, after, time.Since(start), "Read returned before or after its deadline")
		_, err = a.Read(buf)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)

		// Data that arrives while the deadline is past is kept for later.
		_, err = b.Write([]byte("late"))
		require.NoError(t, err)
		require.NoError(t, a.SetReadDeadline(time.Time{}))
		_, err = io.ReadFull(a, buf[:4])
		require.NoError(t, err)
		require.Equal(t, "late", string(buf[:4]))
	})
}

// TestCloseReadPeerKeepsWriting proves that after CloseRead the peer's
// writes never stall (braid drops the bytes and credits the window back)
// while Read returns ErrStreamClosed and the other direction still works.
func TestCloseReadPeerKeepsWriting(t *testing.T) {
	_, server, a, b := streamPair(t, nil)
	require.NoError(t, a.CloseRead())
	_, err := a.Read(make([]byte, 1))
	require.ErrorIs(t, err, ErrStreamClosed)
	require.ErrorIs(t, err, net.ErrClosed)

	errc := make(chan error, 1)
	go func() {
		_, err := b.Write(make([]byte, 8*InitialStreamWindow)) // 8 windows
		errc <- err
	}()
	require.NoError(t, errWithin(t, errc, "peer Write after CloseRead"))

	// Writes from the side that closed its read half still arrive.
	_, err = a.Write([]byte("still here"))
	require.NoError(t, err)
	require.NoError(t, a.CloseWrite())
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	require.Equal(t, "still here", string(got))
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return server.NumStreams() == 0 }, 5*time.Second, 2*time.Millisecond)
}

// TestMaxUnackedStreams proves the libp2p ACK backlog: with a peer that
// never acknowledges, OpenStream opens MaxUnackedStreams streams, then
// waits until its context ends (returning the context's error), and a
// waiting OpenStream proceeds as soon as the peer acknowledges one stream.
// The raw peer is on a net.Pipe in a synctest bubble, so synctest.Wait
// tells when OpenStream has blocked.
func TestMaxUnackedStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DisableKeepAlive = true
		cfg.MaxUnackedStreams = 4
		c1, c2 := net.Pipe()
		p, s := newRawPeerOver(t, c1, c2, cfg, true) // braid is the client: ids 1, 3, 5, 7
		p.startReading()
		for i := 0; i < 4; i++ {
			_, err := s.OpenStream(context.Background())
			require.NoError(t, err)
		}
		p.await("SYNs", 4, func(f rawFrame) bool { return f.flags&flagSYN != 0 && f.streamID != 0 })

		const wait = 100 * time.Millisecond
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, err := s.OpenStream(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, wait, time.Since(start), "OpenStream gave up before or after its context")

		ctx2, cancel2 := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := s.OpenStream(ctx2)
			errc <- err
		}()
		synctest.Wait()
		requireBlocked(t, errc, "OpenStream beyond the ACK backlog")
		cancel2()
		require.ErrorIs(t, errWithin(t, errc, "OpenStream after cancel"), context.Canceled)
		require.Equal(t, 4, s.NumStreams(), "a refused OpenStream left a stream behind")

		// The peer acknowledges stream 3: the waiting OpenStream opens.
		go func() {
			st, err := s.OpenStream(context.Background())
			if err == nil && st.ID() != 9 {
				err = errors.New("unexpected stream id")
			}
			errc <- err
		}()
		synctest.Wait()
		requireBlocked(t, errc, "OpenStream beyond the ACK backlog")
		p.send(header{typ: typeWindowUpdate, flags: flagACK, streamID: 3}, nil)
		require.NoError(t, errWithin(t, errc, "OpenStream after the ACK"))
		// A duplicate ACK frees nothing more.
		p.send(header{typ: typeWindowUpdate, flags: flagACK, streamID: 3}, nil)
		p.ping(1)
		go func() {
			_, err := s.OpenStream(context.Background())
			errc <- err
		}()
		synctest.Wait()
		requireBlocked(t, errc, "OpenStream after a duplicate ACK")
		// Closing the session releases it.
		require.NoError(t, s.Close())
		require.ErrorIs(t, errWithin(t, errc, "OpenStream after Close"), ErrSessionClosed)
	})
}

// TestStatsCoalescing proves that the coalescing writer packs many
// streams' small frames into few writes (Writes far below FramesSent),
// and that small writes queued behind others join their stream's last
// frame (mergeSmallFrames), so fewer frames than writes go; with
// DisableCoalescing every write is its own frame and its own conn write.
//
// The counters are compared once the client's writer has stopped: it
// counts a Write as it makes it but a batch's frames once the whole batch
// is written, so while it runs Writes can be ahead of FramesSent by up to
// a batch (in plain mode, one write per frame of that batch). The test
// waits for every stream's FIN at the server (nothing is left to queue),
// then closes the client, which flushes the go-away and waits for the
// writer to end.
func TestStatsCoalescing(t *testing.T) {
	const streams, msgs, size = 100, 100, 64
	for _, coalesce := range []bool{true, false} {
		t.Run(map[bool]string{true: "coalesce", false: "plain"}[coalesce], func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DisableCoalescing = !coalesce
			cfg.DisableKeepAlive = true
			client, server := sessionPair(t, cfg)
			drained := make(chan error, streams) // one per stream, when its FIN arrived
			go func() {
				for {
					st, err := server.AcceptStream()
					if err != nil {
						return
					}
					go func() {
						n, err := io.Copy(io.Discard, st)
						if err == nil && n != msgs*size {
							err = fmt.Errorf("stream %d: %d bytes, want %d", st.ID(), n, msgs*size)
						}
						drained <- err
					}()
				}
			}()
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < streams; i++ {
				st, err := client.OpenStream(context.Background())
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer st.Close()
					<-start
					msg := make([]byte, size)
					for j := 0; j < msgs; j++ {
						if _, err := st.Write(msg); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			for range streams {
				require.NoError(t, errWithin(t, drained, "a server stream's io.Copy"))
			}
			require.NoError(t, client.Close())
			st := client.Stats()
			t.Logf("%+v", st)
			require.Equal(t, coalesce, client.w.sched.merge, "merging whenever coalescing")
			if coalesce {
				// Writes queued behind others join their stream's last
				// frame (sendQueue.extend): fewer frames than writes.
				require.Less(t, st.FramesSent, uint64(streams*msgs), "small writes not merged")
				require.Less(t, st.Writes*4, st.FramesSent, "writes not coalesced")
			} else {
				// Data frames, plus a SYN and a FIN per stream.
				require.GreaterOrEqual(t, st.FramesSent, uint64(streams*(msgs+2)))
				require.Equal(t, st.FramesSent, st.Writes, "one write per frame without coalescing")
			}
		})
	}
}

// TestMemoryReleasedAfterClose proves that everything a session reserves
// from its MemoryManager (initial windows, window growth) is released once
// the sessions close, whatever state the streams were in: closed, reset,
// half-closed, open with unread data, never accepted.
func TestMemoryReleasedAfterClose(t *testing.T) {
	cm, sm := &countingMemory{}, &countingMemory{}
	ccfg, scfg := DefaultConfig(), DefaultConfig()
	ccfg.Memory, scfg.Memory = cm, sm
	c1, c2 := tcpPair(t)
	client, err := Client(c1, ccfg)
	require.NoError(t, err)
	server, err := Server(c2, scfg)
	require.NoError(t, err)
	defer client.Close()
	defer server.Close()

	open := func() (*Stream, *Stream) {
		a, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		b, err := server.AcceptStream()
		require.NoError(t, err)
		return a, b
	}
	// A large transfer grows the receive window (reserving more).
	a, b := open()
	go func() {
		_, _ = a.Write(make([]byte, 16<<20))
		_ = a.CloseWrite()
	}()
	_, err = io.Copy(io.Discard, b)
	require.NoError(t, err)
	// Closed both ways.
	require.NoError(t, b.Close())
	a, _ = open()
	require.NoError(t, a.Reset()) // reset
	a, _ = open()
	_, err = a.Write([]byte("unread")) // open, with unread data
	require.NoError(t, err)
	a, b = open()
	require.NoError(t, b.CloseWrite())               // half-closed
	_, err = client.OpenStream(context.Background()) // never accepted
	require.NoError(t, err)
	_ = a
	require.Eventually(t, func() bool { return server.NumStreams() == 3 }, 5*time.Second, 2*time.Millisecond)
	require.Positive(t, cm.reserved.Load())
	require.Positive(t, sm.reserved.Load())

	require.NoError(t, client.Close())
	require.NoError(t, server.Close())
	require.Zero(t, cm.reserved.Load(), "client memory still reserved")
	require.Zero(t, sm.reserved.Load(), "server memory still reserved")
}

// TestConcurrentReadsSeeTheEnd: Reads waiting at once on one stream take
// turns, so a byte goes to exactly one of them and the stream's end (the
// peer's FIN, its reset, the session's end, the read deadline) reaches
// every one: before, a one-slot wake-up woke one Read and the others
// stayed blocked for good.
func TestConcurrentReadsSeeTheEnd(t *testing.T) {
	const readers = 3
	ends := []struct {
		name  string
		end   func(client *Session, a, b *Stream)
		check func(t *testing.T, err error)
	}{
		{"fin", func(_ *Session, a, _ *Stream) { _ = a.CloseWrite() }, func(t *testing.T, err error) { require.ErrorIs(t, err, io.EOF) }},
		{"reset", func(_ *Session, a, _ *Stream) { _ = a.Reset() }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, ErrStreamReset)
			require.NotErrorIs(t, err, io.EOF)
		}},
		{"session", func(client *Session, _, _ *Stream) { _ = client.Close() }, func(t *testing.T, err error) {
			require.Error(t, err)
			require.NotErrorIs(t, err, io.EOF)
		}},
		{"deadline", func(_ *Session, _, b *Stream) { _ = b.SetReadDeadline(time.Now()) }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		}},
	}
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				client, _, a, b := pipeStreamPair(t, nil)
				type result struct {
					n   int
					err error
				}
				results := make(chan result, readers)
				for range readers {
					go func() {
						n, err := b.Read(make([]byte, 8))
						results <- result{n, err}
					}()
				}
				synctest.Wait()
				_, err := a.Write([]byte("x"))
				require.NoError(t, err)
				synctest.Wait()
				r := <-results
				require.NoError(t, r.err)
				require.Equal(t, 1, r.n, "the byte went to one Read")
				require.Empty(t, results, "the other Reads still wait")
				e.end(client, a, b)
				synctest.Wait()
				for range readers - 1 {
					select {
					case r := <-results:
						require.Zero(t, r.n)
						e.check(t, r.err)
					default:
						t.Fatal("a Read still blocked after the stream's end")
					}
				}
			})
		})
	}
}

// TestConcurrentReadsLending: two Reads with buffers large enough to lend
// (on TCP the next payload is read straight into a waiting Read's buffer)
// share a stream's bytes: every byte is read once, none lost, and both
// see the peer's FIN.
func TestConcurrentReadsLending(t *testing.T) {
	_, _, a, b := streamPair(t, nil)
	const total = 64 * 64 << 10
	var got atomic.Int64
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := b.Read(buf)
				got.Add(int64(n))
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	msg := make([]byte, 64<<10)
	for range total / len(msg) {
		_, err := a.Write(msg)
		require.NoError(t, err)
	}
	require.NoError(t, a.CloseWrite())
	for range 2 {
		require.ErrorIs(t, errWithin(t, errc, "a concurrent Read"), io.EOF)
	}
	require.Equal(t, int64(total), got.Load())
}

// TestClosePeerKeepsWriting: after Close (both directions) before the
// peer's FIN, the stream leaves the session's table, and the peer's
// writes still never stall: the bytes that come for it are dropped and
// credited back, as after CloseRead.
func TestClosePeerKeepsWriting(t *testing.T) {
	client, _, a, b := streamPair(t, nil)
	_, err := b.Write([]byte("x")) // the stream is open at both ends
	require.NoError(t, err)
	_, err = io.ReadFull(a, make([]byte, 1))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.Zero(t, client.NumStreams(), "Close before the peer's FIN removes the stream")
	errc := make(chan error, 1)
	go func() {
		_, err := b.Write(make([]byte, 8*InitialStreamWindow)) // 8 windows
		errc <- err
	}()
	require.NoError(t, errWithin(t, errc, "peer Write after Close"))
	got, err := io.ReadAll(b)
	require.NoError(t, err, "the FIN of the side that closed")
	require.Empty(t, got)
	require.NoError(t, b.Close())
}

// TestCloseReadReturnsClosed: after CloseRead, Read returns
// ErrStreamClosed, never io.EOF, whether the peer's FIN comes after it or
// came before it with bytes still buffered.
func TestCloseReadReturnsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, a, b := pipeStreamPair(t, nil)
		require.NoError(t, a.CloseRead())
		_, err := b.Write([]byte("dropped"))
		require.NoError(t, err)
		require.NoError(t, b.CloseWrite())
		synctest.Wait()
		_, err = a.Read(make([]byte, 8))
		require.ErrorIs(t, err, ErrStreamClosed, "FIN after CloseRead")
		require.NotErrorIs(t, err, io.EOF)
	})
	synctest.Test(t, func(t *testing.T) {
		_, _, a, b := pipeStreamPair(t, nil)
		_, err := b.Write([]byte("buffered"))
		require.NoError(t, err)
		require.NoError(t, b.CloseWrite())
		synctest.Wait()
		require.NoError(t, a.CloseRead())
		_, err = a.Read(make([]byte, 8))
		require.ErrorIs(t, err, ErrStreamClosed, "CloseRead after the FIN, bytes buffered")
		require.NotErrorIs(t, err, io.EOF)
	})
}

// closeInterruptWrite is the Write TestCloseInterruptsRead leaves blocked:
// more than a stream's window (yamux) and an mplex message, so that it
// holds the stream's writeMu until the conn takes its bytes.
const closeInterruptWrite = 4 << 20

// TestCloseInterruptsRead: Close returns a Read in progress at once with
// ErrStreamClosed, as net.Conn's Close promises, even while a Write of the
// same stream waits for a connection that takes nothing (its far end is
// never read), so that CloseWrite waits for that Write. Closing the write
// side first left the Read blocked until the session died, for
// ConnectionWriteTimeout. On both codecs.
func TestCloseInterruptsRead(t *testing.T) {
	for name, cfg := range map[string]*Config{"yamux": nil, "mplex": mplexConfig()} {
		t.Run(name, func(t *testing.T) {
			c1, c2 := net.Pipe() // c2 is never read: every write on c1 waits
			s, err := Client(c1, cfg)
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = c2.Close() // first: the session's writes fail, and Close needn't flush
				_ = s.Close()
			})
			st, err := s.OpenStream(context.Background())
			require.NoError(t, err)
			go func() { _, _ = st.Write(make([]byte, closeInterruptWrite)) }()
			readDone := make(chan error, 1)
			go func() {
				_, err := st.Read(make([]byte, 1))
				readDone <- err
			}()
			require.Eventually(t, func() bool {
				if st.writeMu.TryLock() {
					st.writeMu.Unlock()
					return false
				}
				st.mu.Lock()
				defer st.mu.Unlock()
				return st.reading
			}, eventually, time.Millisecond, "the Write never held the stream's write side, or the Read never waited")
			go func() { _ = st.Close() }()
			select {
			case err := <-readDone:
				require.ErrorIs(t, err, ErrStreamClosed)
			case <-time.After(eventually):
				t.Fatalf("Close did not interrupt the Read within %v", eventually)
			}
		})
	}
}

// TestCloseWriteRacingPeerReset: a CloseWrite queued behind a Write whose
// frame the writer is still writing, when the peer (whose FIN came
// first) resets the stream, returns the peer's reset, a *StreamError, and
// so does the Write: not an error matching ErrSessionClosed on a session
// that is up. The stream stays in the table until its FIN is queued, so
// the RST finds it, even when a look at removal comes meanwhile: the read
// loop's after the peer's FIN, if it runs that late (a flake under load),
// or a CloseRead's (made to happen here). (Not in a synctest bubble:
// CloseWrite waits on a mutex, which synctest does not count as blocked;
// the steps are sequenced on the stream's state instead.) A Reset of our
// own then is not a no-op (the FIN is not queued yet): CloseWrite returns
// our reset, and the peer reads it, not the rest of the Write and an EOF.
func TestCloseWriteRacingPeerReset(t *testing.T) {
	for _, c := range []struct {
		name string
		then racingReset
	}{
		{"peer-reset", peerReset},
		{"closeRead-then-peer-reset", closeReadThenPeerReset},
		{"local-reset", localReset},
	} {
		t.Run(c.name, func(t *testing.T) { testCloseWriteRacingPeerReset(t, c.then) })
	}
}

// racingReset is what happens while CloseWrite waits behind a Write.
type racingReset int

const (
	peerReset racingReset = iota
	closeReadThenPeerReset
	localReset
)

func testCloseWriteRacingPeerReset(t *testing.T, then racingReset) {
	c1, c2 := tcpPair(t)
	g := &gatedConn{Conn: c1}
	client, server := sessionPairOver(t, g, c2, nil)
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = a.Write([]byte("x"))
	require.NoError(t, err)
	b, err := server.AcceptStream()
	require.NoError(t, err)
	_, err = io.ReadFull(b, make([]byte, 1))
	require.NoError(t, err)
	require.NoError(t, b.CloseWrite())
	_, err = a.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the peer's FIN")

	// The writer parked (it parks only with nothing kept back: a partial
	// record, as the gated conn has no writev), so that the first gated
	// write is the Write's frame. Before, a pong the writer still held
	// could take the gate first, and the CloseWrite then ran before the
	// Write (a flake under load).
	w := client.w
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.idle
	}, 5*time.Second, time.Millisecond, "the client's writer parked")
	g.arm()
	t.Cleanup(g.release) // before the sessions' cleanup: a failed check must not leave the writer at the gate
	writec, closec := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := a.Write(make([]byte, 64<<10))
		writec <- err
	}()
	<-g.entered // the frame is in a conn write
	go func() { closec <- a.CloseWrite() }()
	state := func(f func() bool) func() bool {
		return func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return f()
		}
	}
	require.Eventually(t, state(func() bool { return a.writeState == halfClosed }), 5*time.Second, time.Millisecond, "CloseWrite began")
	if then == localReset {
		require.NoError(t, a.Reset())
		ctrlLen := func() int {
			client.w.mu.Lock()
			defer client.w.mu.Unlock()
			return len(client.w.ctrl)
		}
		queued := ctrlLen() // the writer is at the gate: the RST waits in the control queue
		require.NoError(t, a.Reset())
		require.Equal(t, queued, ctrlLen(), "a second Reset queues no second RST")
		g.release()
		err := errWithin(t, closec, "CloseWrite")
		var se *StreamError
		require.ErrorAs(t, err, &se, "CloseWrite's error: our reset")
		require.False(t, se.Remote)
		_, err = io.Copy(io.Discard, b)
		require.ErrorAs(t, err, &se, "the peer reads the reset (nil: the Write's rest and the FIN came)")
		require.True(t, se.Remote)
		require.NotErrorIs(t, err, io.EOF)
		errWithin(t, writec, "Write") //nolint:errcheck // nil or the reset: its frame may have been out before it
		return
	}
	if then == closeReadThenPeerReset {
		require.NoError(t, a.CloseRead())
		require.True(t, state(func() bool { return !a.removed })(), "the stream stays in the table while its FIN waits")
	}
	require.NoError(t, b.Reset())
	require.Eventually(t, state(func() bool { return a.writeErr != nil }), 5*time.Second, time.Millisecond, "the peer's reset came")
	g.release()
	err = errWithin(t, closec, "CloseWrite")
	var se *StreamError
	require.ErrorAs(t, err, &se, "CloseWrite's error")
	require.True(t, se.Remote)
	require.NotErrorIs(t, err, ErrSessionClosed, "the session is up")
	if err := errWithin(t, writec, "Write"); err != nil { // nil: its frame was out before the reset
		require.ErrorAs(t, err, &se, "Write's error")
		require.NotErrorIs(t, err, ErrSessionClosed)
	}
	require.False(t, client.IsClosed())
}

// TestZeroLengthReadBesideBlockedRead: a zero-length Read returns at once
// (0, nil on an open stream) even while another Read waits for data: it
// takes no turn.
func TestZeroLengthReadBesideBlockedRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, a, b := pipeStreamPair(t, nil)
		readc := readInBackground(b, 8)
		synctest.Wait()
		n, err := b.Read(nil)
		require.NoError(t, err)
		require.Zero(t, n)
		require.NoError(t, a.CloseWrite())
		synctest.Wait()
		require.ErrorIs(t, <-readc, io.EOF)
		_, err = b.Read(nil)
		require.ErrorIs(t, err, io.EOF, "after the FIN")
	})
}

// TestCloseAfterPeerResetReports: CloseWrite and Close on a stream the
// peer reset, or whose session ended, report it (what was written may not
// have arrived), as Write does; after this side's own Reset they return
// nil (TestStreamArguments).
func TestCloseAfterPeerResetReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, a, b := pipeStreamPair(t, nil)
		require.NoError(t, b.ResetWithError(42))
		synctest.Wait()
		var se *StreamError
		require.ErrorAs(t, a.CloseWrite(), &se)
		require.True(t, se.Remote)
		require.Equal(t, uint32(42), se.ErrorCode)
		require.ErrorAs(t, a.Close(), &se)
	})
	synctest.Test(t, func(t *testing.T) {
		client, _, a, _ := pipeStreamPair(t, nil)
		require.NoError(t, client.Close())
		synctest.Wait()
		err := a.Close()
		require.ErrorIs(t, err, ErrSessionClosed)
		require.NotErrorIs(t, err, io.EOF)
	})
}

// TestWriteDeadlineAfterRemoval: a Write waiting in the writer's queue
// when CloseWrite is called, and then the peer's FIN comes, still returns
// at its write deadline. Before, the FIN took the stream out of the
// session, the removal stopped the deadline's timer, and the Write waited
// until the conn took its bytes; the stream now stays in the table until
// CloseWrite has queued its FIN (writeDoneLocked), and leaves then. Both
// ways a large Write waits: copied, waiting for queue room (its deadline
// was near when it began: writer.blockingWriteAllowed), and by reference
// (the deadline was set while it waited).
func TestWriteDeadlineAfterRemoval(t *testing.T) {
	for _, c := range []struct {
		name        string
		size        int
		setBeforeIt bool
	}{
		{"copied", 1 << 20, true}, // more than its queue share
		{"by-reference", 100 * 1024, false},
	} {
		t.Run(c.name, func(t *testing.T) { testWriteDeadlineAfterRemoval(t, c.size, c.setBeforeIt) })
	}
}

func testWriteDeadlineAfterRemoval(t *testing.T, size int, setBeforeIt bool) {
	c1, c2 := tcpPair(t)
	gc := &gatedConn{Conn: c1}
	client, server := sessionPairOver(t, gc, c2, &Config{DisableKeepAlive: true})
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	b, err := server.AcceptStream()
	require.NoError(t, err)
	other, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = server.AcceptStream()
	require.NoError(t, err)

	gc.arm() // the client's conn takes no byte now
	defer gc.release()
	go other.Write(make([]byte, 100)) //nolint:errcheck // holds the conn at the gate
	<-gc.entered
	state := func(f func() bool) func() bool {
		return func() bool { a.mu.Lock(); defer a.mu.Unlock(); return f() }
	}

	const deadline = 300 * time.Millisecond
	if setBeforeIt {
		require.NoError(t, a.SetWriteDeadline(time.Now().Add(deadline)))
	}
	werr := make(chan error, 1)
	go func() {
		_, err := a.Write(make([]byte, size)) // waits behind the gate
		werr <- err
	}()
	// The Write waits in the writer's queue: for room (copied) or for its
	// frames' write (by reference). Only holding writeMu, it could still
	// be before its credit check, which a CloseWrite then fails.
	require.Eventually(t, func() bool {
		client.w.mu.Lock()
		defer client.w.mu.Unlock()
		return a.send.q != nil && a.send.q.waiting || a.send.pendingRefs > 0
	}, time.Second, time.Millisecond)
	if !setBeforeIt {
		require.NoError(t, a.SetWriteDeadline(time.Now().Add(deadline)))
	}
	go a.CloseWrite() //nolint:errcheck // waits for the Write
	require.Eventually(t, state(func() bool { return a.writeState == halfClosed }), time.Second, time.Millisecond)
	require.NoError(t, b.CloseWrite()) // the peer's FIN
	require.Eventually(t, state(func() bool { return a.readState == halfClosed }), time.Second, time.Millisecond)
	require.True(t, state(func() bool { return !a.removed })(), "a stays in the session while its FIN waits")
	select {
	case err := <-werr:
		if err != nil { // nil: the rest was copied into the queue at the deadline
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		}
	case <-time.After(10 * deadline):
		gc.release()
		t.Fatalf("Write still blocked %v after its %v deadline; once the conn let it through: %v", 10*deadline, deadline, <-werr)
	}
	gc.release()
	require.Eventually(t, state(func() bool { return a.removed }), time.Second, time.Millisecond, "a leaves the session once its FIN is queued")
}

// TestZeroLengthWriteReportsState: a zero-length Write writes nothing and
// returns the error a Write would fail with at once: nil on an open
// stream, os.ErrDeadlineExceeded past the write deadline, ErrStreamClosed
// after CloseWrite, a reset after Reset, as a net.Conn's zero-length Write
// fails after Close and past its deadline.
func TestZeroLengthWriteReportsState(t *testing.T) {
	client, _ := sessionPair(t, nil)
	open := func() *Stream {
		st, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		return st
	}
	st := open()
	n, err := st.Write(nil)
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, st.SetWriteDeadline(time.Now().Add(-time.Second)))
	_, err = st.Write([]byte{})
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, st.SetWriteDeadline(time.Time{}))
	_, err = st.Write(nil)
	require.NoError(t, err)

	require.NoError(t, st.CloseWrite())
	_, err = st.Write(nil)
	require.ErrorIs(t, err, ErrStreamClosed)

	st = open()
	require.NoError(t, st.Reset())
	_, err = st.Write(nil)
	require.ErrorIs(t, err, ErrStreamReset)
	require.NotErrorIs(t, err, io.EOF)
}
