package braid

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// scriptedReader returns its chunks one Read at a time and records the
// size of every buffer it was given.
type scriptedReader struct {
	chunks [][]byte
	sizes  []int
}

func (r *scriptedReader) Read(p []byte) (int, error) {
	r.sizes = append(r.sizes, len(p))
	if len(r.chunks) == 0 {
		return 0, nil
	}
	n := copy(p, r.chunks[0])
	r.chunks = r.chunks[1:]
	return n, nil
}

// Promise: after a large read, the read buffer keeps its 32 KiB for the
// next read (a bulk flow pays no small read per frame), unless a stream
// ended meanwhile: then, once drained, the next read waits in the small
// buffer, and a read that fills it takes the large one again.
func TestReadBufferReleasedAtStreamEnd(t *testing.T) {
	for _, ended := range []bool{false, true} {
		r := &scriptedReader{chunks: [][]byte{
			make([]byte, 20*1024),       // a large read: a bulk flow
			make([]byte, smallReadSize), // fills whatever buffer it gets
			make([]byte, 10),
		}}
		b := newReadBuffer(r, nil, nil)
		_, err := b.Peek(smallReadSize + 1) // more than the small buffer: the large one
		require.NoError(t, err)
		_, err = b.Discard(b.buffered())
		require.NoError(t, err)
		if ended {
			b.flowEnded()
		}
		_, err = b.Peek(1)
		require.NoError(t, err)
		_, err = b.Discard(b.buffered())
		require.NoError(t, err)
		_, err = b.Peek(1)
		require.NoError(t, err)
		if ended {
			require.Equal(t, []int{readBufferSize, smallReadSize, readBufferSize}, r.sizes,
				"a stream's end: the next read in the small buffer, then the large one again")
		} else {
			require.Equal(t, []int{readBufferSize, readBufferSize}, r.sizes[:2], "a bulk flow keeps the large buffer")
		}
		b.release()
	}
}

// Promise: a frame's payload that fills the large read buffer, with
// nothing after it, is handed over with the buffer itself (no copy), and
// the reader goes on in a new one; a payload with the next frame behind it
// in the buffer, or one that fills little of it, is not (readPayload then
// copies it).
func TestReadBufferHandOff(t *testing.T) {
	part := make([]byte, readBufferSize-headerSize)
	for i := range part {
		part[i] = byte(i)
	}
	r := &scriptedReader{chunks: [][]byte{append(make([]byte, headerSize), part...), {1, 2, 3}}}
	b := newReadBuffer(r, nil, nil)
	_, err := b.Peek(smallReadSize + 1)
	require.NoError(t, err)
	_, err = b.Discard(headerSize)
	require.NoError(t, err)

	c := b.handOff(len(part) - 1) // the next frame's bytes are buffered too
	require.Nil(t, c.data)
	require.Nil(t, c.base)

	c = b.handOff(64 * 1024)
	data := c.data
	require.Equal(t, part, data)
	require.Len(t, c.base, readBufferSize)
	require.Equal(t, 0, b.buffered())
	next, err := b.ReadByte() // the reader goes on, in a buffer of its own
	require.NoError(t, err)
	require.Equal(t, byte(1), next)
	require.Equal(t, part, data, "the handed-over bytes were overwritten")

	small := &scriptedReader{chunks: [][]byte{make([]byte, minHandOff-1)}}
	b = newReadBuffer(small, nil, nil)
	_, err = b.Peek(smallReadSize + 1)
	require.NoError(t, err)
	require.Nil(t, b.handOff(64*1024).data, "a buffer filled less than minHandOff is copied from, not handed over")
}
