package braid

import (
	"math/bits"

	pool "github.com/libp2p/go-buffer-pool"
)

// recvBuffer holds a stream's received, unread bytes as the payloads of the
// frames that carried them, in order. Each payload is in a buffer from the
// shared pool, returned as soon as it is read, so an idle stream holds no
// payload memory. It is not safe for concurrent use: the stream's mu
// guards it.
type recvBuffer struct {
	chunks []recvChunk // chunks[head].data[off:] is the next unread byte
	head   int
	off    int
	size   int // unread bytes in all chunks
}

// recvChunk is unread payload (data) and the pooled buffer that holds it
// (base), which goes back to the pool once data is read. data is base's
// start, or for a read buffer handed over (readBuffer.handOff) the part of
// it that held the payload. The zero chunk is empty and holds nothing.
type recvChunk struct {
	data []byte
	base []byte
}

// release gives the chunk's buffer back to the pool, if it holds one.
func (c recvChunk) release() {
	if c.base != nil {
		pool.Put(c.base)
	}
}

// Small payloads are copied into a shared chunk rather than given a pooled
// buffer each: a pool Get on the read loop's P and a Put on the reader's
// cost more than the copy of a few hundred bytes (with 100 streams of 64 B
// messages, a third of the CPU), and a reader that lags takes many
// messages from one chunk.
const (
	// maxSmallPayload is the largest payload appended to a shared chunk.
	maxSmallPayload = 1024
	// smallChunkSize is the size of a shared chunk: one pool size class,
	// a few small messages. It goes back to the pool once read, like
	// any chunk, so an idle stream holds none.
	smallChunkSize = 4096
	// maxKeptChunks is the largest chunk array a drained buffer keeps
	// for the next messages (recvBuffer.read); a larger one, left by a
	// backlog of many small frames, is dropped, so that an idle stream
	// holds no index of payloads it no longer has (48 B a frame: ~786 KB
	// for a 16 MiB window of 1 KiB frames). 256 is a full default window
	// of 64 KiB frames (DefaultMaxStreamWindow / DefaultMaxBatchBytes),
	// 12 KB kept at most: a bulk stream's backlog stays under it, so its
	// array is not dropped and regrown on every drain (with 16, each
	// regrowth's allocations came to 0.6-0.9 per 64 KiB write+read in
	// braidbench's one-stream bulk over TCP).
	maxKeptChunks = DefaultMaxStreamWindow / DefaultMaxBatchBytes
)

// push appends c, whose base must come from pool.Get; the buffer owns it
// now. An empty chunk is not appended.
func (b *recvBuffer) push(c recvChunk) {
	if len(c.data) == 0 {
		c.release()
		return
	}
	b.chunks = append(b.chunks, c)
	b.size += len(c.data)
}

// pushSmall appends a copy of p (at most maxSmallPayload bytes) to the last
// unread chunk if its capacity has room (a pooled buffer's capacity is its
// size class, so a pushed payload's chunk may have some), else to a new
// pooled chunk of smallChunkSize.
func (b *recvBuffer) pushSmall(p []byte) {
	if n := len(b.chunks); n > b.head {
		if last := &b.chunks[n-1]; cap(last.data)-len(last.data) >= len(p) {
			last.data = append(last.data, p...)
			b.size += len(p)
			return
		}
	}
	c := pool.Get(smallChunkSize)
	b.chunks = append(b.chunks, recvChunk{data: append(c[:0], p...), base: c})
	b.size += len(p)
}

// read copies unread bytes into dst and returns how many.
func (b *recvBuffer) read(dst []byte) int {
	n := 0
	for n < len(dst) && b.head < len(b.chunks) {
		c := &b.chunks[b.head]
		m := copy(dst[n:], c.data[b.off:])
		n += m
		b.off += m
		if b.off == len(c.data) {
			c.release()
			*c = recvChunk{}
			b.head++
			b.off = 0
		}
	}
	b.size -= n
	if b.head == len(b.chunks) {
		// Reuse a small slice: no allocation per message. A large one,
		// grown by a backlog of frames (48 bytes a frame, up to a
		// window's worth), is dropped: kept, it stayed with the drained
		// stream for the stream's life.
		if cap(b.chunks) > maxKeptChunks {
			b.chunks, b.head = nil, 0
		} else {
			b.chunks, b.head = b.chunks[:0], 0
		}
	}
	return n
}

// reset drops every unread byte, returns the buffers to the pool and
// reports how many bytes there were.
func (b *recvBuffer) reset() int {
	n := b.size
	for i := b.head; i < len(b.chunks); i++ {
		b.chunks[i].release()
	}
	b.chunks, b.head, b.off, b.size = nil, 0, 0, 0
	return n
}

// frameChunks is one data frame's payload, in order: the read buffer
// handed over (readBuffer.handOff) and the rest in one or two pooled
// buffers (restSplit). Any of them may be empty.
type frameChunks [3]recvChunk

// size is the payload's length.
func (f *frameChunks) size() int {
	return len(f[0].data) + len(f[1].data) + len(f[2].data)
}

// release gives every chunk's buffer back to the pool.
func (f *frameChunks) release() {
	for _, c := range f {
		c.release()
	}
}

// maxRestWaste bounds the room a pooled buffer leaves unused past a
// frame's payload where restSplit can help: 1/maxRestWaste of the bytes it
// holds. The pool's size classes are powers of two, so the 32 KiB and 12
// bytes of a 64 KiB frame that follow a handed-over read buffer (whose
// first 12 bytes held the header) took a 64 KiB buffer: 96 KiB held for
// 64 KiB, and a reader that lagged a window behind held half as much
// again as the window the memory manager was told of
// (TestBufferedWindowHoldsItsSize).
const maxRestWaste = 4

// restSplit returns the sizes of the one or two pooled buffers n payload
// bytes are read into: one of n where its size class leaves at most
// n/maxRestWaste unused, else the largest class under n and the rest. Both
// are read straight from the conn (readBuffer.readPayload), so the split
// costs a pool Get and Put, not a copy.
func restSplit(n int) (first, second int) {
	class := 1 << bits.Len(uint(n-1))
	if class-n <= n/maxRestWaste {
		return n, 0
	}
	return class / 2, n - class/2
}
