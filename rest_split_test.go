package braid

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestBufferedWindowHoldsItsSize: a stream whose reader lags holds its
// unread bytes in pooled buffers not much larger than the bytes. A 64 KiB
// frame whose first 32 KiB came in the read buffer (handed over) used to
// take a 64 KiB buffer for the 32 KiB and 12 bytes after them (the pool's
// size classes are powers of two): 96 KiB held for 64 KiB, 320-352 KiB
// for a 256 KiB window, more than the window the memory manager was told
// of; now 256-264 KiB. What reads bring, and so which frames are handed
// over, follows the timing, so the check is on each buffer that holds
// more than a read buffer's worth (only the rest of a frame can): its
// size class leaves at most a maxRestWaste-th of its bytes unused.
func TestBufferedWindowHoldsItsSize(t *testing.T) {
	c1, c2 := tcpPair(t)
	client, server := sessionPairOver(t, c1, c2, nil)
	cs, err := client.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64*1024)
	for range InitialStreamWindow / len(buf) {
		if _, err := cs.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := server.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ss.mu.Lock()
		size := ss.recv.size
		chunks := slices.Clone(ss.recv.chunks[ss.recv.head:])
		ss.mu.Unlock()
		if size == InitialStreamWindow {
			held := 0
			for _, c := range chunks {
				held += cap(c.base)
				if n := len(c.data); n >= readBufferSize && cap(c.base) > n+n/maxRestWaste {
					t.Errorf("%d bytes of a payload held in a buffer of %d", n, cap(c.base))
				}
			}
			t.Logf("%d unread bytes held in %d bytes of buffers", size, held)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d bytes buffered after 5 s", size, InitialStreamWindow)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRestSplit: the sizes the rest of a frame is read into.
func TestRestSplit(t *testing.T) {
	for _, tc := range []struct{ n, first, second int }{
		{1, 1, 0},
		{1000, 1000, 0},
		{32 * 1024, 32 * 1024, 0},
		{32*1024 + 12, 32 * 1024, 12},
		{44 * 1024, 32 * 1024, 12 * 1024},
		{48 * 1024, 32 * 1024, 16 * 1024},
		{60 * 1024, 60 * 1024, 0}, // a 64 KiB class leaves 4 KiB unused: kept whole
		{64 * 1024, 64 * 1024, 0},
		{64*1024 + 100, 64 * 1024, 100},
	} {
		first, second := restSplit(tc.n)
		if first != tc.first || second != tc.second {
			t.Errorf("restSplit(%d) = %d, %d; want %d, %d", tc.n, first, second, tc.first, tc.second)
		}
	}
}
