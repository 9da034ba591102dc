package braid

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWriteRateLoneFrame: a lone stream's frame carries what the conn takes
// in loneFrameWait, within one and maxLoneBatches batches and the codec's
// bound; one batch until a write was timed.
func TestWriteRateLoneFrame(t *testing.T) {
	const batch = 64 * 1024
	cases := []struct {
		name      string
		nsPerByte float64
		limit     int
		want      int
	}{
		{"not timed yet", 0, 0, batch},
		{"5 GB/s: the most batches", 0.2, 0, maxLoneBatches * batch},
		{"1 GB/s: 100 KB", 1, 0, 100_000},
		{"100 MB/s: one batch", 10, 0, batch},
		{"the codec's bound", 0.2, 128 * 1024, 128 * 1024},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := writeRate{nsPerByte: tc.nsPerByte}
			require.Equal(t, tc.want, r.loneFrame(batch, tc.limit))
		})
	}
}

// TestWriteRateAverage: the first sample sets the rate; later ones move it
// by rateWeight, in time per byte.
func TestWriteRateAverage(t *testing.T) {
	var r writeRate
	r.sample(100_000, 100*time.Microsecond) // 1 ns/B
	require.InDelta(t, 1.0, r.nsPerByte, 1e-9)
	r.sample(100_000, 500*time.Microsecond) // 5 ns/B: a slow write counts
	require.InDelta(t, 1+rateWeight*4, r.nsPerByte, 1e-9)
}
