package braid

import (
	"io"
	"net"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWindowUpdateRidesWithPong: over TCP, while the peer's markers come,
// a stream whose large window is an eighth consumed makes no update of its
// own; the update goes out with the next pong, ahead of it, and once half
// the window is consumed with no pong to carry it, it goes alone. With no
// marker since the stream's last update it goes alone at an eighth, as a
// stream's update does where the peer sends no markers.
func TestWindowUpdateRidesWithPong(t *testing.T) {
	const window = 1 << 20
	p, s := newRawPeer(t, &Config{MaxStreamWindow: window}, false) // no growth past it
	require.Equal(t, updateRide, s.updates, "a TCP session's updates ride with pongs")
	p.startReading()
	p.send(syn(1), nil)
	st := acceptID(t, s, 1)
	p.ping(1) // what the session queued at its start is written
	st.mu.Lock()
	st.rw = newRecvWindow(window, 0) // as if it had grown (a grown window's budget is not the test's)
	st.mu.Unlock()
	isCredit := func(f rawFrame) bool {
		return f.typ == typeWindowUpdate && f.streamID == 1 && f.flags == 0
	}
	marker := func(seq uint32) { p.ping(markerFlag | seq) } // a marker, and its pong
	chunk := pattern(64 << 10)
	send := func(n int) {
		for range n {
			p.send(header{typ: typeData, streamID: 1, length: uint32(len(chunk))}, chunk)
		}
		buf := make([]byte, n*len(chunk))
		_, err := io.ReadFull(st, buf)
		require.NoError(t, err)
		for i := range n {
			require.Equal(t, chunk, buf[i*len(chunk):(i+1)*len(chunk)])
		}
	}
	marker(1)
	send(3) // 192 KiB: more than an eighth, less than half
	st.mu.Lock()
	pending, queued := st.rw.pending(), st.rideQueued
	st.mu.Unlock()
	require.EqualValues(t, 3*len(chunk), pending, "no update of its own: the consumed bytes wait")
	require.True(t, queued, "the stream waits in the ride list")
	require.Zero(t, p.count(isCredit))

	p.ping(2)
	p.mu.Lock()
	frames := slices.Clone(p.frames)
	p.mu.Unlock()
	credit := slices.IndexFunc(frames, isCredit)
	pong := slices.IndexFunc(frames, func(f rawFrame) bool { return f.typ == typePing && f.flags == flagACK && f.length == 2 })
	require.GreaterOrEqual(t, credit, 0, "the update rode with the pong")
	require.Less(t, credit, pong, "ahead of it")
	require.EqualValues(t, 3*len(chunk), frames[credit].length)
	require.Equal(t, 1, p.count(isCredit))

	send(2) // 128 KiB, an eighth, and no marker since the last update
	p.await("an update alone at an eighth: no pong is known to come", 2, isCredit)
	require.EqualValues(t, 2*len(chunk), p.last(isCredit).length)

	marker(2)
	send(8) // 512 KiB, half the window, no pong meanwhile
	p.await("an update alone at half the window", 3, isCredit)
	require.EqualValues(t, 8*len(chunk), p.last(isCredit).length)
	p.ping(3)
	require.Equal(t, 3, p.count(isCredit), "nothing more rides: every consumed byte is given back")
}

// last returns the last recorded frame that matches; the test fails if
// none does.
func (p *rawPeer) last(match func(rawFrame) bool) rawFrame {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.frames) - 1; i >= 0; i-- {
		if match(p.frames[i]) {
			return p.frames[i]
		}
	}
	p.t.Fatal("no such frame")
	return rawFrame{}
}

// TestWindowUpdateRideNeedsMarkerAfterOpen: a stream opened after the
// peer's last marker makes its update alone at an eighth and never joins
// the ride list, so a peer whose markers stopped can't make the list grow
// with the streams it opens and closes after (rideList).
func TestWindowUpdateRideNeedsMarkerAfterOpen(t *testing.T) {
	const window = 1 << 20
	p, s := newRawPeer(t, &Config{MaxStreamWindow: window}, false)
	require.Equal(t, updateRide, s.updates, "a TCP session's updates ride with pongs")
	p.startReading()
	p.ping(markerFlag | 1) // a marker before the streams open, and its pong
	chunk := pattern(64 << 10)
	for id := uint32(1); id <= 5; id += 2 {
		p.send(syn(id), nil)
		st := acceptID(t, s, id)
		p.ping(id + 100) // what the session queued for the stream is written
		st.mu.Lock()
		st.rw = newRecvWindow(window, 0) // as if it had grown
		st.mu.Unlock()
		isCredit := func(f rawFrame) bool {
			return f.typ == typeWindowUpdate && f.streamID == id && f.flags == 0
		}
		for range 2 { // 128 KiB: an eighth
			p.send(header{typ: typeData, streamID: id, length: uint32(len(chunk))}, chunk)
		}
		_, err := io.ReadFull(st, make([]byte, 2*len(chunk)))
		require.NoError(t, err)
		p.await("an update alone at an eighth: no marker since the stream opened", 1, isCredit)
		st.mu.Lock()
		queued := st.rideQueued
		st.mu.Unlock()
		require.False(t, queued, "stream %d is not in the ride list", id)
		require.NoError(t, st.Close())
	}
	s.rides.mu.Lock()
	n := len(s.rides.streams)
	s.rides.mu.Unlock()
	require.Zero(t, n, "no stream waits for a pong")
}

// TestWindowUpdatesEagerOverTLSAtTwoP: over TLS at two P, where the read
// loop is busy and updates don't ride, a large window goes back in steps
// of eagerUpdateBytes as the application reads, not in eighths; over TCP
// and at one P the session's updates are not eager.
func TestWindowUpdatesEagerOverTLSAtTwoP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // before the session starts: it fixes it then
	const window = 4 << 20
	require.Greater(t, updateThreshold(window), uint32(eagerUpdateBytes), "the test needs eighths larger than the eager step")
	t1, t2 := tlsPair(t)
	p, s := newRawPeerOver(t, t1, t2, &Config{MaxStreamWindow: window}, false)
	require.Equal(t, updateEager, s.updates, "a TLS session at two P sends its updates eagerly")
	p.startReading()
	p.send(syn(1), nil)
	st := acceptID(t, s, 1)
	p.ping(1) // what the session queued at its start is written
	st.mu.Lock()
	st.rw = newRecvWindow(window, 0) // as if it had grown
	st.mu.Unlock()
	isCredit := func(f rawFrame) bool {
		return f.typ == typeWindowUpdate && f.streamID == 1 && f.flags == 0
	}
	chunk := pattern(64 << 10)
	const chunks = 16 // 1 MiB: an eighth would make two updates
	for range chunks {
		p.send(header{typ: typeData, streamID: 1, length: uint32(len(chunk))}, chunk)
	}
	for range chunks {
		buf := make([]byte, len(chunk))
		_, err := io.ReadFull(st, buf)
		require.NoError(t, err)
		require.Equal(t, chunk, buf)
	}
	want := chunks * len(chunk) / eagerUpdateBytes
	p.await("an update every eagerUpdateBytes read", want, isCredit)
	p.ping(2)
	require.Equal(t, want, p.count(isCredit), "no update beyond what was read")
	p.mu.Lock()
	for _, f := range p.frames {
		if isCredit(f) {
			require.EqualValues(t, eagerUpdateBytes, f.length)
		}
	}
	p.mu.Unlock()

	for _, c := range []struct {
		name  string
		procs int
		tls   bool
	}{{"TCP at two P", 2, false}, {"TLS at one P", 1, true}} {
		runtime.GOMAXPROCS(c.procs)
		var c1, c2 net.Conn
		if c.tls {
			c1, c2 = tlsPair(t)
		} else {
			c1, c2 = tcpPair(t)
		}
		_, s := newRawPeerOver(t, c1, c2, nil, false)
		require.Equal(t, updateRide, s.updates, "%s: updates ride with pongs, not eager", c.name)
	}
}
