package braid

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bulk sent by copy (streamSend.bulk): the streams of a bufio.Writer's 4
// KiB Writes, which the writer can't keep up with, beside another
// stream's small frames.

// pushWrite queues a copied frame of n bytes of a Write of write bytes on
// s, as send does.
func pushWrite(w *writer, s *streamSend, id uint32, n, write int) {
	w.sched.push(s, header{typ: typeData, streamID: id, length: uint32(n)}, make([]byte, n))
	w.sched.noteWrite(s, write)
}

// copyBulkWriter is a writer on a loopback path of rtt with two bulk
// queues of 4 KiB frames, copied, as send leaves them once their Writes
// waited for room.
func copyBulkWriter(t *testing.T, writev, parallel bool, rtt time.Duration) (*writer, []*streamSend) {
	t.Helper()
	w := &writer{codec: yamuxCodec{}, writev: writev, parallel: parallel, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(rtt)}
	streams := []*streamSend{new(streamSend), new(streamSend)}
	for i, s := range streams {
		for range 3 {
			pushWrite(w, s, uint32(2*i+1), 4096, 4096)
		}
		w.sched.markBulk(s)
	}
	t.Cleanup(func() { w.mu.Lock(); w.stopMarkerTimer(); w.mu.Unlock() })
	return w, streams
}

// TestWriterCopiedBulkBesideSmallFrames: from another stream's small frame
// on, for severalQuiet, copied bulk leaves copySlack to small frames
// (scheduler.smallBeside), and with more than one P gets
// sharedCopyInflight, minInflight before and after; never at one P,
// beside by-reference bulk, or on a link (a budget the path's rate
// sizes).
func TestWriterCopiedBulkBesideSmallFrames(t *testing.T) {
	for _, writev := range []bool{true, false} {
		w, _ := copyBulkWriter(t, writev, true, 10*time.Microsecond)
		require.True(t, w.hasWorkLocked())
		require.Equal(t, minInflight, w.bound.budget, "writev %v: copied bulk alone", writev)
		require.False(t, w.sched.smallBeside, "writev %v: nothing to leave copySlack to", writev)

		var small streamSend
		pushWrite(w, &small, 99, 64, 64)
		require.True(t, w.hasWorkLocked())
		require.Equal(t, sharedCopyInflight, w.bound.budget, "writev %v: a small frame beside it", writev)
		require.True(t, w.sched.smallBeside, "writev %v: copySlack left to the small frames", writev)
		require.Equal(t, sharedCopyInflight/markersPerBudget, w.bound.markerEvery(), "writev %v: its markers", writev)
		require.Greater(t, time.Until(w.smallUntil), severalQuiet-time.Second/10, "writev %v: the quiet is severalQuiet", writev)
		w.sched.drop(&small)
		require.True(t, w.hasWorkLocked())
		require.Equal(t, sharedCopyInflight, w.bound.budget, "writev %v: within severalQuiet of the small frame", writev)
		w.smallUntil = time.Now() // the quiet is over
		require.True(t, w.hasWorkLocked())
		require.Equal(t, minInflight, w.bound.budget, "writev %v: severalQuiet after the small frame", writev)
		require.False(t, w.sched.smallBeside, "writev %v: severalQuiet after the small frame", writev)
		require.True(t, w.smallUntil.IsZero(), "writev %v: no quiet runs, and the clock is not read", writev)

		// A bulk stream's own 4 KiB frames on a queue not yet bulk (it
		// was emptied and made again) are no small message, nor is a
		// short frame its credit cut from one, nor a FIN.
		var fresh streamSend
		pushWrite(w, &fresh, 101, 4096, 4096)
		pushWrite(w, &fresh, 101, 500, 4096)
		pushWrite(w, &fresh, 101, 0, 0)
		require.True(t, w.hasWorkLocked())
		require.Equal(t, minInflight, w.bound.budget, "writev %v: a fresh bulk queue's frames", writev)
	}

	small := func(w *writer) { pushWrite(w, new(streamSend), 99, 64, 64) }
	w, _ := copyBulkWriter(t, true, false, 10*time.Microsecond)
	small(w)
	require.True(t, w.hasWorkLocked())
	require.Equal(t, minInflight, w.bound.budget, "one P: the two ends take turns, and the budget is not what the small frame waits behind")
	require.True(t, w.sched.smallBeside, "one P: copySlack left to the small frames")

	w, _ = copyBulkWriter(t, false, true, 10*time.Microsecond)
	w.sched.pushRef(new(streamSend), header{typ: typeData, streamID: 51}, make([]byte, 64<<10))
	small(w)
	require.True(t, w.hasWorkLocked())
	require.Equal(t, sharedDecryptInflight, w.bound.budget, "by-reference bulk beside: its floor")
	require.True(t, w.sched.smallBeside, "by-reference bulk beside: copySlack left to the small frames")

	w, _ = copyBulkWriter(t, true, true, 2*linkRTT)
	small(w)
	require.True(t, w.hasWorkLocked())
	require.Greater(t, w.bound.budget, minInflight, "a link: the path's product")

	// One bulk stream counts as several: once the small message's
	// frame is taken it is alone in the ring, and the quiet holds.
	for _, writev := range []bool{true, false} {
		w := &writer{codec: yamuxCodec{}, writev: writev, parallel: true, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond)}
		var bulk, ping streamSend
		pushWrite(w, &bulk, 1, 4096, 4096)
		w.sched.markBulk(&bulk)
		w.sched.noteWrite(&ping, 64) // queued, and taken
		require.False(t, w.sched.cutsAtRoom(), "writev %v: one stream in the ring", writev)
		require.True(t, w.hasWorkLocked())
		require.Equal(t, sharedCopyInflight, w.bound.budget, "writev %v: one bulk stream within severalQuiet of a small message", writev)
		require.True(t, w.sched.smallBeside, "writev %v: one bulk stream leaves copySlack", writev)
		require.True(t, w.hasWorkLocked())
		require.Equal(t, sharedCopyInflight, w.bound.budget, "writev %v: and at the next batch, within the quiet", writev)
		w.stopMarkerTimer()
	}

	// Nor is a small Write before any bulk was queued (the byte that
	// opened the stream), however late the budget is sized after it.
	for _, parallel := range []bool{true, false} {
		w := &writer{codec: yamuxCodec{}, writev: true, parallel: parallel, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond)}
		var s streamSend
		pushWrite(w, &s, 1, 1, 1)
		for range 3 {
			pushWrite(w, &s, 1, 4096, 4096)
		}
		w.sched.markBulk(&s)
		require.True(t, w.hasWorkLocked())
		require.False(t, w.sched.smallBeside, "parallel %v: the opening byte of a stream that then sends alone", parallel)
		w.stopMarkerTimer()
	}

	// A bulk stream's own small Writes (a length prefix before each
	// message) are no small messages beside it.
	w, streams := copyBulkWriter(t, true, true, 10*time.Microsecond)
	pushWrite(w, streams[0], 1, 4, 4)
	require.True(t, w.hasWorkLocked())
	require.Equal(t, minInflight, w.bound.budget, "a bulk stream's own prefix")
	require.False(t, w.sched.smallBeside, "a bulk stream's own prefix")
}

// TestWriterParksWithOnlyCopiedBulkHeld: while several streams send, the
// writer parks when the budget is spent and only bulk by copy waits (the
// slack above the budget is for small frames: it must not spin on
// batches that take nothing), and wakes for a small frame.
func TestWriterParksWithOnlyCopiedBulkHeld(t *testing.T) {
	w, _ := copyBulkWriter(t, true, true, 10*time.Microsecond)
	var ping streamSend
	pushWrite(w, &ping, 99, 64, 64)
	w.sched.drop(&ping) // the quiet runs
	require.True(t, w.hasWorkLocked())
	require.Equal(t, sharedCopyInflight, w.bound.budget)
	f := &w.bound
	f.sent += uint64(f.budget) // the budget in flight, marked
	f.marked = f.sent
	f.markers = append(f.markers, marker{id: markerFlag | 1, offset: f.sent})
	require.False(t, w.hasWorkLocked(), "only copied bulk, no room: park")
	require.True(t, f.blocked)

	pushWrite(w, new(streamSend), 99, 64, 64)
	require.True(t, w.hasWorkLocked(), "a small frame has copySlack")
	require.Equal(t, sharedCopyInflight, w.bound.budget)
	w.takeLocked()
	got := takenBytes(t, &w.b, 99)
	require.Equal(t, headerSize+64, got[98], "the small frame taken")
	require.Zero(t, got[0]+got[2], "no bulk frame taken beyond the budget")
}

// TestSendMarksBulk: a Write that waits for room in its stream's queue
// marks the stream bulk when it is a copied Write larger than
// maxSmallPayload (a bufio.Writer's 4 KiB), not when it is a small
// message (100 streams of 64 B Writes wait for room too, and stay small
// writers), nor when it is the rest of a Write of refThreshold or more
// that its credit cut to a copied frame (the stream sends by reference).
func TestSendMarksBulk(t *testing.T) {
	for _, c := range []struct {
		size int
		bulk bool
	}{{64, false}, {maxSmallPayload, false}, {maxSmallPayload + 1, true}, {4096, true}, {refThreshold - 1, true}, {refThreshold, false}, {64 << 10, false}} {
		w := &writer{codec: yamuxCodec{}, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes)}
		var s streamSend
		h := header{typ: typeData, streamID: 1, length: uint32(c.size)}
		for w.sched.hasRoom(&s) {
			w.sched.push(&s, h, make([]byte, c.size))
		}
		require.False(t, s.bulk, "%d B: queued without waiting", c.size)
		cancel := make(chan struct{})
		sent := make(chan error, 1)
		go func() { sent <- w.send(&s, h, make([]byte, c.size), c.size, cancel) }()
		require.Eventually(t, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return s.q.waiting
		}, 5*time.Second, time.Millisecond, "%d B: the Write waits for room", c.size)
		w.mu.Lock()
		bulk, bulkQueued, queued := s.bulk, w.sched.bulkQueued, w.sched.queued
		w.mu.Unlock()
		close(cancel)
		require.ErrorIs(t, <-sent, os.ErrDeadlineExceeded)
		require.Equal(t, c.bulk, bulk, "%d B Writes", c.size)
		if c.bulk {
			require.Equal(t, queued, bulkQueued, "%d B: what was queued counts as bulk", c.size)
		} else {
			require.Zero(t, bulkQueued, "%d B", c.size)
		}

		// The queue goes once it is empty; what the stream queues next
		// counts as bulk from its first frame.
		w.sched.failAll(ErrSessionClosed)
		require.Nil(t, s.q)
		w.sched.push(&s, h, make([]byte, c.size))
		if c.bulk {
			require.Equal(t, w.sched.queued, w.sched.bulkQueued, "%d B: the next queue", c.size)
		} else {
			require.Zero(t, w.sched.bulkQueued, "%d B: the next queue", c.size)
		}
	}
}
