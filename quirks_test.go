package braid

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Quirks of the other yamux implementations that braid must accept, or
// must not provoke, played by the raw peer of hostile_test.go where no Go
// peer produces them (issue 13): rust-yamux 0.13 (rust-libp2p, litep2p),
// @chainsafe/libp2p-yamux 8 (js-libp2p), go-yamux, hashicorp/yamux.
// "Quietly" means braid answers with nothing: no RST, no go-away.

// requireQuiet checks that braid sent no RST and no go-away.
func requireQuiet(t *testing.T, p *rawPeer) {
	t.Helper()
	require.Zero(t, p.count(isRST), "RST frames from braid")
	require.Zero(t, p.count(func(f rawFrame) bool { return f.typ == typeGoAway }), "go-away frames from braid")
}

// quirkPeer is a raw peer (the client: odd stream ids) reading braid's
// frames, with braid's keep-alive off, after one ping round trip.
func quirkPeer(t *testing.T, cfg *Config, braidClient bool) (*rawPeer, *Session) {
	t.Helper()
	if cfg == nil {
		cfg = DefaultConfig()
	}
	cfg.DisableKeepAlive = true
	p, s := newRawPeer(t, cfg, braidClient)
	p.startReading()
	p.ping(0x5EED)
	return p, s
}

// TestQuirkZeroLengthDataFlags: rust-yamux ends a stream with FIN or RST
// on a zero-length Data frame (go-yamux and js use window updates): a FIN
// there is a clean io.EOF after the data, a RST a remote *StreamError
// (code 0: a Data frame's length is not a code).
func TestQuirkZeroLengthDataFlags(t *testing.T) {
	p, s := quirkPeer(t, nil, false)
	p.send(header{typ: typeData, flags: flagSYN, streamID: 1, length: 3}, []byte("abc"))
	p.send(header{typ: typeData, flags: flagFIN, streamID: 1}, nil)
	st := acceptID(t, s, 1)
	got, err := io.ReadAll(st)
	require.NoError(t, err)
	require.Equal(t, "abc", string(got))
	// Half-closed by the peer, braid's side still writes.
	_, err = st.Write([]byte("back"))
	require.NoError(t, err)
	p.await("braid's data", 1, func(f rawFrame) bool { return f.typ == typeData && f.streamID == 1 && string(f.payload) == "back" })
	require.NoError(t, st.Close())

	p.send(header{typ: typeData, flags: flagSYN, streamID: 3, length: 3}, []byte("abc"))
	p.send(header{typ: typeData, flags: flagRST, streamID: 3}, nil)
	st3 := acceptID(t, s, 3)
	err = readAll(st3)
	require.NotErrorIs(t, err, io.EOF)
	var se *StreamError
	require.ErrorAs(t, err, &se)
	require.Equal(t, StreamError{ErrorCode: 0, Remote: true}, *se)
	_, err = st3.Write([]byte("x"))
	require.ErrorAs(t, err, &se)
	require.Equal(t, StreamError{ErrorCode: 0, Remote: true}, *se)

	requireQuiet(t, p)
	requireUsable(t, p, s)
	require.Eventually(t, func() bool { return s.NumStreams() == 1 }, 5*time.Second, 2*time.Millisecond,
		"only requireUsable's stream is left")
}

// readAll reads r to its end and returns the error that ended it (io.EOF
// included, which io.ReadAll hides).
func readAll(r io.Reader) error {
	buf := make([]byte, 4096)
	for {
		if _, err := r.Read(buf); err != nil {
			return err
		}
	}
}

// TestQuirkLazyACK: rust-yamux and js-libp2p acknowledge a stream with
// the first frame they send on it, a Data frame with data, not with an
// immediate window update. Until then the stream counts against braid's
// ACK backlog; the Data frame's ACK releases it and its data is read.
func TestQuirkLazyACK(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxUnackedStreams = 1
	p, s := quirkPeer(t, cfg, true) // braid opens: odd ids; the raw peer is the server
	st, err := s.OpenStream(context.Background())
	require.NoError(t, err)
	_ = st.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = st.Write([]byte("request"))
	require.NoError(t, err)
	p.await("braid's SYN", 1, func(f rawFrame) bool { return f.streamID == st.ID() && f.flags&flagSYN != 0 })
	p.await("braid's data", 1, func(f rawFrame) bool { return f.typ == typeData && f.streamID == st.ID() })

	// The backlog is full: a second stream waits (here: until its context
	// ends).
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = s.OpenStream(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// The lazy ACK: on the first data frame.
	p.send(header{typ: typeData, flags: flagACK, streamID: st.ID(), length: 8}, []byte("response"))
	got := make([]byte, 8)
	_, err = io.ReadFull(st, got)
	require.NoError(t, err)
	require.Equal(t, "response", string(got))
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st2, err := s.OpenStream(ctx)
	require.NoError(t, err, "the ACK on a data frame did not release the backlog")

	// A lazy ACK on a zero-length Data frame with FIN (rust: the stream's
	// first frame is its end) acknowledges too.
	p.await("SYN of the second stream", 1, func(f rawFrame) bool { return f.streamID == st2.ID() && f.flags&flagSYN != 0 })
	p.send(header{typ: typeData, flags: flagACK | flagFIN, streamID: st2.ID()}, nil)
	_ = st2.SetReadDeadline(time.Now().Add(5 * time.Second))
	require.Equal(t, io.EOF, readAll(st2))
	_, err = s.OpenStream(ctx)
	require.NoError(t, err, "the ACK on a FIN did not release the backlog")
	requireQuiet(t, p)
}

// isPing matches ping frames (either direction's).
func isPing(f rawFrame) bool { return f.typ == typePing }

// TestQuirkPings: rust-yamux and js-libp2p close the connection on a pong
// they did not ask for, or a second pong for one ping, and expect pings
// on stream 0 with exactly SYN or ACK. braid sends only those: its pings
// (Ping, the keep-alive, the RTT probe) are SYN on stream 0 with distinct
// nonces, and it answers each of the peer's pings exactly once, with its
// nonce. braid itself ignores unsolicited and duplicate pongs quietly.
func TestQuirkPings(t *testing.T) {
	cfg := DefaultConfig()
	p, s := quirkPeer(t, cfg, false)
	// The peer's pings: each answered once.
	const peerPings = 20
	for i := range uint32(peerPings) {
		p.send(header{typ: typePing, flags: flagSYN, length: 1000 + i}, nil)
	}
	p.await("pongs", peerPings, func(f rawFrame) bool { return isPing(f) && f.flags == flagACK && f.length >= 1000 })

	// braid's pings, answered by the raw peer; the first answered twice
	// (a duplicate pong), and an unsolicited pong besides.
	answered := map[uint32]bool{} // braid's nonces answered so far
	// braid's RTT probe went out with the session's first frames: answer
	// it first.
	p.mu.Lock()
	for _, f := range p.frames {
		if isPing(f) && f.flags == flagSYN {
			answered[f.length] = true
		}
	}
	p.mu.Unlock()
	for nonce := range answered {
		p.send(header{typ: typePing, flags: flagACK, length: nonce}, nil)
	}
	for i := range 3 {
		done := make(chan error, 1)
		go func() {
			_, err := s.Ping()
			done <- err
		}()
		var nonce uint32
		p.await("braid's ping", 1, func(f rawFrame) bool {
			if isPing(f) && f.flags == flagSYN && !answered[f.length] {
				nonce = f.length
				return true
			}
			return false
		})
		p.send(header{typ: typePing, flags: flagACK, length: nonce}, nil)
		if i == 0 {
			p.send(header{typ: typePing, flags: flagACK, length: nonce}, nil)
			p.send(header{typ: typePing, flags: flagACK, length: 0xDEAD}, nil)
		}
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("Ping did not return")
		}
		answered[nonce] = true
	}
	p.ping(0xF00D)
	require.False(t, s.IsClosed(), "session closed: %v", s.Err())

	requireQuiet(t, p)
	p.mu.Lock()
	defer p.mu.Unlock()
	pongs := map[uint32]int{}
	syns := map[uint32]int{}
	for _, f := range p.frames {
		if f.typ != typePing {
			continue
		}
		require.Zero(t, f.streamID, "a ping frame on stream %d", f.streamID)
		switch f.flags {
		case flagACK:
			pongs[f.length]++
		case flagSYN:
			syns[f.length]++
		default:
			t.Fatalf("a ping frame with flags %v", f.flags)
		}
	}
	for nonce, n := range pongs {
		require.Equal(t, 1, n, "pongs for nonce %d", nonce)
		require.True(t, nonce >= 1000 && nonce < 1000+peerPings || nonce == 0x5EED || nonce == 0xF00D, "a pong for nonce %d the peer never sent", nonce)
	}
	require.Len(t, pongs, peerPings+2)
	for nonce, n := range syns {
		require.Equal(t, 1, n, "braid pinged with nonce %d %d times", nonce, n)
	}
}

// maxPeerDataFrame is the largest Data payload every peer accepts:
// rust-yamux rejects a frame body over 1 MiB and closes the connection.
const maxPeerDataFrame = 1 << 20

// TestQuirkDataFrameSize: braid never sends a Data payload over 1 MiB,
// whatever MaxBatchBytes and the peer's window allow.
func TestQuirkDataFrameSize(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxBatchBytes = 16 << 20
	p, s := quirkPeer(t, cfg, false)
	p.send(header{typ: typeWindowUpdate, flags: flagSYN, streamID: 1, length: 16 << 20}, nil)
	st := acceptID(t, s, 1)
	const size = 8 << 20
	errc := make(chan error, 1)
	go func() {
		_, err := st.Write(make([]byte, size))
		errc <- err
	}()
	isData := func(f rawFrame) bool { return f.typ == typeData && f.streamID == 1 }
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		total := 0
		for _, f := range p.frames {
			if isData(f) {
				total += len(f.payload)
			}
		}
		return total >= size
	}, 10*time.Second, 5*time.Millisecond, "braid's data")
	require.NoError(t, <-errc)
	p.mu.Lock()
	largest := 0
	for _, f := range p.frames {
		if isData(f) {
			largest = max(largest, len(f.payload))
		}
	}
	p.mu.Unlock()
	require.LessOrEqual(t, largest, maxPeerDataFrame, "largest Data payload braid sent")
}

// TestQuirkWholeWindowFrames: js-libp2p sizes a Data frame to its whole
// send window (256 KiB on a new stream, then whatever braid's updates
// granted), and sends a window update after its FIN (js-libp2p #2505),
// even once the stream is closed both ways. braid takes the frames and
// ignores the late updates quietly.
func TestQuirkWholeWindowFrames(t *testing.T) {
	p, s := quirkPeer(t, nil, false)
	p.send(header{typ: typeData, flags: flagSYN, streamID: 1, length: InitialStreamWindow}, make([]byte, InitialStreamWindow))
	st := acceptID(t, s, 1)
	buf := make([]byte, 64<<10)
	read := 0
	for read < InitialStreamWindow {
		n, err := st.Read(buf)
		require.NoError(t, err)
		read += n
	}
	// braid returned the window: the next frame is all it granted.
	isUpdate := func(f rawFrame) bool {
		return f.typ == typeWindowUpdate && f.streamID == 1 && f.flags&flagRST == 0
	}
	p.await("braid's window updates", 1, isUpdate)
	credit := 0
	require.Eventually(t, func() bool {
		credit = 0
		p.mu.Lock()
		for _, f := range p.frames {
			if isUpdate(f) {
				credit += int(f.length)
			}
		}
		p.mu.Unlock()
		return credit >= InitialStreamWindow
	}, 5*time.Second, 2*time.Millisecond, "braid returns the whole window")
	p.send(header{typ: typeData, flags: flagFIN, streamID: 1, length: uint32(credit)}, make([]byte, credit))
	n, err := io.Copy(io.Discard, st)
	require.NoError(t, err)
	require.Equal(t, int64(credit), n)
	// A window update after the peer's FIN: braid's side is still open.
	p.send(header{typ: typeWindowUpdate, streamID: 1, length: 64 << 10}, nil)
	p.ping(1)
	require.NoError(t, st.Close())
	p.await("braid's FIN", 1, func(f rawFrame) bool { return f.streamID == 1 && f.flags&flagFIN != 0 })
	require.Eventually(t, func() bool { return s.NumStreams() == 0 }, 5*time.Second, 2*time.Millisecond)
	// And one after both sides closed.
	p.send(header{typ: typeWindowUpdate, streamID: 1, length: 64 << 10}, nil)
	requireUsable(t, p, s)
	requireQuiet(t, p)
}

// TestQuirkFramesForGoneStreams: frames for streams braid never saw, or
// closed and forgot, arrive from every implementation (in flight when a
// stream ended; rust's lazy cleanup; js's window update after FIN). braid
// ignores them quietly: Data of any length, window updates, FIN and RST on
// either frame type.
func TestQuirkFramesForGoneStreams(t *testing.T) {
	frames := func(id uint32) [][2]any {
		return [][2]any{
			{header{typ: typeData, streamID: id, length: 10}, make([]byte, 10)},
			{header{typ: typeData, flags: flagFIN, streamID: id}, []byte(nil)},
			{header{typ: typeData, flags: flagRST, streamID: id}, []byte(nil)},
			{header{typ: typeWindowUpdate, streamID: id, length: 1000}, []byte(nil)},
			{header{typ: typeWindowUpdate, flags: flagFIN, streamID: id}, []byte(nil)},
			{header{typ: typeWindowUpdate, flags: flagRST, streamID: id, length: 3}, []byte(nil)},
			{header{typ: typeWindowUpdate, flags: flagACK, streamID: id}, []byte(nil)},
		}
	}
	p, s := quirkPeer(t, nil, false)
	// A stream that ends cleanly both ways and leaves braid's table.
	p.send(header{typ: typeData, flags: flagSYN | flagFIN, streamID: 1, length: 2}, []byte("hi"))
	st := acceptID(t, s, 1)
	got, err := io.ReadAll(st)
	require.NoError(t, err)
	require.Equal(t, "hi", string(got))
	require.NoError(t, st.Close())
	require.Eventually(t, func() bool { return s.NumStreams() == 0 }, 5*time.Second, 2*time.Millisecond)
	// One braid opened and reset.
	st2, err := s.OpenStream(context.Background())
	require.NoError(t, err)
	require.NoError(t, st2.Reset())
	p.await("braid's RST", 1, isRST)
	rsts := p.count(isRST)

	for _, id := range []uint32{1, st2.ID(), 99, 100} { // closed, reset, unknown of the peer's, unknown of braid's
		for _, f := range frames(id) {
			p.send(f[0].(header), f[1].([]byte))
		}
	}
	p.ping(2)
	require.Equal(t, rsts, p.count(isRST), "braid answered a frame for a gone stream with a RST")
	require.Zero(t, p.count(func(f rawFrame) bool { return f.typ == typeGoAway }))
	requireUsable(t, p, s)
}

// TestQuirkStreamTableFull: rust-yamux ends the connection when braid's
// SYN would make its stream table hold more than 512 streams (go-away 1,
// protocol error, then it closes). braid's calls then fail with the
// peer's *GoAwayError, never io.EOF.
func TestQuirkStreamTableFull(t *testing.T) {
	const rustMaxStreams = 512
	cfg := DefaultConfig()
	cfg.MaxUnackedStreams = 2 * rustMaxStreams // the peer never ACKs here
	p, s := quirkPeer(t, cfg, true)
	var streams []*Stream
	for range rustMaxStreams + 1 {
		st, err := s.OpenStream(context.Background())
		require.NoError(t, err)
		streams = append(streams, st)
	}
	p.await("braid's SYNs", rustMaxStreams+1, func(f rawFrame) bool { return f.flags&flagSYN != 0 && f.typ == typeWindowUpdate })
	p.send(header{typ: typeGoAway, length: GoAwayProtocolError}, nil)
	_ = p.conn.Close()
	select {
	case <-s.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("session still open")
	}
	want := GoAwayError{ErrorCode: GoAwayProtocolError, Remote: true}
	for _, err := range []error{readAll(streams[0]), s.Err(), func() error { _, err := s.OpenStream(context.Background()); return err }()} {
		require.NotErrorIs(t, err, io.EOF)
		var ga *GoAwayError
		require.True(t, errors.As(err, &ga), "%v is not a *GoAwayError", err)
		require.Equal(t, want, *ga)
	}
	require.ErrorIs(t, readAll(streams[rustMaxStreams]), ErrStreamReset)
}
