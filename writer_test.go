package braid

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/braidmux/braid/slowconn"
	"github.com/stretchr/testify/require"
)

// Unit tests of the writer (coalesce.go, sendqueue.go, inflight.go) beside
// the end-to-end ones.

// TestLargeWriteFramesAndOrder: one Write of many windows' worth is handed
// to the writer whole and split into frames of at most one batch, every
// byte in order, on yamux and mplex.
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
			require.GreaterOrEqual(t, frames, uint64(len(msg)/cfg.MaxBatchBytes), "frames of at most one batch")
		})
	}
}

// TestResetDropsQueuedData: the part of a Write the writer has not taken
// when the stream is reset is not sent after the RST, and the Write returns
// a reset error, not success. The link is slow, so most of the write is
// still queued when the reset comes; Close flushes whatever is queued, so
// the bytes sent after it tell whether the rest was dropped.
func TestResetDropsQueuedData(t *testing.T) {
	c1, c2 := slowconn.Pipe(slowconn.Link{Bandwidth: 8e6, Latency: time.Millisecond})
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
	// At 1 MB/s the first byte arrives after the writer took at most two
	// batches (one in the link's 64 KiB buffer, one blocked behind it);
	// the last of the four stays queued and must be dropped.
	const batch = DefaultMaxBatchBytes
	require.Less(t, sent, uint64(3*batch), "bytes sent after the reset")
}

// TestInflightBudget is a table test of the in-flight bound's accounting.
func TestInflightBudget(t *testing.T) {
	var f inflight
	require.Equal(t, -1, f.room(), "no round trip yet: no bound")
	f.setBudget(10 * time.Microsecond)
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
	require.True(t, f.answered(ids[1]))
	require.Equal(t, minInflight, int(f.sent-f.acked))
	require.Equal(t, 0, f.room(), "a full budget")
	require.Equal(t, copySlack, f.roomFor(copySlack), "copied frames get the slack at a full budget")
	require.False(t, f.answered(ids[0]))
	require.False(t, f.answered(markerFlag|12345))
	require.True(t, f.answered(ids[2]))
	require.Len(t, f.markers, 0)
	require.Equal(t, minInflight, f.room())
	// Long round trips scale the budget; off means no bound.
	f.setBudget(10 * time.Millisecond)
	require.Equal(t, int(0.01*inflightRate), f.budget)
	f.off = true
	require.Equal(t, -1, f.room())
	require.False(t, f.took(1<<20))
}
