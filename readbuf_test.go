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
		b := newReadBuffer(r)
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
