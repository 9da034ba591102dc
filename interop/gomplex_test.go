package interop_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p-testing/race"
	mplex "github.com/libp2p/go-mplex"
)

// mplex interop: braid against go-mplex v0.7.0 (the reference Go
// implementation) over loopback TCP in both roles.

// mplexConfig is DefaultConfig speaking mplex.
func mplexConfig() *braid.Config {
	cfg := braid.DefaultConfig()
	cfg.Protocol = braid.Mplex
	return cfg
}

// mplexStream is what braid's and go-mplex's streams both offer.
type mplexStream interface {
	io.ReadWriteCloser
	CloseWrite() error
	Reset() error
	SetDeadline(time.Time) error
}

// mplexEnd is one end of a connection, whichever implementation.
type mplexEnd struct {
	name   string
	open   func(context.Context) (mplexStream, error)
	accept func() (mplexStream, error)
}

func braidMplexEnd(s *braid.Session) mplexEnd {
	return mplexEnd{
		name:   "braid",
		open:   func(ctx context.Context) (mplexStream, error) { return s.OpenStream(ctx) },
		accept: func() (mplexStream, error) { return s.AcceptStream() },
	}
}

func goMplexEnd(m *mplex.Multiplex) mplexEnd {
	return mplexEnd{
		name:   "go-mplex",
		open:   func(ctx context.Context) (mplexStream, error) { return m.NewStream(ctx) },
		accept: func() (mplexStream, error) { return m.Accept() },
	}
}

// goMplexPairOver is goMplexPair over a given conn pair.
func goMplexPairOver(t testing.TB, c1, c2 net.Conn, braidClient bool, cfg *braid.Config) (*braid.Session, *mplex.Multiplex) {
	t.Helper()
	if cfg == nil {
		cfg = mplexConfig()
	}
	var (
		bs  *braid.Session
		gm  *mplex.Multiplex
		err error
	)
	if braidClient {
		if bs, err = braid.Client(c1, cfg); err == nil {
			gm, err = mplex.NewMultiplex(c2, false, nil)
		}
	} else {
		if gm, err = mplex.NewMultiplex(c1, true, nil); err == nil {
			bs, err = braid.Server(c2, cfg)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bs.Close()
		_ = gm.Close()
	})
	return bs, gm
}

// forBothMplexRoles runs f with braid as the client, then as the server,
// over conns made by pair (tcpPair when nil).
func forBothMplexRoles(t *testing.T, cfg *braid.Config, pair func(testing.TB) (net.Conn, net.Conn), f func(t *testing.T, bs *braid.Session, gm *mplex.Multiplex)) {
	if pair == nil {
		pair = tcpPair
	}
	for _, braidClient := range []bool{true, false} {
		name := map[bool]string{true: "braid-client", false: "braid-server"}[braidClient]
		t.Run(name, func(t *testing.T) {
			c1, c2 := pair(t)
			bs, gm := goMplexPairOver(t, c1, c2, braidClient, cfg)
			f(t, bs, gm)
		})
	}
}

// mplexEchoServer echoes every stream e accepts until the peer closes it,
// then closes its side.
func mplexEchoServer(e mplexEnd) {
	for {
		st, err := e.accept()
		if err != nil {
			return
		}
		go func() {
			if _, err := io.Copy(st, st); err != nil {
				_ = st.Reset()
				return
			}
			_ = st.CloseWrite()
		}()
	}
}

// mplexEchoCheck sends size random bytes on a new stream of e, in writes of
// varied sizes, and compares the SHA-256 of the echo.
func mplexEchoCheck(ctx context.Context, e mplexEnd, size int) error {
	st, err := e.open(ctx)
	if err != nil {
		return fmt.Errorf("%s open: %w", e.name, err)
	}
	defer st.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(d)
	}
	data := make([]byte, size)
	_, _ = rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		b := data
		for i := 1; len(b) > 0; i++ {
			n := min(len(b), i*i*5000) // 5 KB ... 3 MB
			if _, err := st.Write(b[:n]); err != nil {
				errc <- fmt.Errorf("write: %w", err)
				return
			}
			b = b[n:]
		}
		errc <- st.CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, st)
	if err != nil {
		_ = st.Reset()
		<-errc
		return fmt.Errorf("%s read after %d of %d bytes: %w", e.name, n, size, err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	want := sha256.Sum256(data)
	if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("%s: echo of %d bytes differs (%d bytes back)", e.name, size, n)
	}
	return nil
}

// mplexEchoSizes are the echo sizes of each side: small, around a 64 KiB
// frame, around mplex's 1 MiB message limit, and one of 3 MiB.
func mplexEchoSizes(streams int) []int {
	sizes := make([]int, streams)
	pattern := []int{1, 1000, 64<<10 + 7, 300 << 10, 1<<20 + 1}
	for i := range sizes {
		sizes[i] = pattern[i%len(pattern)]
	}
	sizes[0] = 3 << 20
	return sizes
}

// waitMplex polls cond for up to 5 s.
func waitMplex(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestMplexInteropEcho: 20 streams opened by each side at once (so stream
// ids 0..19 exist twice, once per opener), each echoed by the other side
// with SHA-256 checked, up to 3 MiB per stream. With MaxBatchBytes above
// 1 MiB braid sends messages of exactly MplexMaxMessage, go-mplex's limit.
// Afterwards braid holds no stream: every one ended cleanly both ways.
func TestMplexInteropEcho(t *testing.T) {
	const streams = 20
	bigBatch := mplexConfig()
	bigBatch.MaxBatchBytes = 4 << 20
	for _, cfg := range []*braid.Config{mplexConfig(), bigBatch} {
		t.Run(fmt.Sprintf("batch%dKiB", cfg.MaxBatchBytes>>10), func(t *testing.T) {
			forBothMplexRoles(t, cfg, nil, func(t *testing.T, bs *braid.Session, gm *mplex.Multiplex) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				be, ge := braidMplexEnd(bs), goMplexEnd(gm)
				go mplexEchoServer(be)
				go mplexEchoServer(ge)
				var wg sync.WaitGroup
				for _, e := range []mplexEnd{be, ge} {
					for _, size := range mplexEchoSizes(streams) {
						wg.Go(func() {
							if err := mplexEchoCheck(ctx, e, size); err != nil {
								t.Error(err)
							}
						})
					}
				}
				wg.Wait()
				waitMplex(t, "braid's streams to end", func() bool { return bs.NumStreams() == 0 })
				st := bs.Stats()
				if cfg.MaxBatchBytes > braid.MplexMaxMessage && st.BytesSent < 2*(3<<20) {
					t.Errorf("braid sent %d bytes", st.BytesSent)
				}
			})
		})
	}
}

// mplexReadErr reads until an error and returns it.
func mplexReadErr(r io.Reader) error {
	buf := make([]byte, 4096)
	for {
		if _, err := r.Read(buf); err != nil {
			return err
		}
	}
}

// floodedStream is a stream a slowReaderServer never read, and the error
// its read returned.
type floodedStream struct {
	st  *braid.Stream
	err error
}

// slowReaderServer accepts streams on s: a stream whose first byte is 'E'
// is echoed; one whose first byte is 'F' is never read again until the
// flood is over. Those, and streams reset before their first byte was
// read (the reset drops what was buffered), go to flooded.
func slowReaderServer(s *braid.Session, flooded chan<- floodedStream, floodOver <-chan struct{}) {
	for {
		st, err := s.AcceptStream()
		if err != nil {
			return
		}
		go func() {
			var tag [1]byte
			if _, err := io.ReadFull(st, tag[:]); err != nil {
				flooded <- floodedStream{st, err}
				return
			}
			switch tag[0] {
			case 'E':
				_, _ = io.Copy(st, st)
				_ = st.CloseWrite()
			case 'F':
				<-floodOver
				_ = st.SetReadDeadline(time.Now().Add(5 * time.Second))
				flooded <- floodedStream{st, mplexReadErr(st)}
			}
		}()
	}
}

// measureEcho runs 64-byte echoes on st until stop is closed and returns
// the slowest round trip and how many it made.
func measureEcho(st mplexStream, stop <-chan struct{}) (time.Duration, int, error) {
	msg := make([]byte, 64)
	got := make([]byte, 64)
	var worst time.Duration
	n := 0
	for {
		select {
		case <-stop:
			return worst, n, nil
		default:
		}
		_, _ = rand.Read(msg)
		start := time.Now()
		if _, err := st.Write(msg); err != nil {
			return worst, n, err
		}
		if _, err := io.ReadFull(st, got); err != nil {
			return worst, n, err
		}
		worst = max(worst, time.Since(start))
		n++
		if !bytes.Equal(msg, got) {
			return worst, n, errors.New("echo differs")
		}
	}
}

// floodUntilReset writes to st until a write fails and returns the bytes
// written and the error of the next write. (go-mplex fails a write that
// was blocked when the reset arrived with mplex.ErrStreamClosed; only
// later writes return mplex.ErrStreamReset.) Every 64 KiB it pauses for
// pause: the flood stays far faster than the reader (who never reads),
// but leaves the CPUs to the rest of the test, so that the echo latency
// measures the multiplexer rather than the Go scheduler of a small,
// busy machine where the flooder, both sessions and the echo share two
// CPUs.
func floodUntilReset(st mplexStream, chunk int, pause time.Duration) (int, error) {
	buf := make([]byte, chunk)
	total := 0
	for {
		n, err := st.Write(buf)
		if total/(64<<10) != (total+n)/(64<<10) {
			time.Sleep(pause)
		}
		total += n
		if err != nil {
			_, err = st.Write(buf[:1])
			return total, err
		}
	}
}

// slowReaderCheck floods stream after stream of e towards a braid server
// that never reads them, for a while, while it measures a 64-byte echo on
// another stream. The echo must stay fast (braid's read loop waits for a
// flooded stream's reader at most Config.MaxReceiveStall, once), and each
// flooded stream must end reset: isReset checks the flooder's write error.
func slowReaderCheck(t *testing.T, e mplexEnd, server *braid.Session, isReset func(error) bool) {
	// The bound is the push-back's, plus 50 ms (150 ms under -race: the
	// race detector makes the read loop several times slower, and the
	// echo then waits behind the flood bytes already in the sockets). A
	// read loop that waited for the flooded stream's reader without bound
	// would wait forever here.
	maxLatency := slowReaderConfig().MaxReceiveStall + 50*time.Millisecond
	if race.WithRace() {
		maxLatency = slowReaderConfig().MaxReceiveStall + 150*time.Millisecond
	}
	const (
		floodFor   = 300 * time.Millisecond
		floodPause = 500 * time.Microsecond // at most 128 MB/s
	)
	flooded := make(chan floodedStream, 1000)
	floodOver := make(chan struct{})
	go slowReaderServer(server, flooded, floodOver)

	echo, err := e.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	_ = echo.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := echo.Write([]byte("E")); err != nil {
		t.Fatal(err)
	}
	// Warm up: the echo works before the flood.
	if _, _, err := measureEcho(echo, closedChan()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	type result struct {
		worst time.Duration
		n     int
		err   error
	}
	echoRes := make(chan result, 1)
	go func() {
		w, n, err := measureEcho(echo, stop)
		echoRes <- result{w, n, err}
	}()

	floods, floodBytes := 0, 0
	for start := time.Now(); time.Since(start) < floodFor || floods < 2; floods++ {
		st, err := e.open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = st.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := st.Write([]byte("F")); err != nil {
			t.Fatal(err)
		}
		n, err := floodUntilReset(st, 4096, floodPause)
		if !isReset(err) {
			t.Fatalf("flood %d: write after %d bytes: %v, want a reset", floods, n, err)
		}
		if n < slowReaderConfig().MaxReceiveBuffer {
			t.Fatalf("flood %d: reset after %d bytes, before the %d-byte receive buffer filled", floods, n, slowReaderConfig().MaxReceiveBuffer)
		}
		_ = st.Close()
		floodBytes += n
	}
	close(stop)
	close(floodOver)
	r := <-echoRes
	t.Logf("%d floods of %d KiB in all; %d echoes during them, slowest %v", floods, floodBytes>>10, r.n, r.worst)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.n < 10 {
		t.Fatalf("only %d echoes during the flood", r.n)
	}
	if r.worst > maxLatency {
		t.Fatalf("an echo took %v during the flood, want under %v", r.worst, maxLatency)
	}
	// Every flooded stream ended with ErrReceiveBufferOverflow at braid.
	for i := range floods {
		select {
		case f := <-flooded:
			if err := f.err; !errors.Is(err, braid.ErrReceiveBufferOverflow) || !errors.Is(err, braid.ErrStreamReset) {
				t.Fatalf("flooded stream %d: read %v, want ErrReceiveBufferOverflow", i, err)
			}
			if _, err := f.st.Write([]byte("z")); !errors.Is(err, braid.ErrReceiveBufferOverflow) {
				t.Fatalf("flooded stream %d: write %v, want ErrReceiveBufferOverflow", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("flooded stream %d not accepted", i)
		}
	}
	if server.IsClosed() {
		t.Fatal("session closed")
	}
}

func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// slowReaderConfig is mplexConfig with a 256 KiB receive buffer and a
// 50 ms push-back bound.
func slowReaderConfig() *braid.Config {
	cfg := mplexConfig()
	cfg.MaxReceiveBuffer = 256 << 10
	cfg.MaxReceiveStall = 50 * time.Millisecond
	return cfg
}

// TestMplexSlowReaderGoMplex: the same with go-mplex as the flooding peer,
// in both roles. go-mplex's Write fails with mplex.ErrStreamReset once
// braid resets the flooded stream.
func TestMplexSlowReaderGoMplex(t *testing.T) {
	forBothMplexRoles(t, slowReaderConfig(), tcpPair, func(t *testing.T, bs *braid.Session, gm *mplex.Multiplex) {
		slowReaderCheck(t, goMplexEnd(gm), bs, func(err error) bool {
			return errors.Is(err, mplex.ErrStreamReset)
		})
	})
}
