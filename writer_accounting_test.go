package braid

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of the writer's accounting (queued bytes, in-flight room): each failed on the
// code before the fix named in its comment.

// TestMplexQueuedBytesBalance: the scheduler's count of copied bytes
// queued (scheduler.queued) is back to zero once everything queued was
// written, on mplex as on yamux. mplex's headers are uvarints, shorter
// than yamux's 12 bytes; push counted headerSize for each frame and take
// subtracted the frame's real size, so the count grew by about ten bytes
// a frame for the life of the session. The count decides CoalesceDelay's
// wait ("queued+ctrl < maxBatch"): once it passed a batch, every frame went
// out at once, the delay silently off.
func TestMplexQueuedBytesBalance(t *testing.T) {
	for _, proto := range []Protocol{Yamux, Mplex} {
		t.Run(map[Protocol]string{Yamux: "yamux", Mplex: "mplex"}[proto], func(t *testing.T) {
			const delay = 30 * time.Millisecond
			cfg := DefaultConfig()
			cfg.Protocol = proto
			cfg.CoalesceDelay = delay
			cfg.MaxBatchBytes = minBatchBytes
			client, _, a, b := streamPair(t, cfg)

			// Many small frames, written and read.
			const msgs = 4000
			done := make(chan error, 1)
			go func() {
				_, err := io.ReadFull(b, make([]byte, msgs))
				done <- err
			}()
			for range msgs {
				_, err := a.Write([]byte{1})
				require.NoError(t, err)
			}
			require.NoError(t, errWithin(t, done, "Read"))
			w := client.w
			require.Eventually(t, func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				return !w.sched.busy() && len(w.ctrl) == 0
			}, eventually, time.Millisecond)
			w.mu.Lock()
			queued := w.sched.queued
			w.mu.Unlock()
			assert.Zero(t, queued, "copied bytes counted as queued with nothing queued")

			// The delay still applies: a lone frame waits for it.
			errc := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := io.ReadFull(b, make([]byte, 1))
				errc <- err
			}()
			_, err := a.Write([]byte{2})
			require.NoError(t, err)
			require.NoError(t, errWithin(t, errc, "Read"))
			require.GreaterOrEqual(t, time.Since(start), delay*9/10, "CoalesceDelay was not waited")
		})
	}
}

// TestWriterMarksWhenRoomTooSmallToCut: while several streams send by
// reference, frames are cut at the in-flight bound's room and a room under
// minRefCut+headerSize takes nothing (refFits). If then no marker is out
// to free it (an early marker's pong came, markEarly, leaving the batch's
// last frame in flight unmarked, and the budget shrank as a second stream
// joined a lone one), a marker must be due at once. needMarker asked for
// one only at a room of exactly 0 (TestInflightEarlyMarkerShrunkBudgetMarks):
// with a few KiB of room the writer waited for the marker timeout, and
// since the peer kept sending frames (window updates, pings), the timeout
// switched the bound off for the session. The writer runs over net.Pipe
// (no writev, more than one P: the conn markEarly is for); the peer reads
// every frame and answers markers as a read loop would.
func TestWriterMarksWhenRoomTooSmallToCut(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	cfg := DefaultConfig()
	w := newWriter(c1, yamuxCodec{}, cfg)
	w.parallel = true // busyReadLoop: the shared budget is sharedDecryptInflight
	w.path = pathWithRTT(10 * time.Microsecond)
	var received atomic.Uint64
	w.received = &received

	// The state an early marker's answered pong leaves: every byte marked,
	// no marker out, the last frame (a lone stream's, of nearly a shared
	// budget) in flight, 4 KiB of the shared budget left.
	const room = 4 << 10
	w.bound.sent = 1 << 20
	w.bound.marked = w.bound.sent
	w.bound.acked = w.bound.sent - uint64(sharedDecryptInflight-room)

	// The peer: reads everything, answers markers, and keeps talking
	// (a frame every few ms, as window updates and pings do).
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				received.Add(1)
			}
		}
	}()
	go func() {
		var hdr [headerSize]byte
		for {
			if _, err := io.ReadFull(c2, hdr[:]); err != nil {
				return
			}
			h, err := decodeHeader(hdr[:])
			if err != nil {
				return
			}
			if h.typ == typePing && h.flags&flagSYN != 0 && isMarker(h.length) {
				received.Add(1)
				w.markerAnswered(h.length)
				continue
			}
			if h.typ == typeData {
				if _, err := io.CopyN(io.Discard, c2, int64(h.length)); err != nil {
					return
				}
			}
		}
	}()

	// Two streams' by-reference writes, both queued before run looks.
	payload := make([]byte, 64<<10)
	var a, b streamSend
	errc := make(chan error, 2)
	for i, s := range []*streamSend{&a, &b} {
		go func() {
			_, err := w.sendRef(s, header{typ: typeData, streamID: uint32(2*i + 1)}, payload, nil)
			errc <- err
		}()
	}
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.sched.ring) == 2
	}, eventually, time.Millisecond)
	start := time.Now()
	go w.run()
	defer func() {
		w.close(false, ErrSessionClosed)
		<-w.done
	}()
	for range 2 {
		require.NoError(t, errWithin(t, errc, "sendRef"))
	}
	elapsed := time.Since(start)
	w.mu.Lock()
	off := w.bound.off
	w.mu.Unlock()
	assert.False(t, off, "the in-flight bound was switched off")
	assert.Less(t, elapsed, minMarkerTimeout/2, "the writer waited for the marker timeout")
}
