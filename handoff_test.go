package braid

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braidmux/braid/internal/tlstest"
	"github.com/stretchr/testify/require"
)

// Tests of the busy read loop's hand-offs (handoff.go).

// TestBulkTracker: bulk flows while a large frame was among the last
// recentFrames, from several streams while two of those were for
// different streams.
func TestBulkTracker(t *testing.T) {
	type frame struct {
		n      uint64
		stream uint32 // 0: not a large frame
	}
	cases := []struct {
		name            string
		frames          []frame
		at              uint64
		flowing, shared bool
	}{
		{"nothing yet", nil, 5, false, false},
		{"one stream", []frame{{1, 1}, {3, 1}, {5, 1}}, 6, true, false},
		{"two streams", []frame{{1, 1}, {2, 3}}, 3, true, true},
		{"two streams, long ago", []frame{{1, 1}, {2, 3}}, 2 + recentFrames + 1, false, false},
		{"the edge of the window", []frame{{1, 1}, {2, 3}}, 2 + recentFrames, true, true},
		{"back to one stream", []frame{{1, 1}, {2, 3}, {40, 3}}, 41, true, false},
	}
	for _, c := range cases {
		var b bulkTracker
		for _, f := range c.frames {
			b.large(f.n, f.stream)
		}
		require.Equal(t, c.flowing, b.flowing(c.at), "%s: flowing", c.name)
		require.Equal(t, c.shared, b.shared(c.at), "%s: shared", c.name)
	}
}

// countingConn counts its completed Writes.
type countingConn struct {
	net.Conn
	written atomic.Int32
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(1)
	return n, err
}

// TestAnswerMarkerAndWait: the read loop's wait for its pong ends once
// the pong is written, before then only at its bound: a write that blocks
// (a peer that stopped reading) holds the read loop no longer. While the
// writer writes, the read loop doesn't wait at all.
func TestAnswerMarkerAndWait(t *testing.T) {
	c1, c2 := net.Pipe()
	cc := &countingConn{Conn: c1}
	gc := &gatedConn{Conn: cc}
	w := newWriter(gc, yamuxCodec{}, DefaultConfig())
	go w.run()
	pongs := make(chan header, 4)
	go func() {
		var hdr [headerSize]byte
		for {
			if _, err := io.ReadFull(c2, hdr[:]); err != nil {
				return
			}
			h, _ := decodeHeader(hdr[:])
			pongs <- h
		}
	}()
	t.Cleanup(func() {
		gc.release()
		w.close(false, io.ErrClosedPipe)
		c1.Close()
		c2.Close()
		<-w.done
	})
	wantPong := func(id uint32) {
		t.Helper()
		select {
		case h := <-pongs:
			require.Equal(t, header{typ: typePing, flags: flagACK, length: id}, h)
		case <-time.After(5 * time.Second):
			t.Fatal("no pong")
		}
	}
	awaitIdle := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.idle && !w.writing
		}, 5*time.Second, 100*time.Microsecond, "writer idle")
	}

	// The writer is idle: the read loop waits until the pong is written.
	pw := &pongWaiter{max: time.Minute}
	awaitIdle()
	before := cc.written.Load()
	require.True(t, w.answerMarkerAndWait(markerFlag|1, pw), "waited")
	require.Equal(t, before+1, cc.written.Load(), "the pong was written when the wait ended")
	wantPong(markerFlag | 1)

	// The pong's write blocks: the wait ends at its bound, and the writer
	// no longer signals this wait.
	awaitIdle()
	gc.arm()
	pw.max = time.Millisecond
	require.True(t, w.answerMarkerAndWait(markerFlag|2, pw), "waited")
	<-gc.entered // the write is at the gate
	w.mu.Lock()
	require.Nil(t, w.pongWaiter, "the wait that ended is forgotten")
	w.mu.Unlock()

	// The writer is writing: no wait.
	require.False(t, w.answerMarkerAndWait(markerFlag|3, pw), "no wait while the writer writes")
	gc.release()
	wantPong(markerFlag | 2)
	wantPong(markerFlag | 3)
	select {
	case <-pw.written:
		t.Fatal("a signal for a wait that ended")
	default:
	}
}

// TestWriteBatchWritesAnAwaitedPong: on a conn without writev, a batch of
// control frames alone keeps its partial record for the next batch, but
// not one whose pong the read loop waits for: the writer signals the wait
// when the batch is written, and the pong must be out by then.
func TestWriteBatchWritesAnAwaitedPong(t *testing.T) {
	for _, awaited := range []bool{false, true} {
		c1, got := pipeSink(t)
		w := &writer{conn: c1, codec: yamuxCodec{}, coalesce: true, writeTimeout: time.Minute}
		w.b.ctrl = w.codec.appendHeader(nil, header{typ: typePing, flags: flagACK, length: markerFlag | 1})
		w.b.ctrlEnds = []int{len(w.b.ctrl)}
		w.b.awaited = awaited
		require.NoError(t, w.writeBatch())
		kept := len(w.flat)
		c1.Close()
		written := len(<-got)
		if awaited {
			require.Zero(t, kept, "an awaited pong was kept")
			require.Equal(t, headerSize, written)
		} else {
			require.Equal(t, headerSize, kept, "a partial record is kept for the next batch")
			require.Zero(t, written)
		}
	}
}

// TestReceiveSmallReportsAWaitingRead: a small payload given to a stream
// whose Read waits says so, so that a busy read loop lets that Read run;
// one for a stream nobody reads from does not.
func TestReceiveSmallReportsAWaitingRead(t *testing.T) {
	// At one P there is no conn turn (turn.go): the Read parks, and the
	// read loop hands it the frame.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	_, _, _, b := streamPair(t, nil)
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 8)
		n, _ := b.Read(buf)
		got <- buf[:n]
	}()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.reading
	}, 5*time.Second, 100*time.Microsecond, "the Read waits")
	require.True(t, b.receiveSmall([]byte("x")), "a Read waits")
	require.Equal(t, []byte("x"), <-got)
	require.False(t, b.receiveSmall([]byte("y")), "no Read waits")
}

// TestWriterSharedDecryptBudget: while several streams send by reference
// beside another's small frame (a ping beside bulk transfers) on a conn
// without writev with more than one P, the budget is at least
// sharedDecryptInflight, or sharedLookInflight where the writer looks at
// the socket after bulk batches (a read waker, readwake.go) and two or
// more streams send by reference, marked sharedDecryptMarkers times while
// that floor sizes it; on a writev conn (TCP) with more than one P two or
// more such streams get sharedParallelInflight, marked
// sharedParallelMarkers times. A longer round trip's larger budget keeps
// markersPerBudget markers. With copied frames only, at one P, or with
// one bulk stream on a writev conn it stays at minInflight, marked
// markersPerBudget times. Where
// the writer looks after bulk batches and two or more streams send by
// reference, a batch takes sharedLookBatch bytes of them (a 64 KiB frame
// is cut there); elsewhere the first 64 KiB frame goes whole.
func TestWriterSharedDecryptBudget(t *testing.T) {
	payload := make([]byte, 64<<10)
	const longRTT = 2 * time.Millisecond // 2.5 MB at inflightRate, past the floor
	cases := []struct {
		name             string
		writev, parallel bool
		byRef            bool
		look             bool // the writer has a read waker
		oneRef           bool // only the first stream sends by reference, the other small frames
		rtt              time.Duration
		want, markers    int
	}{
		{"noise, bulk, two Ps", false, true, true, false, false, 10 * time.Microsecond, sharedDecryptInflight, sharedDecryptMarkers},
		{"TLS, bulk, two Ps", false, true, true, true, false, 10 * time.Microsecond, sharedLookInflight, sharedDecryptMarkers},
		{"TLS, one bulk stream beside small frames, two Ps", false, true, true, true, true, 10 * time.Microsecond, sharedDecryptInflight, sharedDecryptMarkers},
		{"TLS, bulk, two Ps, long round trip", false, true, true, true, false, longRTT, int(longRTT.Seconds() * inflightRate), markersPerBudget},
		{"TLS, small messages, two Ps", false, true, false, true, false, 10 * time.Microsecond, minInflight, markersPerBudget},
		{"TLS, bulk, one P", false, false, true, false, false, 10 * time.Microsecond, minInflight, markersPerBudget},
		{"TCP, bulk, two Ps", true, true, true, false, false, 10 * time.Microsecond, sharedParallelInflight, sharedParallelMarkers},
		{"TCP, one bulk stream beside small frames, two Ps", true, true, true, false, true, 10 * time.Microsecond, minInflight, markersPerBudget},
		{"TCP, bulk, one P", true, false, true, false, false, 10 * time.Microsecond, minInflight, markersPerBudget},
		{"TCP, bulk, two Ps, long round trip", true, true, true, false, false, longRTT, int(longRTT.Seconds() * inflightRate), markersPerBudget},
	}
	for _, c := range cases {
		w := &writer{codec: yamuxCodec{}, writev: c.writev, parallel: c.parallel, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(c.rtt)}
		if c.look {
			w.waker = &readWaker{}
		}
		var a, b, ping streamSend
		switch {
		case c.byRef && c.oneRef:
			w.sched.pushRef(&a, header{typ: typeData, streamID: 1}, payload)
			w.sched.push(&b, header{typ: typeData, streamID: 3, length: 1}, []byte{1})
		case c.byRef:
			// Beside a small frame of another stream: bulk streams alone
			// get the lone budgets (TestWriterSeveralBulkStreams).
			w.sched.pushRef(&a, header{typ: typeData, streamID: 1}, payload)
			w.sched.pushRef(&b, header{typ: typeData, streamID: 3}, payload)
			w.sched.push(&ping, header{typ: typeData, streamID: 5, length: 1}, []byte{1})
		default:
			w.sched.push(&a, header{typ: typeData, streamID: 1, length: 1}, []byte{1})
			w.sched.push(&b, header{typ: typeData, streamID: 3, length: 1}, []byte{1})
		}
		require.True(t, w.hasWorkLocked(), c.name)
		require.Equal(t, c.want, w.bound.budget, c.name)
		require.False(t, w.bound.took(c.want/c.markers-1), "%s: less than a marker's share sent, no marker due", c.name)
		require.True(t, w.bound.took(1), "%s: a marker after every 1/%d of the budget", c.name, c.markers)
		if c.byRef && !c.oneRef {
			w.sched.drop(&ping) // the batch's bulk frames, as sized beside it
			w.takeLocked()
			if c.look && c.parallel && !c.writev {
				require.Equal(t, sharedLookBatch, w.b.size, "%s: a 64 KiB frame cut at sharedLookBatch where the writer looks", c.name)
			} else {
				require.Greater(t, w.b.size, len(payload), "%s: the first 64 KiB frame whole", c.name)
			}
		}
		w.stopMarkerTimer()
	}
}

// tlsPair returns the two ends of a TLS 1.3 connection over loopback TCP,
// with a certificate generated for the test.
func tlsPair(t testing.TB) (*tls.Conn, *tls.Conn) {
	t.Helper()
	sec, err := tlstest.New()
	require.NoError(t, err)
	c1, c2 := tcpPair(t)
	t1, t2, err := sec.Pair(c1, c2)
	require.NoError(t, err)
	return t1, t2
}

// streamByte is stream i's byte at offset n.
func streamByte(i, n int) byte { return byte(i*31 + n*7 + n>>11) }

// TestTLSBulkBesideSmallMessages: over TLS with two Ps, where the read
// loop's hand-offs act (several bulk streams, their markers, a
// request-response stream beside them), every stream's bytes arrive
// whole and in order, and every round trip completes.
func TestTLSBulkBesideSmallMessages(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // before the sessions start: they fix it then
	t1, t2 := tlsPair(t)
	client, server := sessionPairOver(t, t1, t2, nil)
	awaitRTT(t, client, server)
	const (
		bulkStreams = 4
		bulkBytes   = 4 << 20
		writeSize   = 64 << 10
		roundTrips  = 300
	)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 2*bulkStreams+2)
	for i := range bulkStreams {
		st, err := client.OpenStream(ctx)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, writeSize)
			for off := 0; off < bulkBytes; off += writeSize {
				for j := range buf {
					buf[j] = streamByte(i, off+j)
				}
				if _, err := st.Write(buf); err != nil {
					errs <- err
					return
				}
			}
			errs <- st.CloseWrite()
		}()
	}
	ping, err := client.OpenStream(ctx)
	require.NoError(t, err)
	_, err = ping.Write([]byte{0}) // the server accepts it after the bulk streams
	require.NoError(t, err)
	for range bulkStreams + 1 {
		st, err := server.AcceptStream()
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := int(st.ID()-1) / 2 // the client's streams are 1, 3, 5...
			if i == bulkStreams {   // the ping stream: echo
				if _, err := io.ReadFull(st, make([]byte, 1)); err != nil {
					errs <- err
					return
				}
				if err := echoMessages(st, 64); err != nil {
					errs <- err
				}
				return
			}
			got, err := io.ReadAll(st)
			if err != nil {
				errs <- err
				return
			}
			if len(got) != bulkBytes {
				errs <- fmt.Errorf("stream %d: %d bytes, want %d", i, len(got), bulkBytes)
				return
			}
			for n, c := range got {
				if c != streamByte(i, n) {
					errs <- fmt.Errorf("stream %d: byte %d differs", i, n)
					return
				}
			}
		}()
	}
	pingRoundTrips(t, ping, roundTrips, 64)
	require.NoError(t, ping.CloseWrite())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
