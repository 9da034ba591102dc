package braid

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSendQueueGrowsInPlace: a queue the writer took part of makes room by
// moving what is left to the front, not by a larger buffer (each regrowth
// copied everything queued: a third of the copying of 100 streams of 64 B
// messages), and the frames left keep their bytes and order.
func TestSendQueueGrowsInPlace(t *testing.T) {
	c := yamuxCodec{}
	var q sendQueue
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 100) }
	frameLen := headerSize + 100
	n := queueBufStart / frameLen // frames that fit the first buffer
	for i := range n {
		q.push(c, header{typ: typeData, streamID: 1, length: 100}, payload(i))
	}
	first := cap(q.buf)
	require.GreaterOrEqual(t, first, queueBufStart)

	// The writer takes all but the last two frames, as scheduler.take does.
	taken := n - 2
	q.head, q.endHead = int(q.ends[taken-1]), taken
	for i := n; i < n+taken; i++ {
		q.push(c, header{typ: typeData, streamID: 1, length: 100}, payload(i))
	}
	require.Equal(t, first, cap(q.buf), "the queue grew though the taken part had room")
	require.Equal(t, 0, q.head)
	require.Len(t, q.ends[q.endHead:], taken+2)

	start := q.head
	for k, end := range q.ends[q.endHead:] {
		f := q.buf[start:end]
		require.Len(t, f, frameLen)
		require.Equal(t, payload(taken+k), f[headerSize:], "frame %d", k)
		start = int(end)
	}

	// More than fits: a larger buffer, with only the frames not taken.
	q.head, q.endHead = int(q.ends[len(q.ends)-1]), len(q.ends)
	q.push(c, header{typ: typeData, streamID: 1, length: 100}, payload(1))
	big := bytes.Repeat([]byte{7}, 2*first)
	q.push(c, header{typ: typeData, streamID: 1, length: uint32(len(big))}, big)
	require.Greater(t, cap(q.buf), first)
	require.Equal(t, frameLen+headerSize+len(big), q.pending())
	require.Equal(t, payload(1), q.buf[headerSize:frameLen])
	require.Equal(t, big, q.buf[frameLen+headerSize:])
	q.discard()
	require.Nil(t, q.buf)
}
