package braid

import pool "github.com/libp2p/go-buffer-pool"

// recvBuffer holds a stream's received, unread bytes as the payloads of the
// frames that carried them, in order. Each payload is a buffer from the
// shared pool, returned as soon as it is read, so an idle stream holds no
// payload memory. It is not safe for concurrent use: the stream's mu
// guards it.
type recvBuffer struct {
	chunks [][]byte // chunks[head][off:] is the next unread byte
	head   int
	off    int
	size   int // unread bytes in all chunks
}

// push appends p, which must come from pool.Get; the buffer owns it now.
func (b *recvBuffer) push(p []byte) {
	b.chunks = append(b.chunks, p)
	b.size += len(p)
}

// read copies unread bytes into dst and returns how many.
func (b *recvBuffer) read(dst []byte) int {
	n := 0
	for n < len(dst) && b.head < len(b.chunks) {
		c := b.chunks[b.head]
		m := copy(dst[n:], c[b.off:])
		n += m
		b.off += m
		if b.off == len(c) {
			pool.Put(c)
			b.chunks[b.head] = nil
			b.head++
			b.off = 0
		}
	}
	b.size -= n
	if b.head == len(b.chunks) {
		b.chunks, b.head = b.chunks[:0], 0 // reuse the slice: no allocation per message
	}
	return n
}

// reset drops every unread byte, returns the buffers to the pool and
// reports how many bytes there were.
func (b *recvBuffer) reset() int {
	n := b.size
	for i := b.head; i < len(b.chunks); i++ {
		pool.Put(b.chunks[i])
	}
	b.chunks, b.head, b.off, b.size = nil, 0, 0, 0
	return n
}
