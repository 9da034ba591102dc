package braid

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p-testing/race"
	varint "github.com/multiformats/go-varint"
)

// mplex tests: braid against braid, and braid against a raw peer writing
// hostile bytes. The tests against go-mplex are in the interop module.

// mplexConfig is DefaultConfig speaking mplex.
func mplexConfig() *Config {
	cfg := DefaultConfig()
	cfg.Protocol = Mplex
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

func braidMplexEnd(s *Session) mplexEnd {
	return mplexEnd{
		name:   "braid",
		open:   func(ctx context.Context) (mplexStream, error) { return s.OpenStream(ctx) },
		accept: func() (mplexStream, error) { return s.AcceptStream() },
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

// mplexReadErr reads until an error and returns it.
func mplexReadErr(r io.Reader) error {
	buf := make([]byte, 4096)
	for {
		if _, err := r.Read(buf); err != nil {
			return err
		}
	}
}

// TestMplexPingAndGoAway: mplex has neither; Ping says so, and GoAway
// refuses new streams locally without sending anything.
func TestMplexPingAndGoAway(t *testing.T) {
	client, server := sessionPair(t, mplexConfig())
	if _, err := client.Ping(); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("Ping: %v", err)
	}
	if err := server.GoAway(); err != nil {
		t.Fatal(err)
	}
	if _, err := server.OpenStream(context.Background()); !errors.Is(err, ErrLocalGoAway) {
		t.Fatalf("OpenStream after GoAway: %v", err)
	}
	// The client doesn't know: its stream is refused with a reset.
	st, err := client.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := mplexReadErr(st); !errors.Is(err, ErrStreamReset) {
		t.Fatalf("read on a refused stream: %v", err)
	}
	if client.IsClosed() || server.IsClosed() {
		t.Fatal("a session closed")
	}
}

// TestMplexEchoBraid: braid against braid over mplex, both sides opening.
func TestMplexEchoBraid(t *testing.T) {
	for _, coalesce := range []bool{true, false} {
		t.Run(map[bool]string{true: "coalesce", false: "plain"}[coalesce], func(t *testing.T) {
			cfg := mplexConfig()
			cfg.DisableCoalescing = !coalesce
			client, server := sessionPair(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ce, se := braidMplexEnd(client), braidMplexEnd(server)
			go mplexEchoServer(ce)
			go mplexEchoServer(se)
			var wg sync.WaitGroup
			for _, e := range []mplexEnd{ce, se} {
				for _, size := range mplexEchoSizes(10) {
					wg.Go(func() {
						if err := mplexEchoCheck(ctx, e, size); err != nil {
							t.Error(err)
						}
					})
				}
			}
			wg.Wait()
			waitMplex(t, "streams to end", func() bool { return client.NumStreams()+server.NumStreams() == 0 })
		})
	}
}

// TestMplexCoalescing: 100 streams each writing 100 messages of 64 B
// over mplex; coalescing packs the frames into far fewer writes, as it
// does for yamux.
func TestMplexCoalescing(t *testing.T) {
	const streams, msgs, size = 100, 100, 64
	client, server := sessionPair(t, mplexConfig())
	go func() {
		for {
			st, err := server.AcceptStream()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, st) }()
		}
	}()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range streams {
		st, err := client.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer st.Close()
			<-start
			msg := make([]byte, size)
			for range msgs {
				if _, err := st.Write(msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	// An mplex message header here is 2 bytes (id<<3|tag < 128 for id < 16, else 2) + 1.
	waitMplex(t, "the server to read every message", func() bool {
		return server.Stats().BytesReceived >= streams*msgs*(size+2)
	})
	st := client.Stats()
	t.Logf("%+v", st)
	if st.FramesSent < streams*msgs {
		t.Fatalf("%d frames sent, want at least %d", st.FramesSent, streams*msgs)
	}
	if st.Writes*4 >= st.FramesSent {
		t.Fatalf("writes not coalesced: %d writes for %d frames", st.Writes, st.FramesSent)
	}
}

// floodedStream is a stream a slowReaderServer never read, and the error
// its read returned.
type floodedStream struct {
	st  *Stream
	err error
}

// slowReaderServer accepts streams on s: a stream whose first byte is 'E'
// is echoed; one whose first byte is 'F' is never read again until the
// flood is over. Those, and streams reset before their first byte was
// read (the reset drops what was buffered), go to flooded.
func slowReaderServer(s *Session, flooded chan<- floodedStream, floodOver <-chan struct{}) {
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
func slowReaderCheck(t *testing.T, e mplexEnd, server *Session, isReset func(error) bool) {
	// The bound is the push-back's, plus 50 ms (150 ms under -race: the
	// race detector makes the read loop several times slower, and the
	// echo then waits behind the flood bytes already in the sockets). A
	// read loop that waited for the flooded stream's reader without bound
	// would wait forever here.
	maxLatency := server.cfg.MaxReceiveStall + 50*time.Millisecond
	if race.WithRace() {
		maxLatency = server.cfg.MaxReceiveStall + 150*time.Millisecond
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
		if n < server.cfg.MaxReceiveBuffer {
			t.Fatalf("flood %d: reset after %d bytes, before the %d-byte receive buffer filled", floods, n, server.cfg.MaxReceiveBuffer)
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
			if err := f.err; !errors.Is(err, ErrReceiveBufferOverflow) || !errors.Is(err, ErrStreamReset) {
				t.Fatalf("flooded stream %d: read %v, want ErrReceiveBufferOverflow", i, err)
			}
			if _, err := f.st.Write([]byte("z")); !errors.Is(err, ErrReceiveBufferOverflow) {
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
func slowReaderConfig() *Config {
	cfg := mplexConfig()
	cfg.MaxReceiveBuffer = 256 << 10
	cfg.MaxReceiveStall = 50 * time.Millisecond
	return cfg
}

// TestMplexSlowReaderBraid: a braid peer floods streams that a braid
// server never reads; the server's echo on another stream stays fast, and
// the flooded streams are reset with ErrReceiveBufferOverflow (the
// flooder sees a remote reset).
func TestMplexSlowReaderBraid(t *testing.T) {
	c1, c2 := tcpPair(t)
	client, server := sessionPairOver(t, c1, c2, slowReaderConfig())
	slowReaderCheck(t, braidMplexEnd(client), server, func(err error) bool {
		var se *StreamError
		return errors.As(err, &se) && se.Remote
	})
}

// mplexRawPeer writes raw mplex bytes to a braid Server session and reads
// the frames braid sends back. The raw peer is the wire's other side: the
// streams it opens are sent with initiator tags, braid answers with
// receiver tags.
type mplexRawPeer struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

type mplexRawFrame struct {
	id, tag uint64
	body    []byte
}

func newMplexRawPeer(t *testing.T, cfg *Config) (*mplexRawPeer, *Session) {
	t.Helper()
	c1, c2 := tcpPair(t)
	s, err := Server(c2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		_ = c1.Close()
	})
	return &mplexRawPeer{t: t, conn: c1, br: bufio.NewReader(c1)}, s
}

// send writes raw bytes; a failure is fine once braid closed the conn.
func (p *mplexRawPeer) send(b ...[]byte) {
	_, _ = p.conn.Write(bytes.Join(b, nil))
}

// frame encodes a frame from the raw peer.
func rawMplex(id, tag uint64, body []byte) []byte { return mplexFrameBytes(id, tag, body) }

// next reads braid's next frame, within 5 s.
func (p *mplexRawPeer) next() (mplexRawFrame, error) {
	_ = p.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, err := varint.ReadUvarint(p.br)
	if err != nil {
		return mplexRawFrame{}, err
	}
	n, err := varint.ReadUvarint(p.br)
	if err != nil {
		return mplexRawFrame{}, err
	}
	if n > MplexMaxMessage {
		return mplexRawFrame{}, fmt.Errorf("braid sent a %d-byte message", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(p.br, body); err != nil {
		return mplexRawFrame{}, err
	}
	return mplexRawFrame{id: h >> 3, tag: h & 7, body: body}, nil
}

// await reads braid's frames until one matches.
func (p *mplexRawPeer) await(what string, match func(mplexRawFrame) bool) mplexRawFrame {
	p.t.Helper()
	for {
		f, err := p.next()
		if err != nil {
			p.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return f
		}
	}
}

// acceptWithin accepts a stream at s within 5 s.
func acceptWithin(t *testing.T, s *Session) *Stream {
	t.Helper()
	type res struct {
		st  *Stream
		err error
	}
	c := make(chan res, 1)
	go func() {
		st, err := s.AcceptStream()
		c <- res{st, err}
	}()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatalf("accept: %v", r.err)
		}
		_ = r.st.SetDeadline(time.Now().Add(5 * time.Second))
		return r.st
	case <-time.After(5 * time.Second):
		t.Fatal("no stream accepted")
		return nil
	}
}

// requireMplexUsable proves the session works: the raw peer opens stream
// id (unless opened), braid reads "ping" on it and answers "pong".
func requireMplexUsable(t *testing.T, p *mplexRawPeer, s *Session, id uint64, opened bool) {
	t.Helper()
	if !opened {
		p.send(rawMplex(id, mplexNewStream, nil))
	}
	p.send(rawMplex(id, mplexMessageInitiator, []byte("ping")))
	st := acceptWithin(t, s)
	buf := make([]byte, 4)
	if _, err := io.ReadFull(st, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("braid read %q, %v", buf, err)
	}
	if _, err := st.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	f := p.await("pong", func(f mplexRawFrame) bool { return f.id == id && f.tag == mplexMessageReceiver })
	if string(f.body) != "pong" {
		t.Fatalf("raw peer got %q", f.body)
	}
	if s.IsClosed() {
		t.Fatal("session closed")
	}
}

// requireMplexClosed waits for s to close and checks its error; then the
// raw peer must see the conn end.
func requireMplexClosed(t *testing.T, p *mplexRawPeer, s *Session, want error, reason string) {
	t.Helper()
	select {
	case <-s.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("session did not close")
	}
	err := s.Err()
	if !errors.Is(err, want) || !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("session error %v, want %v", err, want)
	}
	var pe *ProtocolError
	if isProto := errors.As(err, &pe); isProto != (want == ErrProtocol) {
		t.Fatalf("session error %v: *ProtocolError %v", err, isProto)
	}
	if reason != "" && !strings.Contains(err.Error(), reason) {
		t.Fatalf("session error %q, want the reason %q", err, reason)
	}
	for {
		if _, err := p.next(); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
				return
			}
			t.Fatalf("raw peer: %v, want the conn closed", err)
		}
	}
}

// TestMplexHostilePeer writes malformed and unusual mplex input to a braid
// session: each either closes the session with a *ProtocolError (nothing
// else to do without go-away in mplex), or is tolerated and the session
// stays usable.
func TestMplexHostilePeer(t *testing.T) {
	ff := func(n int) []byte { return append(bytes.Repeat([]byte{0xff}, n-1), 0x01) }
	bigName := bytes.Repeat([]byte("n"), MplexMaxMessage)
	fatal := []struct {
		name   string
		in     []byte
		reason string
	}{
		{"10-byte header varint", ff(10), "longer than 9 bytes"},
		{"11-byte header varint", ff(11), "longer than 9 bytes"},
		{"10-byte length varint", append(varint.ToUvarint(1<<3|mplexNewStream), ff(10)...), "longer than 9 bytes"},
		{"not minimal varint", []byte{0x88, 0x00, 0x00}, "not minimally encoded"},
		{"message over 1 MiB", append(varint.ToUvarint(0<<3|mplexMessageInitiator), varint.ToUvarint(MplexMaxMessage+1)...), "over 1 MiB"},
		{"name over 1 MiB", append(varint.ToUvarint(0<<3|mplexNewStream), varint.ToUvarint(MplexMaxMessage+1)...), "over 1 MiB"},
		{"duplicate NewStream", append(rawMplex(4, mplexNewStream, nil), rawMplex(4, mplexNewStream, []byte("again"))...), "SYN for a stream that is open"},
		{"id beyond mplexMaxStreamID", rawMplex(mplexMaxStreamID+1, mplexNewStream, nil), "id out of range"},
		{"unknown tag", rawMplex(1, 7, nil), "unknown mplex tag"},
	}
	for _, c := range fatal {
		t.Run(c.name, func(t *testing.T) {
			p, s := newMplexRawPeer(t, mplexConfig())
			p.send(c.in)
			requireMplexClosed(t, p, s, ErrProtocol, c.reason)
		})
	}

	truncated := []struct {
		name string
		in   []byte
	}{
		{"truncated header varint", []byte{0x80, 0x80}},
		{"truncated length varint", []byte{0x08, 0x80}},
		{"header without length", []byte{0x08}},
		{"truncated name", rawMplex(1, mplexNewStream, []byte("a name"))[:4]},
		{"truncated message", append(rawMplex(1, mplexNewStream, nil), rawMplex(1, mplexMessageInitiator, make([]byte, 100))[:50]...)},
	}
	for _, c := range truncated {
		t.Run(c.name, func(t *testing.T) {
			p, s := newMplexRawPeer(t, mplexConfig())
			p.send(c.in)
			_ = p.conn.(*net.TCPConn).CloseWrite()
			requireMplexClosed(t, p, s, io.ErrUnexpectedEOF, "")
		})
	}

	tolerated := []struct {
		name   string
		in     []byte
		id     uint64 // the stream requireMplexUsable uses
		opened bool   // the input opened it already
	}{
		{"message for an unknown stream", rawMplex(9, mplexMessageInitiator, []byte("lost")), 0, false},
		{"1 MiB message for an unknown stream", rawMplex(9, mplexMessageInitiator, make([]byte, MplexMaxMessage)), 0, false},
		{"message for an unknown stream of ours", rawMplex(9, mplexMessageReceiver, []byte("lost")), 0, false},
		{"close and reset for unknown streams", bytes.Join([][]byte{
			rawMplex(9, mplexCloseInitiator, nil), rawMplex(9, mplexCloseReceiver, nil),
			rawMplex(9, mplexResetInitiator, []byte("why")), rawMplex(9, mplexResetReceiver, nil),
		}, nil), 0, false},
		{"NewStream with a 1 MiB name", rawMplex(3, mplexNewStream, bigName), 3, true},
		{"largest stream id", rawMplex(mplexMaxStreamID, mplexNewStream, nil), mplexMaxStreamID, true},
		{"empty message", append(rawMplex(5, mplexNewStream, nil), rawMplex(5, mplexMessageInitiator, nil)...), 5, true},
		{"id reused after both sides closed", nil, 6, false},
	}
	for _, c := range tolerated {
		t.Run(c.name, func(t *testing.T) {
			p, s := newMplexRawPeer(t, mplexConfig())
			if c.in == nil { // id reuse: open, close both ways, open again
				requireMplexUsable(t, p, s, c.id, false)
				p.send(rawMplex(c.id, mplexCloseInitiator, nil))
				waitMplex(t, "the stream to end", func() bool { return s.NumStreams() == 1 })
				// braid's side is still open; close it.
				for _, st := range streamsOf(s) {
					_ = st.CloseWrite()
				}
				p.await("braid's close", func(f mplexRawFrame) bool { return f.id == c.id && f.tag == mplexCloseReceiver })
				waitMplex(t, "the stream to end", func() bool { return s.NumStreams() == 0 })
			}
			p.send(c.in)
			requireMplexUsable(t, p, s, c.id, c.opened)
		})
	}
}

// streamsOf returns the streams in s's table.
func streamsOf(s *Session) []*Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Stream
	for _, st := range s.streams {
		out = append(out, st)
	}
	return out
}

// TestMplexReceiveBufferBound: a stream may hold exactly MaxReceiveBuffer
// unread bytes; one more byte resets it with ErrReceiveBufferOverflow and
// sends the peer a Reset. Later messages on it are dropped; the session
// and its other streams go on.
func TestMplexReceiveBufferBound(t *testing.T) {
	cfg := mplexConfig()
	cfg.MaxReceiveBuffer = 256 << 10
	p, s := newMplexRawPeer(t, cfg)
	var resets atomic.Int32
	half := make([]byte, 128<<10)
	p.send(rawMplex(1, mplexNewStream, nil), rawMplex(1, mplexMessageInitiator, half), rawMplex(1, mplexMessageInitiator, half))
	st := acceptWithin(t, s)
	// A full buffer is fine: the stream is open, nothing was reset.
	requireMplexUsable(t, p, s, 2, false)
	if got := streamsOf(s); len(got) != 2 {
		t.Fatalf("%d streams, want 2", len(got))
	}
	// One byte more overflows it.
	p.send(rawMplex(1, mplexMessageInitiator, []byte{1}))
	p.await("the reset", func(f mplexRawFrame) bool {
		if f.tag == mplexResetReceiver && f.id == 1 {
			resets.Add(1)
			return true
		}
		return false
	})
	if err := mplexReadErr(st); !errors.Is(err, ErrReceiveBufferOverflow) || !errors.Is(err, ErrStreamReset) {
		t.Fatalf("read: %v", err)
	}
	// Later messages for it are dropped; the session goes on.
	p.send(rawMplex(1, mplexMessageInitiator, half))
	requireMplexUsable(t, p, s, 3, false)
	if n := resets.Load(); n != 1 {
		t.Fatalf("%d resets", n)
	}
}

// TestMplexMaxMessageSplit: a braid Write larger than 1 MiB leaves as
// messages of at most MplexMaxMessage, whatever MaxBatchBytes is.
func TestMplexMaxMessageSplit(t *testing.T) {
	cfg := mplexConfig()
	cfg.MaxBatchBytes = 16 << 20
	p, s := newMplexRawPeer(t, cfg)
	p.send(rawMplex(0, mplexNewStream, nil))
	st := acceptWithin(t, s)
	const size = 2*MplexMaxMessage + 10
	go func() { _, _ = st.Write(make([]byte, size)) }()
	var sizes []int
	for total := 0; total < size; {
		f := p.await("data", func(f mplexRawFrame) bool { return f.tag == mplexMessageReceiver })
		sizes = append(sizes, len(f.body))
		total += len(f.body)
	}
	if len(sizes) != 3 || sizes[0] != MplexMaxMessage || sizes[1] != MplexMaxMessage {
		t.Fatalf("message sizes %v", sizes)
	}
}

// TestMplexAcceptBacklogBurst: mplex has no stream ACK, so nothing makes
// an opener wait for the peer's accept loop; streams that arrive while
// AcceptBacklog streams wait for AcceptStream, and nobody accepts, are
// reset once MaxReceiveStall has passed (the accept push-back,
// accept_pushback_test.go), never queued without bound, and the session
// goes on.
func TestMplexAcceptBacklogBurst(t *testing.T) {
	const backlog, extra = 16, 5
	cfg := mplexConfig()
	cfg.AcceptBacklog = backlog
	client, server := sessionPair(t, cfg)
	var streams []*Stream
	for range backlog + extra {
		st, err := client.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	// The last ones are refused with a reset; the first ones wait.
	for i, st := range streams[backlog:] {
		_ = st.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := mplexReadErr(st); !errors.Is(err, ErrStreamReset) {
			t.Fatalf("stream %d beyond the backlog: %v", backlog+i, err)
		}
	}
	for i := range backlog {
		st, err := server.AcceptStream()
		if err != nil {
			t.Fatal(err)
		}
		if st.ID() != streams[i].ID() {
			t.Fatalf("accepted stream %d, want %d", st.ID(), streams[i].ID())
		}
	}
	go echoServer(server)
	if err := echoCheck(client, 100<<10); err != nil {
		t.Fatal(err)
	}
}
