package braid

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/braidmux/braid/slowconn"
	"github.com/stretchr/testify/require"
)

// Unit tests of the writer (coalesce.go, connwrite.go, writerbudget.go,
// sendqueue.go, inflight.go) beside the end-to-end ones; the scheduler's
// are in scheduler_test.go.

// TestLargeWriteFramesAndOrder: one Write of many windows' worth is handed
// to the writer whole and split into frames of at most maxLoneBatches
// batches (a lone stream's on a fast conn, writerate.go), every byte in
// order, on yamux and mplex.
func TestLargeWriteFramesAndOrder(t *testing.T) {
	for _, proto := range []Protocol{Yamux, Mplex} {
		t.Run(proto.String(), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Protocol = proto
			client, _, a, b := streamPair(t, cfg)
			msg := make([]byte, 3<<20+17)
			for i := range msg {
				msg[i] = byte(i * 7)
			}
			frames0 := client.Stats().FramesSent
			errc := make(chan error, 1)
			go func() {
				_, err := a.Write(msg)
				errc <- err
			}()
			got := make([]byte, len(msg))
			_, err := io.ReadFull(b, got)
			require.NoError(t, err)
			require.NoError(t, errWithin(t, errc, "Write"))
			require.True(t, bytes.Equal(msg, got), "bytes differ")
			frames := client.Stats().FramesSent - frames0
			require.GreaterOrEqual(t, frames, uint64(len(msg)/(maxLoneBatches*cfg.MaxBatchBytes)), "frames of at most maxLoneBatches batches")
		})
	}
}

// TestResetDropsQueuedData: the part of a Write the writer has not taken
// when the stream is reset is not sent after the RST, and the Write returns
// a reset error, not success. The link is slow and its send buffer holds
// one record, so the writer is still in the second frame's write when the
// reset comes and the other two frames are queued; Close flushes
// whatever is queued, so the bytes sent after it tell whether they were
// dropped.
func TestResetDropsQueuedData(t *testing.T) {
	c1, c2 := slowconn.Pipe(slowconn.Link{Bandwidth: 8e6, Latency: time.Millisecond, SendBuffer: 16 << 10})
	client, server := sessionPairOver(t, c1, c2, nil)
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	const size = InitialStreamWindow // one by-reference write
	errc := make(chan error, 1)
	go func() {
		_, err := a.Write(make([]byte, size))
		errc <- err
	}()
	b, err := server.AcceptStream()
	require.NoError(t, err)
	var one [1]byte
	_, err = io.ReadFull(b, one[:]) // the first frame is on its way
	require.NoError(t, err)
	require.NoError(t, a.Reset())
	err = errWithin(t, errc, "Write")
	require.ErrorIs(t, err, ErrStreamReset)
	require.NoError(t, client.Close())
	sent := client.Stats().BytesSent
	// At 1 MB/s a frame's write takes 64 ms, and the server reads the
	// first byte once the whole first frame arrived, while the writer is
	// in the second frame's write: the last two frames must be dropped
	// (sent, they make four batches).
	const batch = DefaultMaxBatchBytes
	require.Less(t, sent, uint64(3*batch), "bytes sent after the reset")
}

// TestInflightSharedRefHold: while several streams send on a writev conn,
// by-reference frames leave sharedRefHold of the budget unused and copied
// frames keep all of it; a by-reference room of 0 asks for a marker, so
// the pong that frees it comes.
func TestInflightSharedRefHold(t *testing.T) {
	var f inflight
	f.setBudget(10*time.Microsecond, true, 1, 0)
	require.Equal(t, minInflight-sharedRefHold, f.refRoom(), "by reference")
	require.Equal(t, minInflight, f.room(), "copied")
	f.took(minInflight - sharedRefHold)
	require.Zero(t, f.refRoom())
	require.Equal(t, sharedRefHold, f.room())
	f.marked = f.sent - 1 // all but a byte marked: only the full room asks
	require.True(t, f.needMarker(), "no room for by-reference frames: a marker")
	f.setBudget(10*time.Microsecond, false, 1, 0)
	require.Equal(t, sharedRefHold, f.refRoom(), "a lone stream's frames use the whole budget")
}

// TestInflightBudget is a table test of the in-flight bound's accounting.
func TestInflightBudget(t *testing.T) {
	var f inflight
	require.Equal(t, -1, f.room(), "no round trip yet: no bound")
	f.setBudget(10*time.Microsecond, false, 1, 0)
	require.Equal(t, minInflight, f.budget, "a short round trip gets the least budget")
	steps := []struct {
		took     int
		wantMark bool
		wantRoom int
	}{
		{minInflight / 8, false, minInflight - minInflight/8},
		{minInflight / 8, true, minInflight - minInflight/4},
		{minInflight / 2, true, minInflight / 4},
		{minInflight, true, 0},
	}
	var ids []uint32
	for i, s := range steps {
		mark := f.took(s.took)
		require.Equal(t, s.wantMark, mark, "step %d", i)
		if mark {
			id := f.mark()
			require.True(t, isMarker(id))
			ids = append(ids, id)
		}
		require.Equal(t, s.wantRoom, f.room(), "step %d", i)
	}
	// The second marker's pong frees what preceded it, and the first with
	// it; an unknown or repeated pong changes nothing.
	require.True(t, answered(&f, ids[1]))
	require.Equal(t, minInflight, int(f.sent-f.acked))
	require.Equal(t, 0, f.room(), "a full budget")
	require.Equal(t, copySlack, f.roomFor(copySlack), "copied frames get the slack at a full budget")
	require.False(t, answered(&f, ids[0]))
	require.False(t, answered(&f, markerFlag|12345))
	require.True(t, answered(&f, ids[2]))
	require.Len(t, f.markers, 0)
	require.Equal(t, minInflight, f.room())
	// Long round trips scale the budget; off means no bound.
	f.setBudget(10*time.Millisecond, false, 1, 0)
	require.Equal(t, int(0.01*inflightRate), f.budget)
	f.off = true
	require.Equal(t, -1, f.room())
	require.False(t, f.took(1<<20))
}

// TestInflightShrunkBudgetMarks: a budget that shrinks under bytes sent
// without a marker (less than a quarter of the old budget, so none was
// due) holds the writer back; a marker must follow them at once, or no
// pong would ever free the budget and the writer would stall until the
// marker timeout switched the bound off.
func TestInflightShrunkBudgetMarks(t *testing.T) {
	var f inflight
	f.setBudget(2*time.Millisecond, false, 1, 0) // 2.5 MB at inflightRate
	big := f.budget
	require.False(t, f.took(big/markersPerBudget-1), "under a quarter of the budget: no marker due")
	f.setBudget(10*time.Microsecond, false, 1, 0)
	require.Equal(t, 0, f.room(), "the shrunk budget is full")
	require.True(t, f.needMarker(), "unmarked bytes in flight at a full budget need a marker")
	id := f.mark()
	require.False(t, f.needMarker(), "marked")
	require.True(t, answered(&f, id))
	require.Equal(t, minInflight, f.room(), "the pong frees the budget")
}

// TestInflightEarlyMarkerShrunkBudgetMarks: an early marker (markEarly)
// marks the bytes before a batch's last frame; once its pong came, that
// frame is in flight with no marker out. If the budget then shrinks under
// it (another stream joins a lone one), a marker must be due, or no pong
// would ever free the budget and the writer would wait for the marker
// timeout, which then switches the bound off for the session.
func TestInflightEarlyMarkerShrunkBudgetMarks(t *testing.T) {
	const frame = 256 << 10
	var f inflight
	f.setBudget(10*time.Microsecond, false, loneParallelScale, 0)
	require.True(t, f.took(2*frame), "half the lone budget: a marker is due")
	id := f.markAt(f.sent - frame) // before the batch's last frame
	require.False(t, f.needMarker(), "marked")
	require.True(t, answered(&f, id))
	require.Equal(t, uint64(frame), f.sent-f.acked, "the last frame is in flight")
	require.False(t, f.needMarker(), "budget left: the next bytes carry the next marker")
	f.setBudget(10*time.Microsecond, false, 1, 0)
	require.Equal(t, 0, f.refRoom(), "the shrunk budget is full")
	require.True(t, f.needMarker(), "bytes in flight that no marker covers, at a full budget, need one")
	id = f.mark()
	require.True(t, answered(&f, id))
	require.Equal(t, minInflight, f.refRoom(), "its pong frees the budget")
}

// recordingConn is a net.Conn (the real one it wraps) that records the
// size of every Write, as a security layer sees them: each Write is
// encrypted into records of recordSize and a last, shorter one.
type recordingConn struct {
	net.Conn
	sizes []int
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.sizes = append(c.sizes, len(b))
	return c.Conn.Write(b)
}

// TestWriteFlatWholeRecords: on a conn without writev, writeFlat makes
// every Write a whole number of records and keeps the batch's final
// partial record for the next batch, so that back-to-back 64 KiB frames
// (65,548 bytes with their header) cost four records each, not five, and
// not a record for the marker ping after them. The bytes, in order, are
// what the frames encode.
func TestWriteFlatWholeRecords(t *testing.T) {
	c1, got := pipeSink(t)
	rec := &recordingConn{Conn: c1}
	w := &writer{conn: rec, codec: yamuxCodec{}, writeTimeout: time.Minute}
	payload := make([]byte, 64<<10)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	const frames = 16
	var want, flat []byte
	for i := range frames {
		h := header{typ: typeData, streamID: 1, length: uint32(len(payload))}
		hdr, hn := w.codec.encodeData(h)
		w.b.refs = append(w.b.refs[:0], refFrame{hdr: hdr, hdrLen: uint8(hn), payload: payload})
		want = append(append(want, hdr[:hn]...), payload...)
		var tail []byte
		if i%2 == 1 { // a marker after every other batch
			tail = w.codec.appendHeader(nil, header{typ: typePing, flags: flagSYN, length: markerFlag | uint32(i)})
			want = append(want, tail...)
		}
		var err error
		flat, err = w.writeFlat(flat, tail, true)
		require.NoError(t, err)
		require.Less(t, len(flat), recordSize, "batch %d: what is kept is one partial record", i)
	}
	w.b.refs = w.b.refs[:0]
	flat, err := w.writeFlat(flat, nil, false) // nothing new: the partial record goes
	require.NoError(t, err)
	require.Empty(t, flat)
	c1.Close()
	b := <-got
	require.Equal(t, len(want), len(b), "bytes written")
	for i := range want {
		if want[i] != b[i] {
			t.Fatalf("byte %d differs: %#x, want %#x", i, b[i], want[i])
		}
	}

	records := 0
	for i, n := range rec.sizes {
		records += (n + recordSize - 1) / recordSize
		if i < len(rec.sizes)-1 {
			require.Zero(t, n%recordSize, "write %d of %d bytes is not whole records", i, n)
		}
	}
	minRecords := (len(want) + recordSize - 1) / recordSize
	require.Equal(t, minRecords, records, "records for %d frames", frames)
}

// TestSendRefDeadlineCopies: a by-reference write whose deadline passed
// before the writer took it has its payload copied, so sendRef returns and
// the caller may reuse its memory at once; the bytes it had are still sent,
// in order, in frames of at most one batch. A copied send past the
// stream's share of the queue waits, and fails with the deadline.
func TestSendRefDeadlineCopies(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c2.Close()
	cfg := DefaultConfig()
	w := newWriter(c1, yamuxCodec{}, cfg)
	var s streamSend
	expired := make(chan struct{})
	close(expired)

	payload := make([]byte, 3*cfg.MaxBatchBytes+100)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	want := append([]byte(nil), payload...)
	queued, err := w.sendRef(&s, header{typ: typeData, streamID: 1}, payload, expired)
	require.True(t, queued)
	require.NoError(t, err, "the bytes were accepted")
	clear(payload) // the caller's memory is its own again

	// The stream's share of the queue is full now: a copied send waits,
	// until its deadline.
	err = w.send(&s, header{typ: typeData, streamID: 1, length: 1}, []byte{1}, 1, expired)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.False(t, s.q.waiting, "a send that gave up doesn't wait")

	go w.run()
	var got []byte
	for len(got) < len(want) {
		var hdr [headerSize]byte
		_, err := io.ReadFull(c2, hdr[:])
		require.NoError(t, err)
		h, err := decodeHeader(hdr[:])
		require.NoError(t, err)
		require.Equal(t, typeData, h.typ)
		require.LessOrEqual(t, int(h.length), cfg.MaxBatchBytes, "a frame of at most one batch")
		p := make([]byte, h.length)
		_, err = io.ReadFull(c2, p)
		require.NoError(t, err)
		got = append(got, p...)
	}
	require.True(t, bytes.Equal(want, got), "bytes differ")
	drained := make(chan int64)
	go func() {
		n, _ := io.Copy(io.Discard, c2) // until c1 closes
		drained <- n
	}()
	w.close(true, nil)
	<-w.done
	require.NoError(t, w.failure())
	c1.Close()
	require.Zero(t, <-drained, "bytes after the payload")
}

// TestWriteBatchMarksBeforeLastFrame: a marker the writer places early
// (markEarly: no writev, more than one P, budget left) goes between the
// batch's last two by-reference frames, so the batch keeps its final
// partial record as one without a marker does, and the marker marks the
// bytes before the last frame. With no budget left after the batch the
// marker ends it and marks every byte. The batch is taken by takeLocked
// from two streams' queued frames, as run takes it.
func TestWriteBatchMarksBeforeLastFrame(t *testing.T) {
	const maxBatch = 256 << 10 // room for both frames in one batch
	newW := func(conn net.Conn) *writer {
		w := &writer{conn: conn, codec: yamuxCodec{}, coalesce: true, parallel: true, writeTimeout: time.Minute,
			maxBatch: maxBatch, sched: newScheduler(yamuxCodec{}, maxBatch)}
		w.bound.setBudget(10*time.Microsecond, false, loneParallelScale, 0)
		return w
	}
	payload := make([]byte, 64<<10)
	frame := headerSize + len(payload)
	var a, b streamSend
	queue := func(w *writer) {
		w.sched.pushRef(&a, header{typ: typeData, streamID: 1}, payload)
		w.sched.pushRef(&b, header{typ: typeData, streamID: 3}, payload)
	}

	c1, c2 := net.Pipe()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c2)
		got <- b
	}()
	w := newW(c1)
	before := uint64(w.bound.markerEvery()) // sent so far, unmarked: a marker is due after this batch
	w.bound.sent, w.bound.acked = before, before
	queue(w)
	w.takeLocked()
	require.Len(t, w.b.refs, 2, "both frames in one batch")
	require.True(t, w.b.early, "budget is left: the marker goes early")
	require.Len(t, w.bound.markers, 1)
	require.Equal(t, before+uint64(frame), w.bound.markers[0].offset, "the marker marks the bytes before the last frame")
	require.Equal(t, before+uint64(2*frame), w.bound.sent)
	require.Equal(t, w.bound.sent, w.bound.marked, "the next marker is due a share after every byte taken")

	require.NoError(t, w.writeBatch())
	kept := len(w.flat)
	c1.Close()
	written := <-got
	c2.Close()
	total := 2*frame + len(w.b.tail)
	require.Equal(t, total%recordSize, kept, "the final partial record is kept for the next batch")
	require.Equal(t, total-kept, len(written))
	require.Equal(t, w.b.tail, written[frame:frame+len(w.b.tail)], "the marker is written between the two frames")

	// No budget left after the batch: the marker must mark it all, at its end.
	w = newW(nil)
	w.bound.sent = uint64(4 * w.bound.budget)
	w.bound.marked = w.bound.sent - uint64(w.bound.markerEvery()) + 1
	w.bound.acked = w.bound.sent + uint64(2*frame) - uint64(w.bound.budget) // the two frames fill the budget
	queue(w)
	w.takeLocked()
	require.Len(t, w.b.refs, 2)
	require.False(t, w.b.early, "no budget left: the marker ends the batch")
	require.Equal(t, 0, w.bound.refRoom())
	require.Len(t, w.bound.markers, 1)
	require.Equal(t, w.bound.sent, w.bound.markers[0].offset, "it marks every byte")
}

// TestWriteBatchSendsMarkerNow: on a conn without writev, with more than
// one P, a batch that ends with a marker ping is written whole, its final
// partial record too: the marker's pong frees the in-flight budget, and
// kept for the next batch it would wait for that batch's write. At one P
// the peer reads only once this side blocks, and run writes the kept
// record before it parks, so the marker is kept like any partial record.
// A batch without a marker keeps its partial record
// (TestWriteFlatWholeRecords).
func TestWriteBatchSendsMarkerNow(t *testing.T) {
	for _, tc := range []struct {
		marker, parallel, whole bool
	}{
		{marker: false, parallel: true, whole: false},
		{marker: true, parallel: true, whole: true},
		{marker: false, parallel: false, whole: false},
		{marker: true, parallel: false, whole: false},
	} {
		c1, c2 := net.Pipe()
		got := make(chan int, 1)
		go func() {
			b, _ := io.ReadAll(c2)
			got <- len(b)
		}()
		w := &writer{conn: c1, codec: yamuxCodec{}, coalesce: true, parallel: tc.parallel, writeTimeout: time.Minute}
		payload := make([]byte, 64<<10)
		hdr, hn := w.codec.encodeData(header{typ: typeData, streamID: 1, length: uint32(len(payload))})
		w.b.refs = append(w.b.refs, refFrame{hdr: hdr, hdrLen: uint8(hn), payload: payload})
		want := hn + len(payload)
		if tc.marker {
			w.b.tail = w.codec.appendHeader(nil, header{typ: typePing, flags: flagSYN, length: markerFlag | 1})
			want += len(w.b.tail)
		}
		require.NoError(t, w.writeBatch())
		kept := len(w.flat)
		c1.Close()
		written := <-got
		c2.Close()
		if tc.whole {
			require.Zero(t, kept, "%+v: the batch kept %d bytes", tc, kept)
			require.Equal(t, want, written, "%+v", tc)
		} else {
			require.Equal(t, want%recordSize, kept, "%+v: the partial record is kept for the next batch", tc)
			require.Equal(t, want-kept, written, "%+v", tc)
		}
	}
}

// TestWriterWaitsForACutSizedRoom: while several streams send by reference
// and frames are cut at the in-flight bound's room, a room too small for
// a cut of minRefCut is no work: the writer must wait for a marker's pong
// rather than take empty batches in a loop (an early version did, and at
// GOMAXPROCS 1 it starved the read loop that would read the pong: bulk
// fell to a third). A lone stream's whole frame goes with any room, and
// copied frames with their slack.
func TestWriterWaitsForACutSizedRoom(t *testing.T) {
	w := &writer{codec: yamuxCodec{}, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes)}
	defer w.stopMarkerTimer()
	w.bound.setBudget(10*time.Microsecond, false, 1, 0)
	w.bound.sent = uint64(w.bound.budget - minRefCut/2) // room: half a cut
	w.bound.marked = w.bound.sent
	w.bound.markers = []marker{{id: w.bound.mark(), offset: w.bound.sent}} // a pong will come

	payload := make([]byte, 64<<10)
	var a, b streamSend
	w.sched.pushRef(&a, header{typ: typeData, streamID: 1}, payload)
	require.True(t, w.hasWorkLocked(), "a lone stream's whole frame goes with any room")

	w.sched.pushRef(&b, header{typ: typeData, streamID: 3}, payload)
	require.False(t, w.hasWorkLocked(), "two streams: half a cut of room is no work")
	require.True(t, w.bound.blocked, "the writer waits for the bound")
	w.takeLocked()
	require.Empty(t, w.b.refs, "and a batch would take nothing")

	w.bound.acked = w.bound.sent - uint64(w.bound.budget-minRefCut-headerSize)
	require.True(t, w.hasWorkLocked(), "room for a cut of minRefCut")
	w.takeLocked()
	require.Len(t, w.b.refs, 1)
	require.Equal(t, minRefCut, len(w.b.refs[0].payload), "the frame is cut at the room")
}

// TestWriterLoneParallelBudget: on a conn without writev with more than
// one P, where the marker's round trip runs beside the writes, a lone
// stream's budget is loneDecryptScale times larger and carries
// loneDecryptMarkers markers in all; once a second stream sends it is
// back to one budget (sharedDecryptInflight's, marked
// sharedDecryptMarkers times). Elsewhere
// (writev, or one P) the lone budgets follow the frames' size: before any
// frame was sized, and for frames larger than loneSmallFrame, one budget
// (no floor: see loneParallelScale); for small frames loneParallelScale
// with more than one P and loneSerialScale with one; and the budget is
// back to one once a second stream sends a small frame.
func TestWriterLoneParallelBudget(t *testing.T) {
	payload := make([]byte, 64<<10)
	for _, parallel := range []bool{true, false} {
		w := &writer{codec: yamuxCodec{}, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond), parallel: parallel}
		var a, b streamSend
		w.sched.pushRef(&a, header{typ: typeData, streamID: 1}, payload)
		require.True(t, w.hasWorkLocked())
		want, every := minInflight, minInflight/markersPerBudget
		if parallel {
			want = loneDecryptScale * minInflight
			every = want / loneDecryptMarkers
		}
		require.Equal(t, want, w.bound.budget, "a lone stream's budget, parallel %v", parallel)
		require.Equal(t, every, w.bound.markerEvery(), "a lone stream's marker spacing, parallel %v", parallel)
		w.sched.pushRef(&b, header{typ: typeData, streamID: 3}, payload)
		w.sched.push(&b, header{typ: typeData, streamID: 3, length: 1}, []byte{1}) // and a small frame (TestWriterSeveralBulkStreams)
		require.True(t, w.hasWorkLocked())
		want, every = minInflight, minInflight/markersPerBudget
		if parallel {
			want = sharedDecryptInflight // no writev here (TestWriterSharedDecryptBudget)
			every = want / sharedDecryptMarkers
		}
		require.Equal(t, want, w.bound.budget, "two streams' budget, parallel %v", parallel)
		require.Equal(t, every, w.bound.markerEvery(), "two streams' marker spacing, parallel %v", parallel)
		w.stopMarkerTimer()
	}

	for _, c := range []struct{ writev, parallel bool }{{true, true}, {true, false}, {false, false}} {
		writev, parallel := c.writev, c.parallel
		for _, size := range []int{64 << 10, 256 << 10} {
			w := &writer{codec: yamuxCodec{}, writev: writev, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond), parallel: parallel}
			w.sched.loneFrame = maxLoneBatches * w.sched.frameMax
			pastSerialRamp(w)
			var a, b streamSend
			w.sched.pushRef(&a, header{typ: typeData, streamID: 1}, make([]byte, size))
			require.True(t, w.hasWorkLocked())
			require.Equal(t, minInflight, w.bound.budget, "writev %v, a lone stream's %d-byte writes before a frame was sized, parallel %v", writev, size, parallel)
			w.sched.refFrameLen(1, size) // its first frame is sized
			require.True(t, w.hasWorkLocked())
			want := minInflight
			switch {
			case size > loneSmallFrame:
			case parallel:
				want = loneParallelScale * minInflight
			default:
				want = loneSerialScale * minInflight
			}
			require.Equal(t, want, w.bound.budget, "writev %v, a lone stream's %d-byte frames, parallel %v", writev, size, parallel)
			if size <= loneSmallFrame {
				require.Greater(t, w.bound.budget, minInflight, "small frames: fewer turns")
			} else {
				require.Equal(t, minInflight, w.bound.budget, "large frames: each lent")
			}
			w.sched.push(&b, header{typ: typeData, streamID: 3, length: 1}, []byte{1})
			require.True(t, w.hasWorkLocked())
			require.Equal(t, minInflight, w.bound.budget, "writev %v, another stream's small frame, parallel %v", writev, parallel)
			w.stopMarkerTimer()
		}
	}
}

// pastSerialRamp makes w a session that has sent serialRamp bytes, every
// one of them read by the peer: a lone stream at one P has its
// loneSerialScale budgets (TestWriterSerialRamp).
func pastSerialRamp(w *writer) {
	w.bound.sent, w.bound.marked, w.bound.acked = serialRamp, serialRamp, serialRamp
}

// TestWriterSerialRamp: at one P a lone stream's small frames get one
// budget until the session has sent serialRamp bytes, and
// loneSerialScale budgets from then on, on a conn with writev (TCP) and
// without (TLS); with more than one P the ramp does not apply.
func TestWriterSerialRamp(t *testing.T) {
	payload := make([]byte, 64<<10)
	for _, c := range []struct {
		writev, parallel bool
		ramp, after      int
	}{
		{true, false, minInflight, loneSerialScale * minInflight},
		{false, false, minInflight, loneSerialScale * minInflight},
		{true, true, loneParallelScale * minInflight, loneParallelScale * minInflight},
	} {
		w := &writer{codec: yamuxCodec{}, writev: c.writev, parallel: c.parallel, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond)}
		var a streamSend
		w.sched.pushRef(&a, header{typ: typeData, streamID: 1}, payload)
		w.sched.refFrameLen(1, len(payload))
		require.True(t, w.hasWorkLocked())
		require.Equal(t, c.ramp, w.bound.budget, "writev %v, parallel %v: the session's first bytes", c.writev, c.parallel)
		w.bound.sent, w.bound.marked, w.bound.acked = serialRamp-1, serialRamp-1, serialRamp-1
		require.True(t, w.hasWorkLocked())
		require.Equal(t, c.ramp, w.bound.budget, "writev %v, parallel %v: a byte short of the ramp", c.writev, c.parallel)
		pastSerialRamp(w)
		require.True(t, w.hasWorkLocked())
		require.Equal(t, c.after, w.bound.budget, "writev %v, parallel %v: past the ramp", c.writev, c.parallel)
		w.stopMarkerTimer()
	}
}

// TestWriterLoneAfterQuiet: a stream gets the lone budgets only once it
// has sent alone for loneQuiet. Right after another stream's small frames
// were in the ring (a request beside a transfer, a ping-pong) it keeps one
// budget, which is what the other stream's next small frame waits
// behind (on a conn without writev, sharedDecryptInflight, as beside
// other bulk streams); a session where no other stream ever sent starts
// lone.
func TestWriterLoneAfterQuiet(t *testing.T) {
	payload := make([]byte, 64<<10)
	for _, writev := range []bool{true, false} {
		w := &writer{codec: yamuxCodec{}, writev: writev, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond), parallel: true}
		var a, b streamSend
		w.sched.pushRef(&a, header{typ: typeData, streamID: 1}, payload)
		w.sched.push(&b, header{typ: typeData, streamID: 3, length: 1}, []byte{1})
		require.True(t, w.hasWorkLocked())
		require.True(t, w.shared, "another stream's small frame in the ring: the quiet starts over")

		// Both were written; c now sends alone.
		var c streamSend
		w.sched = newScheduler(yamuxCodec{}, DefaultMaxBatchBytes)
		w.sched.pushRef(&c, header{typ: typeData, streamID: 5}, payload)
		require.True(t, w.hasWorkLocked())
		want := minInflight
		if !writev {
			want = sharedDecryptInflight // as beside other bulk streams (TestWriterSharedDecryptBudget)
		}
		require.Equal(t, want, w.bound.budget, "writev %v: alone for less than loneQuiet, one budget", writev)

		require.False(t, w.loneAfter.IsZero(), "alone again: the quiet runs")
		require.LessOrEqual(t, time.Until(w.loneAfter), loneQuiet, "one stream's quiet is loneQuiet")
		require.True(t, w.hasWorkLocked())
		require.Equal(t, want, w.bound.budget, "writev %v: still within loneQuiet, one budget", writev)
		w.loneAfter = time.Now()             // the quiet is over
		w.sched.refFrameLen(5, len(payload)) // a 64 KiB frame: small (loneSmallFrame)
		require.True(t, w.hasWorkLocked())
		lone := loneParallelScale * minInflight
		if !writev {
			lone = loneDecryptScale * minInflight
		}
		require.Equal(t, lone, w.bound.budget, "writev %v: alone for loneQuiet, the lone budgets", writev)
		w.stopMarkerTimer()
	}
}

// TestWriterLoneTakesTurns: streams that send in turn, each alone in the
// ring at its turn (written inline, as at one P), do not get the lone
// budgets while small frames come between their bulk frames: another
// stream's frame with a small one since the last sizing restarts the
// quiet, however long ago it began. Bulk frames alone taking turns keep
// them (TestWriterSeveralBulkStreams). One stream that then sends alone
// gets them once the quiet is over.
func TestWriterLoneTakesTurns(t *testing.T) {
	for _, parallel := range []bool{true, false} {
		w := &writer{codec: yamuxCodec{}, writev: true, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond), parallel: parallel}
		pastSerialRamp(w)
		lone := loneParallelScale * minInflight
		if !parallel {
			lone = loneSerialScale * minInflight
		}
		const a, b = 1, 3 // two streams' IDs
		w.sched.refFrameLen(a, 64<<10)
		w.sizeBudgetLocked(true)
		require.Equal(t, lone, w.bound.budget, "parallel %v: one stream, alone from the start", parallel)
		for i, id := range []uint32{b, a, b, a} {
			w.loneAfter = time.Now().Add(-time.Second) // any quiet would be over
			w.sched.refFrameLen(id, 64<<10)
			w.sched.copied = true // a small frame went since the last sizing (inlineLocked)
			w.sizeBudgetLocked(true)
			require.Equal(t, minInflight, w.bound.budget, "parallel %v: turn %d, another stream's frame beside small ones", parallel, i)
		}
		w.sched.refFrameLen(a, 64<<10)
		w.sizeBudgetLocked(true)
		require.Equal(t, minInflight, w.bound.budget, "parallel %v: alone again, within the quiet", parallel)
		w.loneAfter = time.Now() // the quiet is over
		w.sched.refFrameLen(a, 64<<10)
		w.sizeBudgetLocked(true)
		require.Equal(t, lone, w.bound.budget, "parallel %v: alone for loneQuiet", parallel)
		for i, id := range []uint32{b, a, b, a} {
			w.sched.refFrameLen(id, 64<<10)
			w.sizeBudgetLocked(true)
			require.Equal(t, lone, w.bound.budget, "parallel %v: turn %d of bulk frames alone", parallel, i)
		}
	}
}

// TestWriterSeveralBulkStreams: several streams that send by reference,
// with no small (copied) frame among them, get the lone budgets, from the
// session's start or once severalQuiet passed since the last small frame:
// what the budget holds back is only the next small frame, and there is
// none (BenchmarkBulkStreams). A small frame of any stream while several
// send restarts the quiet (the budget back to one, or with more than one
// P its floor); a lone stream's own small frames do not.
func TestWriterSeveralBulkStreams(t *testing.T) {
	payload := make([]byte, 64<<10)
	for _, c := range []struct {
		name             string
		writev, parallel bool
		lone, shared     int
	}{
		{"TCP, two Ps", true, true, loneParallelScale * minInflight, sharedParallelInflight},
		{"TCP, one P", true, false, loneSerialScale * minInflight, minInflight},
		{"TLS, two Ps", false, true, loneDecryptScale * minInflight, sharedDecryptInflight},
	} {
		w := &writer{codec: yamuxCodec{}, writev: c.writev, parallel: c.parallel, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond)}
		pastSerialRamp(w)
		streams := make([]streamSend, 4)
		for i := range streams {
			id := uint32(2*i + 1)
			w.sched.pushRef(&streams[i], header{typ: typeData, streamID: id}, payload)
			w.sched.refFrameLen(id, len(payload))
		}
		require.True(t, w.hasWorkLocked(), c.name)
		require.Equal(t, c.lone, w.bound.budget, "%s: several bulk streams from the start", c.name)

		var small streamSend
		w.sched.push(&small, header{typ: typeData, streamID: 99, length: 1}, []byte{1})
		require.True(t, w.hasWorkLocked(), c.name)
		require.Equal(t, c.shared, w.bound.budget, "%s: a small frame beside them", c.name)
		require.True(t, w.shared, "%s: the quiet starts over", c.name)
		w.sched.drop(&small)
		require.True(t, w.hasWorkLocked(), c.name)
		require.Equal(t, c.shared, w.bound.budget, "%s: within loneQuiet of the small frame", c.name)
		require.False(t, w.loneAfter.IsZero(), "%s: the quiet runs", c.name)
		require.Greater(t, time.Until(w.loneAfter), loneQuiet, "%s: several streams' quiet is severalQuiet", c.name)
		w.loneAfter = time.Now() // the quiet is over
		require.True(t, w.hasWorkLocked(), c.name)
		require.Equal(t, c.lone, w.bound.budget, "%s: severalQuiet after the small frame", c.name)
		w.stopMarkerTimer()
	}

	// One stream's own small frames leave it its lone budgets.
	w := &writer{codec: yamuxCodec{}, writev: true, parallel: true, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond)}
	var s streamSend
	w.sched.pushRef(&s, header{typ: typeData, streamID: 1}, payload)
	w.sched.refFrameLen(1, len(payload))
	w.sched.push(&s, header{typ: typeData, streamID: 1, length: 4}, make([]byte, 4))
	require.True(t, w.hasWorkLocked())
	require.Equal(t, loneParallelScale*minInflight, w.bound.budget, "one stream with small frames of its own")
	w.stopMarkerTimer()
}

// deadlineConn is a real conn that records the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time // the deadlines, in order; the writer's goroutine sets them
	at  []time.Time // when each was set
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.set = append(c.set, t)
	c.at = append(c.at, time.Now())
	return c.Conn.SetWriteDeadline(t)
}

// TestWriteDeadlineRenewedOncePerSlack: the writer's conn writes share one
// write deadline for an eighth of the connection write timeout, and every
// write still has the whole timeout: each deadline is more than the
// timeout after every write it covers.
func TestWriteDeadlineRenewedOncePerSlack(t *testing.T) {
	c1, c2 := tcpPair(t)
	const timeout = 400 * time.Millisecond
	dc := &deadlineConn{Conn: c1}
	w := newWriter(dc, yamuxCodec{}, &Config{ConnectionWriteTimeout: timeout})
	drained := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, c2); close(drained) }()
	defer func() { _ = c1.Close(); <-drained; _ = c2.Close() }()
	const writes = 100
	var starts, ends []time.Time
	for range writes {
		starts = append(starts, time.Now())
		require.NoError(t, w.write([]byte("x")))
		ends = append(ends, time.Now())
		time.Sleep(time.Millisecond)
	}
	// One deadline, then one per eighth of the timeout that passed
	// (100 writes of 1 ms span about half the timeout: 5 deadlines).
	slack := timeout / writeDeadlineSlack
	elapsed := ends[writes-1].Sub(starts[0])
	require.LessOrEqual(t, len(dc.set), 1+int(elapsed/slack), "one deadline per eighth of the timeout")
	for k, start := range starts {
		i := len(dc.set) - 1 // the deadline in effect: the last set before the write ended
		for i > 0 && dc.at[i].After(ends[k]) {
			i--
		}
		left := dc.set[i].Sub(start)
		require.GreaterOrEqual(t, left, timeout, "a write has the whole timeout")
		// At most an eighth more, and the time the write itself took.
		require.LessOrEqual(t, left, timeout+slack+ends[k].Sub(start), "and at most an eighth more")
	}
}

// TestMarkerTimeoutNeedsAPeerThatSpeaks: markers unanswered for a whole
// timeout switch the bound off only if other frames came from the peer
// meanwhile (a peer that drops pongs, as go-yamux does with a full
// backlog). With nothing at all from it (a stall, or this process paused)
// the bound stays and a new marker asks again for every byte sent; an
// answered marker re-arms the timer.
func TestMarkerTimeoutNeedsAPeerThatSpeaks(t *testing.T) {
	var frames atomic.Uint64
	w := &writer{codec: yamuxCodec{}, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes),
		inlineState: inlineState{received: &frames}, wake: make(chan struct{}, 1)}
	f := &w.bound
	f.setBudget(time.Millisecond, false, 1, 0)
	// arm blocks the writer and arms the timer, which the test fires itself.
	arm := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		f.blocked = true
		w.stopMarkerTimer()
		w.armMarkerTimer()
		f.timer.Stop()
	}
	rearmed := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		armed := f.timer != nil
		w.stopMarkerTimer()
		return armed
	}
	f.took(f.budget)
	f.mark()
	require.Zero(t, f.room(), "the budget is full")

	arm()
	w.markerTimeout() // nothing came
	require.False(t, f.off, "a silent stretch keeps the bound")
	require.Empty(t, f.markers, "the markers out are taken for lost")
	require.True(t, f.needMarker(), "a new marker asks again")
	require.True(t, rearmed())
	id := f.mark()

	arm()
	require.True(t, answered(f, id)) // a pong after the timer was armed
	frames.Add(1)
	f.took(f.budget)
	f.mark()
	w.markerTimeout()
	require.False(t, f.off, "progress: the timer watches on")
	require.True(t, rearmed())

	arm()
	frames.Add(3) // the peer speaks, but answers no marker
	w.markerTimeout()
	require.True(t, f.off, "a peer that drops pongs: no bound")
	require.Equal(t, -1, f.room())
	require.False(t, rearmed())
}

// TestBudgetFollowsMarkerRoundTrips: a budget sized from an inflated
// first ping (the session's, sent as the session starts) comes down once
// a marker's round trip, which goes into the session's path as a ping's
// does, shows the path is shorter; a longer round trip never raises it,
// a ping's shorter one stands, and no pong yet leaves the bound off.
func TestBudgetFollowsMarkerRoundTrips(t *testing.T) {
	w := &writer{codec: yamuxCodec{}, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: &pathState{}}
	f := &w.bound
	w.sizeBudgetLocked(false)
	require.Zero(t, f.budget, "no pong yet: no bound")
	const first = 2 * time.Millisecond // 2.5 MB at inflightRate
	w.path.rttSample(first, 0, time.Now())
	w.sizeBudgetLocked(false)
	require.Equal(t, int(first.Seconds()*inflightRate), f.budget)
	f.took(f.budget / markersPerBudget)
	id := f.mark()
	f.markers[0].at = time.Now().Add(-50 * time.Microsecond)
	w.markerAnswered(id)
	rtt := w.path.leastRTT()
	require.Less(t, rtt, first)
	require.GreaterOrEqual(t, rtt, 50*time.Microsecond)
	w.sizeBudgetLocked(false)
	require.Equal(t, minInflight, f.budget, "the budget is back at its floor")
	f.took(f.budget / markersPerBudget)
	id = f.mark()
	f.markers[0].at = time.Now().Add(-5 * time.Millisecond)
	w.markerAnswered(id)
	require.Equal(t, rtt, w.path.leastRTT(), "a longer round trip does not replace the least")
	w.path.rttSample(10*time.Microsecond, 0, time.Now())
	require.Equal(t, 10*time.Microsecond, w.path.leastRTT(), "the session's shorter round trip stands")
}

// pathWithRTT is a path whose least round trip is rtt.
func pathWithRTT(rtt time.Duration) *pathState {
	p := &pathState{}
	p.rttSample(rtt, 0, time.Now())
	return p
}

// answered is inflight.answered's verdict alone.
func answered(f *inflight, id uint32) bool {
	_, _, ok := f.answered(id)
	return ok
}

// TestMarkerTimeoutAfterFailStops: a marker timer that fires while the
// writer fails (its Stop came too late) finds the writer stopped and
// neither re-arms nor signals, so a dead session's writer is not kept
// reachable by a timer that re-arms itself forever.
func TestMarkerTimeoutAfterFailStops(t *testing.T) {
	w := &writer{}
	w.bound.blocked = true
	w.mu.Lock()
	w.failLocked(ErrSessionClosed)
	w.mu.Unlock()
	w.markerTimeout()
	require.Nil(t, w.bound.timer, "the timer re-armed on a stopped writer")
}

// TestWriterTrimsControlBuffersWhenIdle: control buffers that a burst of
// control frames grew past maxIdleCtrl are let go as the writer parks,
// so that an idle session does not keep them; the frames all go out.
// Fails without trimCtrlLocked: the buffers keep 12 KiB or more each.
func TestWriterTrimsControlBuffersWhenIdle(t *testing.T) {
	client, server := sessionPair(t, nil)
	const frames = 2000 // 24,000 bytes: past maxIdleCtrl, within maxQueuedCtrlBytes
	before := server.Stats().FramesReceived
	w := client.w
	w.mu.Lock()
	for i := range frames {
		// Window updates of streams never opened: the peer drops them.
		w.appendCtrlLocked(header{typ: typeWindowUpdate, streamID: uint32(1001 + 2*i), length: 1})
	}
	w.signal()
	w.mu.Unlock()
	require.Eventually(t, func() bool {
		return server.Stats().FramesReceived-before >= frames
	}, eventually, time.Millisecond, "the control frames arrive")
	var ctrl, spare, ends int
	kept := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		ctrl, spare, ends = cap(w.ctrl), cap(w.spareCtrl), cap(w.ctrlEnds)*headerSize
		return w.idle && ctrl <= maxIdleCtrl && spare <= maxIdleCtrl && ends <= maxIdleCtrl
	}
	require.Eventually(t, kept, eventually, time.Millisecond)
	t.Logf("an idle writer keeps ctrl %d, spare %d, ends %d bytes", ctrl, spare, ends)
}

// TestWriterCorksBulkOnly: with more than one P, over a conn without
// writev whose socket the cork reaches, the writer corks only batches of
// bulk that goes alone (bulkOnlyLocked, corkWorth): a stream with the lone
// budgets, its own small frames (a length prefix) counting for nothing,
// until another stream's small frame, and again once loneQuiet passed
// after it; never a batch with a small frame in it. At one P every batch
// of by-reference frames spanning two records is corked, as before.
func TestWriterCorksBulkOnly(t *testing.T) {
	bulk := &batch{refs: make([]refFrame, 1), size: 3 * recordSize}
	withSmall := &batch{refs: make([]refFrame, 1), data: make([]byte, 64), size: 3 * recordSize}
	for _, parallel := range []bool{true, false} {
		w := &writer{codec: yamuxCodec{}, maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes), path: pathWithRTT(10 * time.Microsecond), parallel: parallel}
		w.cork = recordCork{setCork: func(bool) bool { return true }}
		pastSerialRamp(w)
		const a, b = 1, 3 // two streams' IDs
		size := func(what string, want bool) {
			t.Helper()
			w.sched.refFrameLen(a, 64<<10)
			w.sizeBudgetLocked(true)
			if !parallel {
				want = false // bulkOnly is for more than one P
			}
			require.Equal(t, want, w.bulkOnly, "parallel %v: %s", parallel, what)
			bulk.bulkOnly, withSmall.bulkOnly = w.bulkOnly, w.bulkOnly
			require.Equal(t, want || !parallel, w.corkWorth(bulk), "parallel %v: %s: a batch of bulk", parallel, what)
			require.Equal(t, !parallel, w.corkWorth(withSmall), "parallel %v: %s: a batch with a small frame", parallel, what)
		}
		size("one stream alone from the start", true)
		w.sched.noteCopied(a)
		size("its own small frame", true)
		w.sched.noteCopied(b)
		size("another stream's small frame", false)
		size("within loneQuiet after it", false)
		w.corkAfter = time.Now().Add(-time.Nanosecond) // the quiet is over
		size("loneQuiet after it", true)
		w.stopMarkerTimer()
	}
}
