package braid

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Table tests of the scheduler's rules (scheduler.go): who writes next,
// and how much, batch after batch. Sizes are bytes on the wire, headers
// included; a yamux header is headerSize bytes.

// schedPush queues frames on one stream before a step's batch.
type schedPush struct {
	stream int   // index into the case's streams
	frames []int // copied frames, in wire bytes
	ref    int   // then a by-reference write of this many payload bytes
	bulk   bool  // then the stream sends bulk by copy (a copied Write of more than maxSmallPayload waited for room)
}

// schedStep is one batch: what is queued or dropped before it, the
// in-flight bound's state, and what the batch must hold.
type schedStep struct {
	push []schedPush
	drop []int
	held bool // the in-flight bound holds data back, with room bytes left
	room int
	want []int // bytes taken from each stream
	ring []int // the ring after the batch, in turn order
}

// frames returns n copied frames of size wire bytes each.
func frames(n, size int) []int {
	f := make([]int, n)
	for i := range f {
		f[i] = size
	}
	return f
}

func TestScheduler(t *testing.T) {
	const refFrame = 1200 + headerSize  // a by-reference frame of a 1200-byte batch
	const bulkFrame = 4096 + headerSize // a bufio.Writer's 4 KiB Write, copied
	cases := []struct {
		name      string
		maxBatch  int
		loneFrame int // the writer's lone-stream frame (writerate.go); 0 = one batch
		streams   int
		quiet     bool // no small message beside bulk by copy (scheduler.smallBeside false)
		steps     []schedStep
	}{{
		// Rule: busy streams send the same bytes per pass, whatever
		// their write sizes (quantum 400: 4, 2 and 1 frames).
		name: "equal bytes, not equal frames", maxBatch: 1200, streams: 3,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(12, 100)}, {stream: 1, frames: frames(6, 200)}, {stream: 2, frames: frames(3, 400)}},
				want: []int{400, 400, 400}, ring: []int{0, 1, 2}},
			{want: []int{400, 400, 400}, ring: []int{0, 1, 2}},
			{want: []int{400, 400, 400}, ring: []int{}},
		},
	}, {
		// Rule: a bulk write's frames (larger than the quantum) wait
		// for credit; over a few batches the bulk stream and the small
		// one send within a frame of each other. A by-reference frame
		// may go beyond the batch bound when it is the batch's first.
		name: "bulk beside small frames", maxBatch: 1200, streams: 2,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, ref: 3 * 1200}, {stream: 1, frames: frames(48, 100)}},
				want: []int{0, 600}, ring: []int{0, 1}},
			{want: []int{0, 600}, ring: []int{0, 1}},
			// Credit 1800: the bulk frame fills the batch, the small
			// stream is not reached and goes first next time.
			{want: []int{refFrame, 0}, ring: []int{1, 0}},
			{want: []int{0, 600}, ring: []int{1, 0}},
			{want: []int{refFrame, 600}, ring: []int{1, 0}},
			{want: []int{0, 600}, ring: []int{1, 0}},
			{want: []int{refFrame, 600}, ring: []int{1}}, // bulk: 3 frames, small: 3600 bytes
		},
	}, {
		// Rule: a large frame waits for its credit instead of filling
		// the batch, though the batch has room for it.
		name: "large frame waits for credit", maxBatch: 1200, streams: 2,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(3, 100)}, {stream: 1, frames: frames(1, 1000)}},
				want: []int{300, 0}, ring: []int{1}},
			{want: []int{0, 1000}, ring: []int{}},
		},
	}, {
		// Rule: while nobody can send, passes repeat in the same batch
		// until one frame fits; the next that doesn't fit waits.
		name: "passes repeat until a frame fits", maxBatch: 1200, streams: 2,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(1, 1000)}, {stream: 1, frames: frames(1, 1000)}},
				want: []int{1000, 0}, ring: []int{1}},
			{want: []int{0, 1000}, ring: []int{}},
		},
	}, {
		// Rule: streams not reached (the batch stopped at its limit)
		// go first next time; reached ones go behind them.
		name: "not reached go first", maxBatch: 3 * 16384, streams: 3,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(8, 4096)}, {stream: 1, frames: frames(8, 4096)}, {stream: 2, frames: frames(8, 4096)}},
				held: true, want: []int{copySlack, 0, 0}, ring: []int{1, 2, 0}},
			{held: true, want: []int{0, copySlack, 0}, ring: []int{2, 0, 1}},
			{held: true, want: []int{0, 0, copySlack}, ring: []int{0, 1, 2}},
			{want: []int{16384, 16384, 16384}, ring: []int{}},
		},
	}, {
		// Rule: a stream whose queue empties leaves the ring and loses
		// its credit: with the 500 bytes it had left, stream 0's
		// 1000-byte frame would fit the second batch.
		name: "emptied queue leaves the ring and loses its credit", maxBatch: 1200, streams: 2,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(1, 100)}, {stream: 1, frames: frames(7, 100)}},
				want: []int{100, 600}, ring: []int{1}},
			{push: []schedPush{{stream: 0, frames: frames(1, 1000)}},
				want: []int{0, 100}, ring: []int{0}},
			{want: []int{1000, 0}, ring: []int{}},
		},
	}, {
		// Rule: while the in-flight bound holds data back, by-reference
		// frames stop at its room (the first may cross it) and copied
		// frames get copySlack more.
		name: "refLimit and limit", maxBatch: 65536, streams: 2,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, ref: 20000}, {stream: 1, frames: frames(40, 1000)}},
				held: true, room: 0, want: []int{0, 16000}, ring: []int{1, 0}}, // 1 stopped by the batch: it keeps its turn
			// 1 goes on with what is left of its credit (16768: 16 frames),
			// then 0's by-reference frame is past refLimit.
			{held: true, room: 5000, want: []int{0, 16000}, ring: []int{1, 0}},
			{want: []int{20000 + headerSize, 8000}, ring: []int{}},
		},
	}, {
		// Rule: while the in-flight bound holds data back and another
		// stream is in the ring, a by-reference frame larger than the
		// room is cut at it (if the cut carries minRefCut or more), so
		// that small frames still have copySlack beyond the budget;
		// less room takes no frame. A lone stream's frame goes whole.
		name: "ref cut at the room", maxBatch: 65536, streams: 2,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, ref: 60000}, {stream: 1, frames: frames(1, 100)}},
				held: true, room: 20000, want: []int{20000, 100}, ring: []int{0}},
			{push: []schedPush{{stream: 1, frames: frames(1, 100)}},
				held: true, room: minRefCut, want: []int{0, 100}, ring: []int{0}},
			{held: true, room: 100, want: []int{60000 - (20000 - headerSize) + headerSize, 0}, ring: []int{}},
		},
	}, {
		// Rule: while one stream alone sends, its by-reference frames
		// carry up to loneFrame (waiting for the credit across passes);
		// with another stream in the ring, one batch.
		name: "lone stream's large frames", maxBatch: 1200, loneFrame: 4800, streams: 2,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, ref: 4800}}, want: []int{4800 + headerSize, 0}, ring: []int{}},
			{push: []schedPush{{stream: 0, ref: 4800}, {stream: 1, frames: frames(24, 100)}},
				want: []int{0, 600}, ring: []int{0, 1}},
			{want: []int{0, 600}, ring: []int{0, 1}},
			{want: []int{refFrame, 0}, ring: []int{1, 0}},
			{want: []int{0, 600}, ring: []int{1, 0}},
			{want: []int{refFrame, 600}, ring: []int{0}},
			{want: []int{4800 - 2*1200 + headerSize, 0}, ring: []int{}},
		},
	}, {
		// Rule: a dropped stream's frames are never taken, copied or by
		// reference, and it leaves the ring at its turn.
		name: "dropped stream", maxBatch: 1200, streams: 3,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(10, 100)}, {stream: 1, frames: frames(10, 100)}, {stream: 2, ref: 3 * 1200}},
				want: []int{400, 400, 0}, ring: []int{0, 1, 2}},
			{drop: []int{0}, want: []int{0, 400, 0}, ring: []int{1, 2}},
			{want: []int{0, 200, refFrame}, ring: []int{2}},
			{drop: []int{2}, want: []int{0, 0, 0}, ring: []int{}},
		},
	}, {
		// Rule: while several streams send, bulk sent by copy stops at
		// the in-flight budget (the room), as by-reference frames do,
		// and copySlack stays for the small frames of the others; what
		// is left of a held stream's credit for the pass is not kept.
		// Quantum 8216: two 4 KiB frames.
		name: "bulk by copy leaves the slack", maxBatch: 6 * bulkFrame, streams: 3,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(6, bulkFrame), bulk: true}, {stream: 1, frames: frames(6, bulkFrame), bulk: true}, {stream: 2, frames: []int{76}}},
				held: true, room: bulkFrame + 100, want: []int{bulkFrame, 0, 76}, ring: []int{0, 1}},
			{push: []schedPush{{stream: 2, frames: []int{76}}},
				held: true, room: 0, want: []int{0, 0, 76}, ring: []int{0, 1}},
			// The bound lets go: each sends its quantum (12324, three
			// frames), with no credit saved from the held passes.
			{want: []int{3 * bulkFrame, 3 * bulkFrame, 0}, ring: []int{0, 1}},
			// A bulk queue dropped leaves nothing counted.
			{drop: []int{1}, want: []int{2 * bulkFrame, 0, 0}, ring: []int{}},
		},
	}, {
		// So does one bulk stream between two small messages, when it
		// is alone in the ring: what it puts in flight then is what
		// the next one waits behind.
		name: "a lone bulk stream by copy leaves the slack", maxBatch: 6 * bulkFrame, streams: 1,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(6, bulkFrame), bulk: true}},
				held: true, room: bulkFrame + 100, want: []int{bulkFrame}, ring: []int{0}},
		},
	}, {
		// With no small message beside them, bulk streams by copy go
		// as far as any copied frame (copyRoom): they have only each
		// other to wait for.
		name: "bulk by copy with no small message beside keeps the slack", maxBatch: 6 * bulkFrame, streams: 2, quiet: true,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(6, bulkFrame), bulk: true}, {stream: 1, frames: frames(6, bulkFrame), bulk: true}},
				held: true, room: bulkFrame + 100, want: []int{3 * bulkFrame, 2 * bulkFrame}, ring: []int{1, 0}}, // 1 goes on first: the batch ended inside its turn
		},
	}, {
		name: "a lone bulk stream by copy with no small message beside keeps the slack", maxBatch: 6 * bulkFrame, streams: 1, quiet: true,
		steps: []schedStep{
			{push: []schedPush{{stream: 0, frames: frames(6, bulkFrame), bulk: true}},
				held: true, room: bulkFrame + 100, want: []int{5 * bulkFrame}, ring: []int{0}},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScheduler(yamuxCodec{}, tc.maxBatch)
			sc.smallBeside = !tc.quiet
			if tc.loneFrame > 0 {
				sc.loneFrame = tc.loneFrame
			}
			streams := make([]*streamSend, tc.streams)
			for i := range streams {
				streams[i] = new(streamSend)
			}
			var b batch
			for i, step := range tc.steps {
				for _, p := range step.push {
					s := streams[p.stream]
					for _, n := range p.frames {
						payload := make([]byte, n-headerSize)
						sc.push(s, header{typ: typeData, streamID: uint32(p.stream + 1), length: uint32(len(payload))}, payload)
					}
					if p.ref > 0 {
						sc.pushRef(s, header{typ: typeData, streamID: uint32(p.stream + 1)}, make([]byte, p.ref))
					}
					if p.bulk {
						sc.markBulk(s)
					}
				}
				for _, d := range step.drop {
					streams[d].dropped = true
					sc.drop(streams[d])
				}
				refLimit, bulkLimit, limit := tc.maxBatch, tc.maxBatch, tc.maxBatch
				if step.held { // as writer.takeLocked, with copyRoom copySlack
					refLimit = min(limit, step.room)
					limit = min(limit, step.room+copySlack)
					bulkLimit = min(limit, step.room+sc.bulkCopyRoom())
				}
				b.data, b.ends, b.refs, b.size = b.data[:0], b.ends[:0], b.refs[:0], 0
				sc.take(&b, refLimit, bulkLimit, limit)

				got := takenBytes(t, &b, tc.streams)
				require.Equal(t, step.want, got, "step %d: bytes taken per stream", i)
				sum := 0
				for _, n := range got {
					sum += n
				}
				require.Equal(t, sum, b.size, "step %d: batch size", i)
				ring := []int{}
				queued, bulkQueued := 0, 0
				for _, s := range sc.ring {
					for j := range streams {
						if streams[j] == s {
							ring = append(ring, j)
						}
					}
					queued += s.q.pending()
					if s.bulk {
						bulkQueued += s.q.pending()
					}
				}
				require.Equal(t, step.ring, ring, "step %d: ring", i)
				require.Equal(t, queued, sc.queued, "step %d: queued bytes", i)
				require.Equal(t, bulkQueued, sc.bulkQueued, "step %d: bulk queued bytes", i)
				for j, s := range streams {
					inRing := false
					for _, r := range sc.ring {
						inRing = inRing || r == s
					}
					require.Equal(t, inRing, s.q != nil, "step %d: stream %d holds a queue exactly while in the ring", i, j)
				}
				for _, f := range b.refs { // the write succeeded
					f.owner.refWritten(nil)
				}
			}
			for j, s := range streams {
				require.Zero(t, s.pendingRefs, "stream %d: by-reference frames left", j)
			}
		})
	}
}

// takenBytes returns the bytes of each stream's frames in b, and checks
// that copied frames are whole and in order.
func takenBytes(t *testing.T, b *batch, streams int) []int {
	t.Helper()
	got := make([]int, streams)
	start := 0
	for _, end := range b.ends {
		h, err := decodeHeader(b.data[start:end])
		require.NoError(t, err)
		require.Equal(t, end-start, headerSize+int(h.length), "a whole copied frame")
		got[h.streamID-1] += end - start
		start = end
	}
	require.Equal(t, len(b.data), start)
	for _, f := range b.refs {
		h, err := decodeHeader(f.hdr[:f.hdrLen])
		require.NoError(t, err)
		require.Equal(t, len(f.payload), int(h.length), "a by-reference frame's length")
		got[h.streamID-1] += int(f.hdrLen) + len(f.payload)
	}
	return got
}

// TestSchedulerDropAndFail: a by-reference write dropped or failed with
// frames untaken ends with that error (after the frame already in a write
// is done), and its stream is woken; a deadline detaches what is untaken
// into copied frames that are still sent, in order.
func TestSchedulerDropAndFail(t *testing.T) {
	for _, mode := range []string{"drop", "fail", "detach"} {
		t.Run(mode, func(t *testing.T) {
			sc := newScheduler(yamuxCodec{}, 1200)
			s := new(streamSend)
			s.wait() // made, and empty: the first notify fills it
			payload := make([]byte, 3000)
			for i := range payload {
				payload[i] = byte(i)
			}
			sc.pushRef(s, header{typ: typeData, streamID: 1}, payload)
			var b batch
			sc.take(&b, 1200, 1200, 1200)
			require.Len(t, b.refs, 1)
			require.Equal(t, 2, s.pendingRefs, "the frame in the write, and the rest")
			switch mode {
			case "drop":
				s.dropped = true
				sc.drop(s)
				require.ErrorIs(t, s.refErr, ErrStreamReset)
			case "fail":
				sc.failAll(ErrSessionClosed)
				require.ErrorIs(t, s.refErr, ErrSessionClosed)
				require.False(t, sc.busy())
			case "detach":
				sc.detach(s)
				require.NoError(t, s.refErr)
				require.Equal(t, 3000-1200+2*headerSize, sc.queued, "the rest, copied in frames of at most a batch")
			}
			require.Equal(t, 1, s.pendingRefs, "the frame in the write")
			b.refs[0].owner.refWritten(nil)
			require.Zero(t, s.pendingRefs)
			select {
			case <-s.flushed:
			default:
				t.Fatal("the stream was not woken")
			}
			// What is left goes in the next batches (a frame each: one
			// of a full batch needs two quanta), as copied frames.
			var rest []byte
			taken := 0
			for range 3 {
				b.data, b.ends, b.refs, b.size = b.data[:0], b.ends[:0], b.refs[:0], 0
				sc.take(&b, 1200, 1200, 1200)
				require.Empty(t, b.refs)
				taken += b.size
				start := 0
				for _, end := range b.ends {
					rest = append(rest, b.data[start+headerSize:end]...)
					start = end
				}
			}
			if mode != "detach" {
				require.Zero(t, taken, "nothing more is taken")
				return
			}
			require.Equal(t, 3000-1200+2*headerSize, taken)
			require.Zero(t, sc.queued)
			require.Equal(t, fmt.Sprint(payload[1200:]), fmt.Sprint(rest), "the copied rest, in order")
		})
	}
}

// TestSchedulerBatchEndsDontStarve: when frames don't divide the batch, a
// turn cut by the batch's end goes on first in the next batch with the
// credit it has left. Four busy streams of 16,383-byte payloads (four
// frames just miss a 64 KiB batch): before, the fourth stream was cut every
// batch, stayed last and sent nothing at all; now every stream sends the
// same bytes within one frame.
func TestSchedulerBatchEndsDontStarve(t *testing.T) {
	const (
		batchSize = 64 << 10
		streams   = 4
		payload   = 16383 // a frame of 16,395 bytes: four are 44 bytes over a batch
		batches   = 50
	)
	sc := newScheduler(yamuxCodec{}, batchSize)
	ss := make([]*streamSend, streams)
	for i := range ss {
		ss[i] = new(streamSend)
	}
	refill := func() {
		for i, s := range ss {
			for s.q == nil || s.q.pending() < 4*(payload+headerSize) {
				sc.push(s, header{typ: typeData, streamID: uint32(i + 1), length: payload}, make([]byte, payload))
			}
		}
	}
	sent := make([]int, streams)
	var b batch
	for range batches {
		refill()
		b.data, b.ends, b.refs, b.size = b.data[:0], b.ends[:0], b.refs[:0], 0
		sc.take(&b, batchSize, batchSize, batchSize)
		for i, n := range takenBytes(t, &b, streams) {
			sent[i] += n
		}
	}
	lo, hi := sent[0], sent[0]
	for _, n := range sent {
		lo, hi = min(lo, n), max(hi, n)
	}
	require.Positive(t, lo, "bytes sent per stream: %v", sent)
	require.LessOrEqual(t, hi-lo, payload+headerSize, "bytes sent per stream: %v", sent)
}

// TestSchedulerMergesSmallFrames: with merge on, a small write queued
// behind an untaken frame of its stream joins it (one header, the bytes in
// order) up to mergeLimit; a write with flags, a frame already taken, a
// FIN frame, and mplex's frames are not joined; with merge off nothing is.
func TestSchedulerMergesSmallFrames(t *testing.T) {
	data := func(flags frameFlags, n int) (header, []byte) {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(n + i)
		}
		return header{typ: typeData, flags: flags, streamID: 1, length: uint32(n)}, p
	}
	// frames decodes what take would write of s's queue: each frame's
	// header length and payload.
	frames := func(q *sendQueue) (lens []uint32, payload []byte) {
		start := q.head
		for _, end := range q.ends[q.endHead:] {
			h, err := decodeHeader(q.buf[start:])
			require.NoError(t, err)
			require.Equal(t, int(h.length), int(end)-start-headerSize, "a frame's header tells its payload")
			lens = append(lens, h.length)
			payload = append(payload, q.buf[start+headerSize:end]...)
			start = int(end)
		}
		return lens, payload
	}

	sc := newScheduler(yamuxCodec{}, DefaultMaxBatchBytes)
	sc.merge = true
	var s streamSend
	var want []byte
	for _, n := range []int{64, 64, 100} {
		h, p := data(0, n)
		sc.push(&s, h, p)
		want = append(want, p...)
	}
	lens, got := frames(s.q)
	require.Equal(t, []uint32{228}, lens, "three writes, one frame")
	require.Equal(t, want, got)
	require.Equal(t, headerSize+228, sc.queued)

	h, p := data(flagFIN, 0)
	sc.push(&s, h, p) // a FIN: a frame of its own
	h, p = data(0, 10)
	sc.push(&s, h, p) // after a FIN frame: nothing joins it
	lens, _ = frames(s.q)
	require.Equal(t, []uint32{228, 0, 10}, lens)

	// Up to mergeLimit, then a new frame.
	sc2 := newScheduler(yamuxCodec{}, DefaultMaxBatchBytes)
	sc2.merge = true
	var s2 streamSend
	for range 3 {
		h, p := data(0, sc2.mergeLimit()/2)
		sc2.push(&s2, h, p)
	}
	lens, _ = frames(s2.q)
	require.Equal(t, []uint32{uint32(sc2.mergeLimit()/2) * 2, uint32(sc2.mergeLimit() / 2)}, lens, "no frame beyond mergeLimit")

	// A taken frame is not extended.
	var b batch
	sc2.take(&b, DefaultMaxBatchBytes, DefaultMaxBatchBytes, DefaultMaxBatchBytes)
	h, p = data(0, 8)
	sc2.push(&s2, h, p)
	lens, _ = frames(s2.q)
	require.Equal(t, []uint32{8}, lens, "after take: a new frame")
	h, p = data(flagACK, 8)
	sc2.push(&s2, h, p)
	lens, _ = frames(s2.q)
	require.Equal(t, []uint32{8, 8}, lens, "a write with flags: a frame of its own")

	// mplex frames are never extended, nor any frame with merge off.
	for name, sc3 := range map[string]scheduler{
		"mplex":     newScheduler(mplexCodec{client: true}, DefaultMaxBatchBytes),
		"merge off": newScheduler(yamuxCodec{}, DefaultMaxBatchBytes),
	} {
		sc3.merge = name == "mplex"
		var s3 streamSend
		for range 2 {
			h, p := data(0, 8)
			sc3.push(&s3, h, p)
		}
		require.Len(t, s3.q.ends, 2, name)
	}
}
