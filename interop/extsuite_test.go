package interop_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Sizes of the external-peer checks.
const (
	extConcurrent  = 100              // concurrent echo streams, from each side
	extManyStreams = 300              // streams the peer opens at once
	extBulk        = 16 * 1024 * 1024 // one stream's transfer, each way
	extCutAfter    = 200_000          // bytes the peer sends before cutting the connection
	extHalfClose   = 100_000          // bytes each way around a half-close
)

// runExtSuite runs every check against the peer in both roles.
func runExtSuite(t *testing.T, p extPeer) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	forBothExtRoles(t, p, func(t *testing.T, peerDials bool) {
		// One connection for the checks that leave it healthy; the ones
		// that end it get their own.
		x := startExt(t, p, peerDials)
		t.Run("braid-opens/echo", func(t *testing.T) { extEcho(t, x, 1, 256*1024) })
		t.Run("braid-opens/100-concurrent-echoes", func(t *testing.T) { extEcho(t, x, extConcurrent, 64*1024) })
		t.Run("peer-opens/100-concurrent-echoes", func(t *testing.T) { extPeerOpens(t, x, extConcurrent, 16*1024) })
		t.Run("peer-opens/300-at-once", func(t *testing.T) { extPeerOpensMany(t, x) })
		t.Run("16MiB/peer-to-braid", func(t *testing.T) { extSend(t, x, extBulk) })
		t.Run("16MiB/braid-to-peer", func(t *testing.T) { extRecv(t, x, extBulk) })
		t.Run("half-close/braid-first", func(t *testing.T) { extRecv(t, x, extHalfClose) })
		t.Run("half-close/peer-first", func(t *testing.T) { extPeerFinFirst(t, x) })
		t.Run("reset/braid-resets", func(t *testing.T) { extBraidResets(t, x) })
		t.Run("reset/peer-resets", func(t *testing.T) { extPeerResets(t, x) })
		t.Run("ping/braid-pings", func(t *testing.T) { extBraidPings(t, x) })
		t.Run("ping/peer-pings", func(t *testing.T) { extPeerPings(t, x, peerDials) })
		t.Run("still-healthy", func(t *testing.T) { extEcho(t, x, 1, 1024) })

		for _, how := range []string{"fin", "rst"} {
			t.Run("cut/after-read/tcp-"+how, func(t *testing.T) { extCut(t, startExt(t, p, peerDials), how, true) })
			t.Run("cut/in-flight/tcp-"+how, func(t *testing.T) { extCut(t, startExt(t, p, peerDials), how, false) })
		}
		t.Run("peer-opens/300-at-once/backlog-16", func(t *testing.T) {
			cfg := braid.DefaultConfig()
			cfg.AcceptBacklog = 16
			extPeerOpensMany(t, startExtWith(t, p, peerDials, cfg))
		})
		if p.yamux() {
			t.Run("go-away/peer-sends", func(t *testing.T) { extPeerGoAway(t, startExt(t, p, peerDials)) })
			t.Run("go-away/braid-sends", func(t *testing.T) { extBraidGoAway(t, startExt(t, p, peerDials)) })
			t.Run("go-away/braid-closes", func(t *testing.T) { extBraidCloses(t, startExt(t, p, peerDials)) })
		}
	})
}

// extEcho runs n concurrent echo streams of up to size random bytes each
// and checks every echo by SHA-256.
func extEcho(t *testing.T, x *extConn, n, size int) {
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- extEchoOne(x, size/(1+i%4)+i) // mixed sizes
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func extEchoOne(x *extConn, size int) error {
	ctx, cancel := context.WithTimeout(context.Background(), extStartTimeout)
	defer cancel()
	st, err := x.sess.OpenStream(ctx)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer st.Close()
	_ = st.SetDeadline(time.Now().Add(extOpTimeout))
	data := make([]byte, size)
	_, _ = rand.Read(data)
	werr := make(chan error, 1)
	go func() {
		_, err := st.Write(append([]byte("echo\n"), data...))
		if err == nil {
			err = st.CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	got, err := io.Copy(h, st)
	if err != nil {
		return fmt.Errorf("echo of %d bytes: read after %d: %w", size, got, err)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("echo of %d bytes: write: %w", size, err)
	}
	want := sha256.Sum256(data)
	if got != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("echo of %d bytes came back as %d bytes with another SHA-256", size, got)
	}
	return nil
}

// readReply reads the peer's one-line reply and the FIN after it.
func readReply(t *testing.T, st *braid.Stream) string {
	t.Helper()
	b, err := io.ReadAll(st)
	require.NoError(t, err, "reply so far: %q", b)
	return strings.TrimSuffix(string(b), "\n")
}

// extPeerOpens makes the peer open n streams at once and echo-check size
// random bytes on each through braid's echo acceptor.
func extPeerOpens(t *testing.T, x *extConn, n, size int) {
	st := x.command(t, fmt.Sprintf("open %d %d", n, size))
	require.NoError(t, st.CloseWrite())
	require.Equal(t, fmt.Sprintf("ok %d", n), readReply(t, st))
}

// extPeerOpensMany: the peer opens extManyStreams streams at once, more
// than braid's accept backlog holds (256 by default, the libp2p yamux ACK
// backlog; 16 to make braid push back hundreds of times). Neither
// js-libp2p (no ACK backlog on its side) nor rust-yamux (a stream
// half-closed before its ACK no longer counts, connection.rs ack_backlog)
// waits for braid's ACKs, so the streams beyond the backlog arrive before
// braid's accept loop has run; braid pushes back (it stops reading the
// connection until AcceptStream makes room, see Config.AcceptBacklog), and
// every stream must be served, the connection stay healthy.
func extPeerOpensMany(t *testing.T, x *extConn) {
	n := extManyStreams
	st := x.command(t, fmt.Sprintf("open %d %d", n, 256))
	require.NoError(t, st.CloseWrite())
	reply := readReply(t, st)
	if reply != fmt.Sprintf("ok %d", n) {
		how := "otherwise than by a reset from braid"
		if strings.Contains(reply, x.peer.refusedEcho) {
			how = "by braid's reset: braid refused streams of an accept loop that keeps accepting"
		}
		t.Fatalf("the peer's %d streams at once: %q; they failed %s", n, reply, how)
	}
	extEcho(t, x, 1, 1024)
}

// extSend has the peer send n pattern bytes and checks them all and the FIN.
func extSend(t *testing.T, x *extConn, n int) {
	st := x.command(t, fmt.Sprintf("send %d", n))
	require.NoError(t, st.CloseWrite())
	got, err := readPattern(st)
	require.ErrorIs(t, err, io.EOF, "after %d of %d bytes", got, n)
	require.Equal(t, n, got)
}

// extRecv sends n random bytes, half-closes, and checks the peer's count and
// SHA-256 of what it read, sent after braid's FIN.
func extRecv(t *testing.T, x *extConn, n int) {
	st := x.command(t, "recv")
	data := make([]byte, n)
	_, _ = rand.Read(data)
	_, err := st.Write(data)
	require.NoError(t, err)
	require.NoError(t, st.CloseWrite())
	_, err = st.Write([]byte("x"))
	require.ErrorIs(t, err, braid.ErrStreamClosed, "write after CloseWrite")
	sum := sha256.Sum256(data)
	require.Equal(t, fmt.Sprintf("%d %s", n, hex.EncodeToString(sum[:])), readReply(t, st))
}

// extPeerFinFirst: the peer sends and half-closes first; braid reads to the
// FIN, then sends on its still-open half, and the peer reports what it read.
func extPeerFinFirst(t *testing.T, x *extConn) {
	st := x.command(t, fmt.Sprintf("finfirst hc %d", extHalfClose))
	got, err := readPattern(st)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, extHalfClose, got)
	data := make([]byte, extHalfClose)
	_, _ = rand.Read(data)
	_, err = st.Write(data)
	require.NoError(t, err, "write after the peer's FIN")
	require.NoError(t, st.CloseWrite())
	sum := sha256.Sum256(data)
	require.Equal(t, fmt.Sprintf("report hc %d %s", extHalfClose, hex.EncodeToString(sum[:])), x.event(t, "report hc "))
}

// extBraidResets: braid resets a stream (with a code: none of these peers
// carries one, so only the reset itself can reach them) and the peer must
// see a reset, not an end.
func extBraidResets(t *testing.T, x *extConn) {
	st := x.command(t, "waitreset rb")
	line := make([]byte, len("ready\n"))
	_, err := io.ReadFull(st, line)
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(line))
	require.NoError(t, st.ResetWithError(42))
	require.Equal(t, "report rb reset", x.event(t, "report rb "))
	_, err = st.Read(line)
	require.ErrorIs(t, err, braid.ErrStreamReset)
}

// extPeerResets: the peer sends, then resets; braid's Read must fail with
// the peer's reset (code 0: these peers send none), never io.EOF.
func extPeerResets(t *testing.T, x *extConn) {
	const n = 100_000
	st := x.command(t, fmt.Sprintf("reset %d", n))
	got, err := readPattern(st)
	require.LessOrEqual(t, got, n)
	require.Error(t, err)
	require.False(t, errors.Is(err, io.EOF), "a reset read as the end of the stream: %v", err)
	var se *braid.StreamError
	require.ErrorAs(t, err, &se)
	require.Equal(t, braid.StreamError{ErrorCode: 0, Remote: true}, *se)
}

// extBraidPings pings the peer (yamux) or checks that mplex has no pings.
func extBraidPings(t *testing.T, x *extConn) {
	for range 3 {
		rtt, err := x.sess.Ping()
		if !x.peer.yamux() {
			require.ErrorIs(t, err, braid.ErrNotSupported)
			return
		}
		require.NoError(t, err)
		require.Positive(t, rtt)
	}
}

// extPeerPings has the peer ping braid. A yamux peer without a ping API
// gets a connection of its own through a relay, where braid's pongs to the
// pings it sends on its own are checked on the wire.
func extPeerPings(t *testing.T, x *extConn, peerDials bool) {
	st := x.command(t, "ping 3")
	require.NoError(t, st.CloseWrite())
	reply := readReply(t, st)
	switch {
	case !x.peer.yamux():
		require.Equal(t, "unsupported", reply, "mplex has no pings")
	case !x.peer.pings:
		require.Equal(t, "unsupported", reply)
		extPeerPingsOnItsOwn(t, x.peer, peerDials)
	default:
		require.Equal(t, "ok", reply)
	}
}

// extPeerPingsOnItsOwn: a peer that pings on its own (rust-yamux 0.13
// pings once its connection starts and again 10 s after each pong,
// connection/rtt.rs), on a connection through a relay: the peer must have
// sent a ping SYN, and braid must answer every such SYN with a ping ACK
// (flags exactly ACK, stream 0) carrying the same opaque value, within
// extEventTimeout. rust-yamux keeps waiting for a pong that never comes
// (no more pings, nothing else notices), and ends its connection on a pong
// with another value; so the connection must then still carry an echo,
// and the peer have sent no go-away.
func extPeerPingsOnItsOwn(t *testing.T, p extPeer, peerDials bool) {
	x, r := startExtRelayed(t, p, peerDials)
	var syns, acks []yamuxHeader
	answered := func() bool {
		fromPeer, err := r.fromPeer.frames()
		require.NoError(t, err, "the peer's bytes")
		fromBraid, err := r.fromBraid.frames()
		require.NoError(t, err, "braid's bytes")
		syns, acks = syns[:0], acks[:0]
		for _, h := range fromPeer {
			if h.Type == yamuxTypePing && h.Flags&yamuxFlagSYN != 0 {
				syns = append(syns, h)
			}
		}
		for _, h := range fromBraid {
			if h.Type == yamuxTypePing && h.Flags&yamuxFlagACK != 0 {
				acks = append(acks, h)
			}
		}
		if len(syns) == 0 {
			return false
		}
		for _, syn := range syns {
			if !slices.Contains(acks, yamuxHeader{Type: yamuxTypePing, Flags: yamuxFlagACK, Length: syn.Length}) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(extEventTimeout)
	for !answered() {
		if time.Now().After(deadline) {
			t.Fatalf("within %v %s sent the ping SYNs %v; braid's ping ACKs: %v", extEventTimeout, p.name, syns, acks)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("%s's pings %v answered by braid's %v", p.name, syns, acks)
	extEcho(t, x, 1, 1024)
	require.Empty(t, r.fromPeer.goAwayCodes(), "the peer sent a go-away")
}

// extCut: the peer sends extCutAfter bytes, then ends the TCP connection
// (FIN or RST) without ending the stream. After reading all of them
// (afterRead) or with none read before the session ended, braid's Read
// must return the bytes that arrived, in order, and then an error that no
// errors.Is matches to io.EOF: the stream did not end with the peer's FIN.
// A TCP FIN follows every byte the peer sent, so after one all of them
// arrived (they fit in the stream's window), and braid must return them
// all from its buffer before the error; a TCP RST may have made the
// kernel drop some.
func extCut(t *testing.T, x *extConn, how string, afterRead bool) {
	var st *braid.Stream
	if afterRead {
		st = x.command(t, fmt.Sprintf("cut %d %s", extCutAfter, how))
		buf := make([]byte, extCutAfter)
		_, err := io.ReadFull(st, buf)
		require.NoError(t, err)
		require.Equal(t, extPattern(0, extCutAfter), buf)
		_, err = st.Write([]byte("go\n"))
		require.NoError(t, err)
	} else {
		st = x.command(t, fmt.Sprintf("cut %d %s\ngo", extCutAfter, how))
		select {
		case <-x.sess.CloseChan():
		case <-time.After(extEventTimeout):
			t.Fatal("the session outlived its connection")
		}
	}
	got, err := readPattern(st)
	require.LessOrEqual(t, got, extCutAfter)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "differ from the pattern")
	if how == "fin" && !afterRead {
		require.Equal(t, extCutAfter, got, "bytes of the stream read before the cut's error (%v)", err)
	}
	require.False(t, errors.Is(err, io.EOF), "a cut stream (%d bytes, no FIN) reads as cleanly ended: %v", got, err)
	select {
	case <-x.sess.CloseChan():
	case <-time.After(extEventTimeout):
		t.Fatal("the session outlived its connection")
	}
	_, err = st.Write([]byte("x"))
	require.Error(t, err)
}

// echoingStream opens an echo stream and sees 1000 random bytes come back
// on it: a stream open both ways.
func (x *extConn) echoingStream(t *testing.T) *braid.Stream {
	t.Helper()
	a := x.command(t, "echo")
	data := make([]byte, 1000)
	_, _ = rand.Read(data)
	_, err := a.Write(data)
	require.NoError(t, err)
	back := make([]byte, len(data))
	_, err = io.ReadFull(a, back)
	require.NoError(t, err)
	require.Equal(t, data, back)
	return a
}

// extPeerGoAway: with a stream open both ways, the peer closes its muxer
// (go-away, code 0) and then the connection. A peer that first ends its
// streams with a FIN (js) leaves them cleanly ended; one that does not
// (rust) cuts them, and their error must say go-away and match no io.EOF.
// Either way the session, once ended, must report the peer's go-away.
func extPeerGoAway(t *testing.T, x *extConn) {
	a := x.echoingStream(t)
	g := x.command(t, "goaway")
	_, err := io.ReadAll(a)
	if x.peer.finsOnGoAway {
		require.NoError(t, err, "the peer ended the stream with a FIN before its go-away")
	} else {
		require.Error(t, err)
		require.False(t, errors.Is(err, io.EOF), "a stream cut by a go-away reads as cleanly ended: %v", err)
		var ga *braid.GoAwayError
		require.ErrorAs(t, err, &ga, "the stream's error does not tell of the peer's go-away")
		require.Equal(t, braid.GoAwayError{ErrorCode: braid.GoAwayNormal, Remote: true}, *ga)
	}
	_ = g.Close()
	select {
	case <-x.sess.CloseChan():
	case <-time.After(extEventTimeout):
		t.Fatal("the session outlived the peer's go-away and close")
	}
	ctx, cancel := context.WithTimeout(context.Background(), extStartTimeout)
	defer cancel()
	_, err = x.sess.OpenStream(ctx)
	var ga *braid.GoAwayError
	require.ErrorAs(t, err, &ga, "the session's error does not tell of the peer's go-away")
	require.Equal(t, braid.GoAwayError{ErrorCode: braid.GoAwayNormal, Remote: true}, *ga)
	require.False(t, errors.Is(err, io.EOF), "%v", err)
}

// extBraidGoAway: braid sends a go-away; the peer must stop opening
// streams because of it (js refuses them, rust ends its connection): its
// report must say it read the go-away, code 0 (normal), and not that its
// muxer or connection ended some other way (a frame it could not decode,
// the connection's close).
func extBraidGoAway(t *testing.T, x *extConn) {
	w := x.command(t, "watchgoaway wg")
	line := make([]byte, len("ready\n"))
	_, err := io.ReadFull(w, line)
	require.NoError(t, err)
	require.NoError(t, x.sess.GoAway())
	require.Equal(t, fmt.Sprintf("report wg refused goaway %d", braid.GoAwayNormal), x.event(t, "report wg "))
	ctx, cancel := context.WithTimeout(context.Background(), extStartTimeout)
	defer cancel()
	_, err = x.sess.OpenStream(ctx)
	require.Error(t, err, "OpenStream after our go-away")
}

// extBraidCloses: braid's Close, with a stream open, must reach the peer as
// a go-away, code 0 (normal), read before its connection ended (Close
// sends it on its own path, not GoAway's). The peer's "closed" line says
// what ended its connection: the go-away frame decoded from the bytes it
// read (rust), its muxer's go-away state (js), or that none was read.
func extBraidCloses(t *testing.T, x *extConn) {
	_ = x.echoingStream(t) // open when Close comes
	require.NoError(t, x.sess.Close())
	require.Equal(t, fmt.Sprintf("closed goaway %d", braid.GoAwayNormal), x.event(t, "closed"),
		"how the peer's connection ended after braid's Close")
}
