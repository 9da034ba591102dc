package interop_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
	mplex "github.com/libp2p/go-mplex"
)

// braid's mplex against go-mplex v0.7.0's timing: data
// that go-mplex sends after its own Close, and a burst towards a braid
// reader that waited in Read. The root package's
// mplex_late_data_burst_test.go has the same with raw frames.

// TestMplexGoMplexWriteRacingCloseWrite promises that a go-mplex stream
// whose Write races its CloseWrite never ends braid's session. go-mplex
// v0.7.0 picks at random between its writer channel and the stream's
// cancel channel, so such a Write can leave after the Close; go-mplex's
// own reader drops data after a Close, and braid must too. Before, braid
// closed the whole session with "data after FIN" within a few rounds.
func TestMplexGoMplexWriteRacingCloseWrite(t *testing.T) {
	const (
		rounds     = 300
		writeSize  = 100
		closeAfter = 100 * time.Microsecond // the writer is mid-Write by then
		settle     = 50 * time.Millisecond  // late frames reach braid
	)
	forBothMplexRoles(t, nil, nil, func(t *testing.T, bs *braid.Session, gm *mplex.Multiplex) {
		go func() {
			for {
				st, err := bs.AcceptStream()
				if err != nil {
					return
				}
				go func() { _, _ = io.Copy(io.Discard, st); _ = st.Close() }()
			}
		}()
		for i := range rounds {
			st, err := gm.NewStream(context.Background())
			if err != nil {
				t.Fatalf("round %d: %v (braid: %v)", i, err, bs.Err())
			}
			var wg sync.WaitGroup
			buf := make([]byte, writeSize)
			wg.Go(func() {
				for {
					if _, err := st.Write(buf); err != nil {
						return
					}
				}
			})
			time.Sleep(closeAfter)
			_ = st.CloseWrite()
			wg.Wait()
			_ = st.Reset()
			if bs.IsClosed() {
				t.Fatalf("round %d: braid session closed: %v", i, bs.Err())
			}
		}
		time.Sleep(settle)
		if bs.IsClosed() {
			t.Fatalf("braid session closed: %v", bs.Err())
		}
	})
}

// TestMplexGoMplexIdleReaderBurst promises that a braid reader waiting in
// Read (with a small buffer, so nothing is lent) for longer than
// MaxReceiveStall is not reset when go-mplex then writes many times
// MaxReceiveBuffer at once: it is reading, and the push-back waits for
// it. Before, the stall counted from its last Read before the idle time,
// and the stream was reset whenever the read loop filled the buffer
// before the woken reader ran (about half the trials).
func TestMplexGoMplexIdleReaderBurst(t *testing.T) {
	const (
		bufBound = 64 << 10
		stall    = 50 * time.Millisecond
		idle     = 2 * stall
		total    = 8 * bufBound
		readSize = 1024
		trials   = 10
	)
	cfg := mplexConfig()
	cfg.MaxReceiveBuffer = bufBound
	cfg.MaxReceiveStall = stall
	forBothMplexRoles(t, cfg, nil, func(t *testing.T, bs *braid.Session, gm *mplex.Multiplex) {
		resets := 0
		for range trials {
			gst, err := gm.NewStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gst.Write([]byte{1}); err != nil { // braid accepts it
				t.Fatal(err)
			}
			st, err := bs.AcceptStream()
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				buf := make([]byte, readSize)
				got := 0
				for got < total+1 {
					n, err := st.Read(buf)
					got += n
					if err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			time.Sleep(idle) // the reader waits in Read all along
			go func() { _, _ = gst.Write(make([]byte, total)) }()
			if err := <-done; err != nil {
				resets++
				t.Logf("reader: %v", err)
			}
			_ = gst.Reset()
		}
		if resets > 0 {
			t.Fatalf("%d of %d readers waiting in Read were reset", resets, trials)
		}
	})
}
