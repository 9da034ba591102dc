package braid

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzDecodeHeader proves that decodeHeader never panics on any 12 bytes,
// and that every header it accepts re-encodes to the same bytes.
func FuzzDecodeHeader(f *testing.F) {
	for _, h := range []header{
		{typ: typeData, flags: flagSYN, streamID: 1, length: 5},
		{typ: typeWindowUpdate, flags: flagACK | flagFIN, streamID: 2, length: 1 << 20},
		{typ: typeWindowUpdate, flags: flagRST, streamID: 3, length: 7},
		{typ: typePing, flags: flagSYN, length: 42},
		{typ: typeGoAway, length: GoAwayProtocolError},
	} {
		f.Add(h.appendTo(nil))
	}
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0, 9, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < headerSize {
			return
		}
		b = b[:headerSize]
		h, err := decodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not match ErrProtocol", err)
			}
			return
		}
		var out [headerSize]byte
		h.put(out[:])
		if !bytes.Equal(out[:], b) {
			t.Fatalf("header %+v re-encodes as %x, decoded from %x", h, out, b)
		}
	})
}

// countingMemory is a MemoryManager that tracks what is reserved.
type countingMemory struct{ reserved atomic.Int64 }

func (m *countingMemory) ReserveMemory(size int, _ uint8) error {
	m.reserved.Add(int64(size))
	return nil
}

func (m *countingMemory) ReleaseMemory(size int) { m.reserved.Add(-int64(size)) }

// seedFrame is a yamux frame's bytes, for the session fuzzers' seeds.
func seedFrame(typ frameType, flags frameFlags, id, length uint32, payload string) []byte {
	return append(header{typ: typ, flags: flags, streamID: id, length: length}.appendTo(nil), payload...)
}

// seedBytes is frames' bytes one after the other.
func seedBytes(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// sessionSeeds are valid yamux byte streams a client could send, built
// from real frames, to start the fuzzer from meaningful input.
func sessionSeeds() [][]byte {
	synData := seedFrame(typeData, flagSYN, 1, 5, "hello")
	return [][]byte{
		synData,
		seedBytes(seedFrame(typeWindowUpdate, flagSYN, 1, 0, ""), seedFrame(typeData, 0, 1, 3, "abc"), seedFrame(typeWindowUpdate, flagFIN, 1, 0, "")),
		seedBytes(synData, seedFrame(typeWindowUpdate, 0, 1, 1<<20, ""), seedFrame(typeData, flagFIN, 1, 2, "ok")),
		seedBytes(synData, seedFrame(typeWindowUpdate, flagRST, 1, 9, "")),
		seedBytes(synData, seedFrame(typeData, flagRST, 1, 0, "")),
		seedBytes(seedFrame(typePing, flagSYN, 0, 1, ""), seedFrame(typePing, flagACK, 0, 1, "")),
		seedFrame(typeGoAway, 0, 0, GoAwayNormal, ""),
		seedBytes(synData, seedFrame(typeGoAway, 0, 0, GoAwayProtocolError, "")),
		seedBytes(synData, seedFrame(typeWindowUpdate, flagSYN, 3, 0, ""), seedFrame(typeData, 0, 3, 4, "more"), seedFrame(typeData, 0, 1, 1, "!")),
		seedBytes(synData, seedFrame(typeData, flagFIN, 1, 0, ""), seedFrame(typeData, 0, 1, 1, "x")),
	}
}

// FuzzSession feeds arbitrary bytes to a braid Server as its client peer
// over net.Pipe, with an application that accepts every stream and echoes
// it; checkSessionAgainst says what must hold.
func FuzzSession(f *testing.F) {
	for _, s := range sessionSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkSessionAgainst(t, Yamux, false, in)
	})
}

// FuzzMplexSession is FuzzSession for an mplex Server (a legacy peer's
// session): arbitrary bytes as the mplex client's.
func FuzzMplexSession(f *testing.F) {
	for _, s := range mplexServerSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkSessionAgainst(t, Mplex, false, in)
	})
}

// FuzzClientSession feeds arbitrary bytes to a braid Client, of yamux or
// of mplex, that has opened fuzzClientStreams streams and written a
// request on each: the peer's bytes answer, reset or flood the client's
// own streams, where FuzzSession's peer can only open streams of its own.
func FuzzClientSession(f *testing.F) {
	addFlaggedSeeds(f, false, clientSeeds())
	addFlaggedSeeds(f, true, mplexClientSeeds())
	f.Fuzz(func(t *testing.T, mplex bool, in []byte) {
		p := Yamux
		if mplex {
			p = Mplex
		}
		checkSessionAgainst(t, p, true, in)
	})
}

// addFlaggedSeeds adds each of seeds to a target of (bool, []byte) with
// flag as its bool.
func addFlaggedSeeds(f *testing.F, flag bool, seeds [][]byte) {
	for _, s := range seeds {
		f.Add(flag, s)
	}
}

// FuzzSessionTCP is FuzzSession and FuzzClientSession's yamux half over
// loopback TCP at GOMAXPROCS 2, where the conn turn is on (turn.go): a
// stream's Read that waits at a quiet moment reads the peer's bytes
// itself, and hands what it can't read (a large frame, an error) back to
// the read loop. net.Pipe's reads can't be cut, so the other targets
// never take that path.
func FuzzSessionTCP(f *testing.F) {
	addFlaggedSeeds(f, false, sessionSeeds())
	addFlaggedSeeds(f, true, clientSeeds())
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	f.Fuzz(func(t *testing.T, client bool, in []byte) {
		checkSessionOver(t, Yamux, client, in, tcpPair)
	})
}

// fuzzTurnWait bounds FuzzSessionTCP's wait, between the two halves of
// the peer's bytes, for a Read to take the conn turn.
const fuzzTurnWait = 200 * time.Microsecond

// fuzzClientStreams is how many streams the client of FuzzClientSession
// opens before the peer's bytes come: yamux ids 1 and 3, mplex ids 0 and 1.
const fuzzClientStreams = 2

// fuzzRequest is what the client writes on each stream it opens.
const fuzzRequest = "request"

// clientSeeds are yamux byte streams a server could send to a client that
// opened streams 1 and 3.
func clientSeeds() [][]byte {
	ack1 := seedFrame(typeWindowUpdate, flagACK, 1, 0, "")
	return [][]byte{
		ack1,
		seedBytes(ack1, seedFrame(typeData, 0, 1, 5, "reply"), seedFrame(typeData, flagFIN, 1, 0, "")),
		seedBytes(seedFrame(typeData, flagACK, 1, 2, "ok"), seedFrame(typeWindowUpdate, flagACK|flagFIN, 3, 1<<20, "")),
		seedBytes(ack1, seedFrame(typeWindowUpdate, flagRST, 1, 0, ""), seedFrame(typeData, flagRST, 3, 0, "")),
		seedBytes(ack1, seedFrame(typeWindowUpdate, 0, 1, 1<<30, ""), seedFrame(typeData, flagFIN, 1, 1, "x")),
		seedBytes(seedFrame(typeWindowUpdate, flagSYN, 2, 0, ""), seedFrame(typeData, flagFIN, 2, 3, "abc")),
		seedBytes(seedFrame(typePing, flagSYN, 0, 7, ""), seedFrame(typePing, flagACK, 0, markerFlag|1, "")),
		seedBytes(ack1, seedFrame(typeGoAway, 0, 0, GoAwayNormal, "")),
		seedBytes(ack1, seedFrame(typeData, flagFIN, 1, 0, ""), seedFrame(typeData, 0, 1, 1, "late")),
	}
}

// mplexServerSeeds are mplex byte streams a client could send to a
// server.
func mplexServerSeeds() [][]byte {
	open0 := mplexFrameBytes(0, mplexNewStream, []byte("0"))
	return [][]byte{
		open0,
		seedBytes(open0, mplexFrameBytes(0, mplexMessageInitiator, []byte("hello")), mplexFrameBytes(0, mplexCloseInitiator, nil)),
		seedBytes(open0, mplexFrameBytes(0, mplexResetInitiator, nil), mplexFrameBytes(0, mplexMessageInitiator, []byte("late"))),
		seedBytes(open0, mplexFrameBytes(1, mplexNewStream, nil), mplexFrameBytes(1, mplexMessageInitiator, []byte("b")), mplexFrameBytes(0, mplexMessageInitiator, []byte("a"))),
		seedBytes(open0, mplexFrameBytes(0, mplexCloseInitiator, nil), mplexFrameBytes(0, mplexMessageInitiator, []byte("after"))),
		seedBytes(open0, mplexFrameBytes(0, mplexNewStream, []byte("again"))),
	}
}

// mplexClientSeeds are mplex byte streams a server could send to a client
// that opened streams 0 and 1.
func mplexClientSeeds() [][]byte {
	return [][]byte{
		seedBytes(mplexFrameBytes(0, mplexMessageReceiver, []byte("reply")), mplexFrameBytes(0, mplexCloseReceiver, nil)),
		seedBytes(mplexFrameBytes(1, mplexResetReceiver, nil), mplexFrameBytes(1, mplexMessageReceiver, []byte("late"))),
		seedBytes(mplexFrameBytes(0, mplexCloseReceiver, nil), mplexFrameBytes(0, mplexMessageReceiver, []byte("after"))),
		seedBytes(mplexFrameBytes(0, mplexNewStream, []byte("theirs")), mplexFrameBytes(0, mplexMessageInitiator, []byte("x"))),
		mplexFrameBytes(7, mplexMessageReceiver, []byte("unknown")),
	}
}

// checkSessionAgainst runs a braid session of protocol p, as the client or
// the server, over net.Pipe against a peer that writes in and hangs up
// (checkSessionOver: over another conn pair). The
// application accepts every stream and echoes it; a client first opens
// fuzzClientStreams streams, writes fuzzRequest on each, closes its write
// side and reads to the end. Whatever the bytes, the session must not
// panic, must close with an error matching ErrSessionClosed once the peer
// hung up, Close must return in bounded time, every stream goroutine must
// end, every byte of memory reserved must be released, and no stream's
// Read may return an error matching io.EOF unless the peer's bytes carry
// that stream's FIN (finsIn).
func checkSessionAgainst(t *testing.T, p Protocol, client bool, in []byte) {
	checkSessionOver(t, p, client, in, func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() })
}

// checkSessionOver is checkSessionAgainst over the conn pair conns makes:
// the peer gets the first.
func checkSessionOver(t *testing.T, p Protocol, client bool, in []byte, conns func(testing.TB) (net.Conn, net.Conn)) {
	mem := &countingMemory{}
	cfg := DefaultConfig()
	cfg.Protocol = p
	cfg.DisableKeepAlive = true
	cfg.Memory = mem
	c1, c2 := conns(t)
	newSession := Server
	if client {
		newSession = Client
	}
	s, err := newSession(c2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		endsMu sync.Mutex
		eofs   []uint32 // streams whose Read returned an error matching io.EOF
	)
	// readUntilError reads st until its Read fails, writing what it reads
	// to w, and notes an end at io.EOF.
	// Inputs of odd length read with a read deadline pending, as
	// go-libp2p's protocols do (a conn turn taker may have one, turn.go);
	// a minute away, it never passes here.
	withDeadline := len(in)%2 == 1
	readUntilError := func(st *Stream, w io.Writer) {
		if withDeadline {
			_ = st.SetReadDeadline(time.Now().Add(time.Minute))
		}
		buf := make([]byte, 4096)
		for {
			n, err := st.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
			}
			if errors.Is(err, io.EOF) {
				endsMu.Lock()
				eofs = append(eofs, st.ID())
				endsMu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(2)
	go func() { // the peer reads everything braid writes
		defer wg.Done()
		_, _ = io.Copy(io.Discard, c1)
	}()
	go func() { // the application echoes every stream
		defer wg.Done()
		for {
			st, err := s.AcceptStream()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				readUntilError(st, st)
				_ = st.Close()
			}()
		}
	}()
	if client {
		for range fuzzClientStreams {
			st, err := s.OpenStream(context.Background())
			if err != nil {
				t.Fatalf("open before the peer's bytes: %v", err)
			}
			if _, err := st.Write([]byte(fuzzRequest)); err != nil {
				t.Fatalf("request before the peer's bytes: %v", err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = st.CloseWrite()
				readUntilError(st, io.Discard)
				_ = st.Close()
			}()
		}
	}
	rest := in
	if s.turn.on && len(in) > 1 {
		// The conn turn (turn.go): the first half, then a moment for a
		// Read to wait at a quiet moment and read the rest itself.
		_, _ = c1.Write(in[:len(in)/2])
		for end := time.Now().Add(fuzzTurnWait); time.Now().Before(end) && s.turn.holder.Load() == nil; {
			runtime.Gosched()
		}
		rest = in[len(in)/2:]
	}
	_, _ = c1.Write(rest) // fails once braid closed the pipe: fine
	_ = c1.Close()        // the peer hangs up

	select {
	case <-s.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("session still open 5 s after its peer hung up")
	}
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5 s")
	}
	if err := s.Err(); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("session ended with %v, not matching ErrSessionClosed", err)
	}
	if n := s.NumStreams(); n != 0 {
		t.Fatalf("%d streams left after Close", n)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stream goroutines still blocked 5 s after Close")
	}
	if r := mem.reserved.Load(); r != 0 {
		t.Fatalf("%d bytes of memory still reserved after Close", r)
	}
	fins := finsIn(p, client, in)
	for _, id := range eofs {
		if !fins[id] {
			t.Fatalf("stream %d read io.EOF, but the peer's bytes carry no FIN for it", id)
		}
	}
}

// finsIn returns the streams (by engine key, Stream.ID) whose FIN the
// peer's bytes in carry, read as the session of protocol p and role client
// reads them, up to the first frame its decoder refuses. A frame whose
// payload is cut still counts: the set is a superset of the FINs the
// session can have taken.
func finsIn(p Protocol, client bool, in []byte) map[uint32]bool {
	fins := make(map[uint32]bool)
	if p == Mplex {
		r := bufio.NewReaderSize(bytes.NewReader(in), len(in)+16)
		c := mplexCodec{client: client}
		for {
			h, _, err := c.readHeader(r)
			if err != nil {
				return fins
			}
			if h.flags&flagFIN != 0 {
				fins[h.streamID] = true
			}
			if h.typ == typeData {
				if _, err := r.Discard(int(h.length)); err != nil {
					return fins
				}
			}
		}
	}
	for len(in) >= headerSize {
		h, err := decodeHeader(in)
		if err != nil {
			return fins
		}
		in = in[headerSize:]
		if h.flags&flagFIN != 0 && (h.typ == typeData || h.typ == typeWindowUpdate) {
			fins[h.streamID] = true
		}
		if h.typ == typeData {
			if int(h.length) > len(in) {
				return fins
			}
			in = in[h.length:]
		}
	}
	return fins
}
