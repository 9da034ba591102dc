package braid

import (
	"context"
	"crypto/tls"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadWakerWhere: a waker only on a conn without writev, at more than
// one P, whose reads can be cut; nil's methods do nothing; a session over
// TLS at two P has one.
func TestReadWakerWhere(t *testing.T) {
	t1, _ := tlsPair(t)
	c1, _ := tcpPair(t)
	require.NotNil(t, newReadWaker(t1, newReadCutter(t1), false, true))
	require.Nil(t, newReadWaker(t1, newReadCutter(t1), false, false), "one P")
	require.Nil(t, newReadWaker(c1, newReadCutter(c1), true, true), "a conn with writev")
	require.Nil(t, newReadWaker(t1, nil, false, true), "reads that can't be cut")

	var none *readWaker
	none.readerWaits()
	none.beforePark(false)
	none.readerDone()

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	s1, s2 := tlsPair(t)
	client, server := sessionPairOver(t, s1, s2, nil)
	require.NotNil(t, client.w.waker, "TLS at two P")
	require.Same(t, &client.w.waker.parked, client.br.parked, "the read loop tells the waker when it parks")

	// A Read that waits is counted while it waits. (Another stream's Read
	// holds the conn turn, turn.go: this one parks.)
	holder, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = holder.Write([]byte("h"))
	require.NoError(t, err)
	_, err = server.AcceptStream()
	require.NoError(t, err)
	readInBackground(holder, 8) // ends as the sessions close
	awaitTaker(t, client, holder)
	st, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = st.Write([]byte("x"))
	require.NoError(t, err)
	peer, err := server.AcceptStream()
	require.NoError(t, err)
	read := readInBackground(st, 8)
	require.Eventually(t, func() bool { return client.w.waker.readers.Load() == 1 },
		5*time.Second, time.Millisecond, "the waiting Read to be counted")
	_, err = peer.Write([]byte("y"))
	require.NoError(t, err)
	require.NoError(t, <-read)
	require.Zero(t, client.w.waker.readers.Load(), "the Read that returned is not counted")

	// Over TCP (writev) there is no waker, and reads tell no flag.
	c3, c4 := tcpPair(t)
	plain, _ := sessionPairOver(t, c3, c4, nil)
	require.Nil(t, plain.w.waker)
	require.Nil(t, plain.br.parked)
}

// TestReadWakerCutsForAWaitingRead: the waker cuts the read loop's read
// only when a Read waits, the writer is not waiting for the in-flight
// budget, the read loop is parked in its read and bytes wait on the
// socket, and at a Write's wait only when the writer does not look after
// several streams' bulk batches; the cut read then returns the timeout
// that the cutter clears, and the next read brings the bytes.
func TestReadWakerCutsForAWaitingRead(t *testing.T) {
	r, cutter, c1, c2, asked := wakerOverTLS(t)

	r.parked.Store(true)
	r.readerWaits()
	r.beforePark(false)
	require.False(t, asked(), "no bytes wait on the socket")

	_, err := c2.Write([]byte("reply"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.peek.bytesQueued() > 0
	}, 5*time.Second, time.Millisecond, "the peer's record reaches the socket")

	r.beforePark(true)
	require.False(t, asked(), "the writer waits for the in-flight budget")
	r.readerDone()
	r.beforePark(false)
	require.False(t, asked(), "no Read waits")
	r.readerWaits()
	r.parked.Store(false)
	r.beforePark(false)
	require.False(t, asked(), "the read loop is not in a read")
	r.parked.Store(true)
	r.beforeRefWait(false, true)
	require.False(t, asked(), "a Write's wait while the writer looks after several streams' bulk batches")
	r.beforeRefWait(false, false)
	require.True(t, asked(), "a Read waits, bytes wait, the read loop is parked (a Write's wait, the writer not looking)")

	buf := make([]byte, 16)
	n, err := c1.Read(buf)
	require.Zero(t, n)
	require.True(t, cutter.cleared(err), "the cut read returns the cut's timeout: %v", err)
	n, err = c1.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "reply", string(buf[:n]))
}

// TestReadWakerAfterBulkBatch: the writer's look after a bulk batch cuts
// the read loop's read (and yields) only when a Read waits, the read loop
// is parked in its read and more bytes wait than a record of control
// frames holds; the cut read returns the cut's timeout, and the next
// reads bring the records.
func TestReadWakerAfterBulkBatch(t *testing.T) {
	r, cutter, c1, c2, asked := wakerOverTLS(t)
	queued := func(n int) func() bool {
		return func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.peek.bytesQueued() >= n
		}
	}
	var none *readWaker
	require.False(t, none.afterBulkBatch())

	r.parked.Store(true)
	r.readerWaits()
	require.False(t, r.afterBulkBatch(), "no bytes wait")

	// A record of 12 bytes, as a pong's: control, not worth the wake.
	pong := make([]byte, headerSize)
	_, err := c2.Write(pong)
	require.NoError(t, err)
	require.Eventually(t, queued(headerSize+tlsRecordOverhead), 5*time.Second, time.Millisecond, "the pong's record reaches the socket")
	r.mu.Lock()
	pongRecord := r.peek.bytesQueued()
	r.mu.Unlock()
	require.LessOrEqual(t, pongRecord, controlRecordBytes, "a pong's record, as it waits on the socket, is within controlRecordBytes")
	require.False(t, r.afterBulkBatch(), "only a control record waits")
	require.False(t, asked())

	// A 64 B message's record after it: data for a Read, likely.
	msg := make([]byte, headerSize+64)
	_, err = c2.Write(msg)
	require.NoError(t, err)
	want := 2*tlsRecordOverhead + len(pong) + len(msg)
	require.Eventually(t, queued(want), 5*time.Second, time.Millisecond, "the message's record reaches the socket")
	r.readerDone()
	require.False(t, r.afterBulkBatch(), "no Read waits")
	r.readerWaits()
	r.parked.Store(false)
	require.False(t, r.afterBulkBatch(), "the read loop is not in a read")
	r.parked.Store(true)
	require.False(t, asked())
	require.True(t, r.afterBulkBatch(), "a Read waits, a data record waits, the read loop is parked")
	require.True(t, asked())

	buf := make([]byte, 128)
	n, err := c1.Read(buf)
	require.Zero(t, n)
	require.True(t, cutter.cleared(err), "the cut read returns the cut's timeout: %v", err)
	got := 0
	for got < len(pong)+len(msg) {
		n, err = c1.Read(buf)
		require.NoError(t, err)
		got += n
	}
	require.Equal(t, len(pong)+len(msg), got)
}

// wakerOverTLS returns a read waker (at two P) over c1, one end of a TLS
// pair, its cutter, the peer's end c2, and asked, which tells whether the
// waker asked the cutter for a cut.
func wakerOverTLS(t *testing.T) (r *readWaker, cutter *readCutter, c1, c2 *tls.Conn, asked func() bool) {
	t.Helper()
	c1, c2 = tlsPair(t)
	cutter = newReadCutter(c1)
	r = newReadWaker(c1, cutter, false, true)
	require.NotNil(t, r)
	asked = func() bool {
		cutter.mu.Lock()
		defer cutter.mu.Unlock()
		return cutter.asked
	}
	return r, cutter, c1, c2, asked
}

// TestSocketPeekAllocates: a look at the socket allocates nothing.
func TestSocketPeekAllocates(t *testing.T) {
	c1, _ := tcpPair(t)
	p := socketUnder(c1).peeker()
	require.NotNil(t, p)
	allocs := testing.AllocsPerRun(100, func() { p.bytesQueued() })
	require.Zero(t, allocs)
}
