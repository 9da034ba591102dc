package braid

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Tests of mid-size Writes of a stream that sends alone (alone.go).

// TestSoleStream: the session's first stream is alone from its first
// frame; a stream that follows another's frame is alone only once
// soleQuiet has passed since it first asked, and the clock is read only
// while that quiet runs.
func TestSoleStream(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clock := t0
	reads := 0
	now := func() time.Time { reads++; return clock }
	var s soleStream

	require.False(t, s.alone(1, now), "no frame yet")
	s.noteData(1)
	require.True(t, s.alone(1, now), "the first stream, from its first frame")
	require.False(t, s.alone(2, now), "another stream")
	s.noteData(1)
	require.True(t, s.alone(1, now), "its own frames change nothing")
	require.Zero(t, reads, "clock reads while the first stream is alone")

	s.noteData(2)
	require.False(t, s.alone(1, now), "the stream before")
	require.False(t, s.alone(2, now), "the quiet starts when it first asks")
	clock = t0.Add(soleQuiet - time.Nanosecond)
	require.False(t, s.alone(2, now), "within the quiet")
	clock = t0.Add(soleQuiet)
	require.True(t, s.alone(2, now), "the quiet passed")
	reads0 := reads
	require.True(t, s.alone(2, now))
	require.Equal(t, reads0, reads, "no clock read once the quiet passed")

	s.noteData(1)
	s.noteData(2) // another stream's frame between: the quiet starts again
	require.False(t, s.alone(2, now))
	clock = clock.Add(soleQuiet)
	require.True(t, s.alone(2, now))
}

// TestMidWritesCopiedWhileAlone: Writes of 16 up to 32 KiB on a stream
// that is the only one sending are copied (they return while the conn
// write is held, their bytes queued); beside another stream's frame such
// a Write goes by reference and waits for its write. Every byte arrives
// in order.
func TestMidWritesCopiedWhileAlone(t *testing.T) {
	const size = 24 << 10
	require.GreaterOrEqual(t, size, refThreshold)
	require.Less(t, size, loneCopyMax)
	message := func(i int) []byte {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(i*7 + j)
		}
		return p
	}
	readMessages := func(t *testing.T, b *Stream, n int) {
		t.Helper()
		require.NoError(t, b.SetReadDeadline(time.Now().Add(5*time.Second)))
		got := make([]byte, size)
		for i := range n {
			_, err := io.ReadFull(b, got)
			require.NoError(t, err)
			require.Equal(t, message(i), got, "Write %d", i)
		}
	}

	t.Run("alone", func(t *testing.T) {
		const writes = 3
		gc, as, bs := gatedStreams(t, 1)
		a, b := as[0], bs[0]
		gc.arm()
		errc := make(chan error, 1)
		go func() {
			for i := range writes {
				if _, err := a.Write(message(i)); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		require.NoError(t, errWithin(t, errc, "a lone stream's mid-size Writes (by reference, not copied?)"))
		gc.release()
		readMessages(t, b, writes)
	})

	t.Run("beside another stream", func(t *testing.T) {
		gc, as, bs := gatedStreams(t, 2)
		a, b, other := as[0], bs[0], as[1]
		gc.arm()
		_, err := other.Write([]byte("x")) // queued: nothing was received since the last write
		require.NoError(t, err)
		<-gc.entered // the writer holds the conn with other's frame
		errc := make(chan error, 1)
		go func() { _, err := a.Write(message(0)); errc <- err }()
		select {
		case err := <-errc:
			t.Fatalf("a mid-size Write beside another stream returned while the conn was held (copied?): %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		gc.release()
		require.NoError(t, errWithin(t, errc, "the mid-size Write"))
		readMessages(t, b, 1)
		x := make([]byte, 1)
		require.NoError(t, bs[1].SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err = io.ReadFull(bs[1], x)
		require.NoError(t, err)
		require.Equal(t, "x", string(x))
	})
}

// gatedStreams opens n streams over a gatedSessionPair and accepts them,
// a byte sent each way on each and then one more from the first client
// stream, so that the client's session has received nothing since its
// last write (no Write that follows goes inline) and its writer is idle.
// It returns the client's streams and the server's, in order.
func gatedStreams(t *testing.T, n int) (gc *gatedConn, as, bs []*Stream) {
	t.Helper()
	gc, client, server := gatedSessionPair(t)
	one := make([]byte, 1)
	for range n {
		a, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		_, err = a.Write(one)
		require.NoError(t, err)
		b, err := server.AcceptStream()
		require.NoError(t, err)
		_, err = io.ReadFull(b, one)
		require.NoError(t, err)
		_, err = b.Write(one)
		require.NoError(t, err)
		_, err = io.ReadFull(a, one)
		require.NoError(t, err)
		as, bs = append(as, a), append(bs, b)
	}
	_, err := as[0].Write(one)
	require.NoError(t, err)
	_, err = io.ReadFull(bs[0], one)
	require.NoError(t, err)
	awaitWriterIdle(t, client)
	return gc, as, bs
}
