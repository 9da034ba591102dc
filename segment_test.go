package braid

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSegmentTailCut: what a write keeps back is its last partial
// segment, and only when the write is more than a segment and that part
// lies within its last buffer.
func TestSegmentTailCut(t *testing.T) {
	for _, c := range []struct {
		size, total, last, want int
	}{
		{0, 70000, 65536, 0},            // not TCP: nothing kept
		{65483, 65548, 65536, 65},       // a 64 KiB frame on loopback
		{65483, 65483, 65471, 0},        // one whole segment
		{65483, 1000, 988, 0},           // less than a segment
		{65483, 2 * 65483, 65536, 0},    // whole segments
		{65483, 65483 + 65, 40, 0},      // the partial segment is longer than the payload
		{1448, 65548, 65536, 388},       // Ethernet's MSS
		{1448, 1448 + 1000, 1000, 1000}, // all of the last buffer
	} {
		st := segmentTail{size: c.size}
		require.Equal(t, c.want, st.cut(c.total, c.last), "%+v", c)
	}
}

// TestWriteBatchWholeSegments: on a writev conn with a segment size, a
// batch ending in a by-reference payload keeps its last partial segment
// and the next write begins with it, so every write but the last is whole
// segments; a batch with a marker is written whole, and so is one of
// copied frames only (with what was kept first). The bytes, in order, are
// what the frames encode.
func TestWriteBatchWholeSegments(t *testing.T) {
	c1, got := pipeSink(t)
	const size = 1000 // the segment size; net.Pipe writes each buffer on its own, so only the bytes are checked
	w := &writer{conn: c1, codec: yamuxCodec{}, writeTimeout: time.Minute, writev: true, coalesce: true}
	w.seg.size = size
	payload := make([]byte, 20000+333)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	var want []byte
	sent := 0 // of want, the bytes the writes sent
	for i := range 8 {
		h := header{typ: typeData, streamID: 1, length: uint32(len(payload))}
		hdr, hn := w.codec.encodeData(h)
		w.b = batch{refs: []refFrame{{hdr: hdr, hdrLen: uint8(hn), payload: payload}}}
		want = append(append(want, hdr[:hn]...), payload...)
		marker := i%3 == 2
		if marker {
			w.b.tail = w.codec.appendHeader(nil, header{typ: typePing, flags: flagSYN, length: markerFlag | uint32(i)})
			want = append(want, w.b.tail...)
		}
		require.NoError(t, w.writeBatch())
		if marker {
			require.Empty(t, w.seg.buf, "batch %d ends with a marker: written whole", i)
			sent = len(want)
			continue
		}
		write := len(want) - sent // this write: what was kept, and the batch
		require.Len(t, w.seg.buf, write%size, "batch %d keeps its last partial segment", i)
		require.Equal(t, want[len(want)-write%size:], w.seg.buf, "batch %d: the kept bytes", i)
		sent += write - write%size
	}
	// A batch of copied frames only: what was kept goes first, nothing is kept.
	small := w.codec.appendHeader(nil, header{typ: typeData, streamID: 3, length: 5})
	small = append(small, "hello"...)
	w.b = batch{data: small, ends: []int{len(small)}, size: len(small)}
	want = append(want, small...)
	require.NoError(t, w.writeBatch())
	require.Nil(t, w.seg.buf, "nothing kept, the buffer given back")
	c1.Close()
	b := <-got
	require.True(t, bytes.Equal(want, b), "bytes differ: %d written, %d wanted", len(b), len(want))
}

// TestWholeSegmentsEndToEnd: over loopback TCP a session reads the conn's
// MSS, and a lone stream's large Writes, kept back in part for the next
// write, all arrive whole and in order: back to back, when the writer goes
// idle after one (a request and its reply: the kept part must go without
// a next write), before a CloseWrite, and at one P and at two.
func TestWholeSegmentsEndToEnd(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			client, server, a, b := streamPair(t, nil)
			require.Positive(t, client.w.seg.size, "the conn's MSS")
			awaitRTT(t, client, server)
			sizes := []int{65536, 65483 - headerSize, 65483, 200000, 1, 3<<20 + 17, 65536}
			// Request and reply: each Write is read whole before the next,
			// so the writer is idle after every one of them.
			replies := make(chan error, 1)
			go func() {
				for _, n := range sizes {
					got := make([]byte, n)
					if _, err := io.ReadFull(b, got); err != nil {
						replies <- err
						return
					}
					if _, err := b.Write(got[:1]); err != nil {
						replies <- err
						return
					}
				}
				replies <- nil
			}()
			var one [1]byte
			for i, n := range sizes {
				msg := seeded(n, i)
				_, err := a.Write(msg)
				require.NoError(t, err)
				readDone := make(chan error, 1)
				go func() {
					_, err := io.ReadFull(a, one[:])
					readDone <- err
				}()
				require.NoError(t, errWithin(t, readDone, fmt.Sprintf("the reply to Write %d of %d bytes", i, n)))
			}
			require.NoError(t, errWithin(t, replies, "the server"))

			// Back to back, then CloseWrite: the peer reads every byte, then EOF.
			var want []byte
			for i, n := range sizes {
				want = append(want, seeded(n, i)...)
			}
			all := make(chan []byte, 1)
			go func() {
				got, _ := io.ReadAll(b)
				all <- got
			}()
			for i, n := range sizes {
				_, err := a.Write(seeded(n, i))
				require.NoError(t, err)
			}
			require.NoError(t, a.CloseWrite())
			select {
			case got := <-all:
				require.True(t, bytes.Equal(want, got), "bytes differ: %d read, %d written", len(got), len(want))
			case <-time.After(10 * time.Second):
				t.Fatal("the peer did not read to EOF")
			}
			awaitWriterIdle(t, client)
			client.w.mu.Lock()
			kept := client.w.seg.buf
			client.w.mu.Unlock()
			require.Nil(t, kept, "an idle writer keeps no segment")
		})
	}
}

// seeded is n bytes that differ with seed.
func seeded(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed*13)
	}
	return b
}

// TestInlineWriteSendsKeptSegmentFirst: a small frame written inline while
// a partial segment is kept goes after it, in the same write, and nothing
// is kept after it.
func TestInlineWriteSendsKeptSegmentFirst(t *testing.T) {
	c1, got := pipeSink(t)
	var frames atomic.Uint64
	frames.Store(1) // a frame came since the last write: a small frame may go inline
	w := &writer{conn: c1, codec: yamuxCodec{}, writeTimeout: time.Minute, writev: true, coalesce: true,
		maxBatch: DefaultMaxBatchBytes, sched: newScheduler(yamuxCodec{}, DefaultMaxBatchBytes),
		inlineState: inlineState{received: &frames}}
	w.seg.size = 1000
	tail := []byte("the end of a frame already begun")
	w.seg.written(tail)
	w.mu.Lock()
	done, err := w.inlineLocked(header{typ: typeData, streamID: 3, length: 5}, []byte("hello"))
	w.mu.Unlock()
	require.True(t, done, "written inline")
	require.NoError(t, err)
	require.Nil(t, w.seg.buf, "nothing kept after it")
	require.True(t, w.sched.takeCopied(), "a small frame written inline counts for the lone budgets' quiet, as a queued one does")
	c1.Close()
	want := append(append([]byte{}, tail...), w.codec.appendHeader(nil, header{typ: typeData, streamID: 3, length: 5})...)
	want = append(want, "hello"...)
	require.Equal(t, want, <-got)
}

// pipeSink returns one end of a net.Pipe, closed when the test ends, and
// what its peer end read, sent once c1 is closed.
func pipeSink(t *testing.T) (net.Conn, <-chan []byte) {
	t.Helper()
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c2)
		got <- b
	}()
	return c1, got
}
