package braid

import (
	"context"
	"errors"
	"github.com/braidmux/braid/internal/tlstest"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Tests of a stream's concurrency contract: concurrent Reads and Writes on
// one stream, deadlines set, changed and passing while they wait, lent
// buffers and by-reference writes whose memory is the caller's again once
// the call returned, over TCP, TLS and net.Pipe, yamux and mplex.

const (
	// ccTrials is how many times each racing scenario runs per transport.
	ccTrials = 4
	// ccWriters is the goroutines writing to one stream at once.
	ccWriters = 4
	// ccMessages is how many messages each writer writes.
	ccMessages = 24
	// ccReaders is the goroutines reading one stream at once.
	ccReaders = 4
	// ccStreamBytes is what the sender of a concurrent-read test sends.
	ccStreamBytes = 3 << 20
	// ccPromptly bounds how long a call may take to return once it must.
	ccPromptly = 3 * time.Second
	// ccTransferBound bounds a whole transfer of a test (the peer reading
	// every Write, the Reads reaching the end): a hang, not a slow run,
	// fails it.
	ccTransferBound = 60 * time.Second
	// ccChurnMax bounds the wait between two deadline changes.
	ccChurnMax = 2 * time.Millisecond
	// ccLentBuf is a Read buffer large enough to be lent (minLend).
	ccLentBuf = 64 * 1024
	// ccCanary fills a buffer the caller owns again, to see it is not
	// written after its call returned.
	ccCanary = 0xEE
	// ccCanaryWatch is how long a returned buffer is watched.
	ccCanaryWatch = 20 * time.Millisecond
	// ccRefWrite is a Write large enough to go by reference.
	ccRefWrite = 1 << 20
	// patternSync starts every 4-byte word of the position pattern; the
	// other three bytes, below it, are the word's index in base 255.
	patternSync = 0xFF
	// patternBase is the base of the word index digits.
	patternBase = 255
	// patternWord is the bytes of one word of the position pattern.
	patternWord = 4
)

// ccSetup names a transport and a protocol.
type ccSetup struct {
	name  string
	conns func(t testing.TB) (net.Conn, net.Conn)
	mplex bool
}

// tlsConnPair is tlsPair as net.Conns.
func tlsConnPair(t testing.TB) (net.Conn, net.Conn) {
	t1, t2 := tlsPair(t)
	return t1, t2
}

// ccSetups is every transport (TCP, TLS, net.Pipe) with both protocols.
func ccSetups() []ccSetup {
	conns := []struct {
		name string
		mk   func(t testing.TB) (net.Conn, net.Conn)
	}{
		{"tcp", tcpPair},
		{"tls", tlsConnPair},
		{"pipe", func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() }},
	}
	var out []ccSetup
	for _, c := range conns {
		out = append(out, ccSetup{c.name + "/yamux", c.mk, false})
		out = append(out, ccSetup{c.name + "/mplex", c.mk, true})
	}
	return out
}

// allSetups is ccSetups and lendingSetups, each once.
func allSetups() []ccSetup {
	out := ccSetups()
	for _, s := range lendingSetups() {
		if s.name[:4] == "slow" {
			out = append(out, s)
		}
	}
	return out
}

// lendingSetups is the transports whose Reads lend their buffers: TCP and
// TLS, and both through a throttled hop, so that the read loop fills a
// lent buffer for long.
func lendingSetups() []ccSetup {
	var out []ccSetup
	for _, s := range ccSetups() {
		if s.name[:3] != "pip" {
			out = append(out, s)
		}
	}
	slowTLS := func(t testing.TB) (net.Conn, net.Conn) {
		c1, c2 := throttledTCPPair(t)
		t1, t2, err := tlstest.Secure(c1, c2)
		require.NoError(t, err)
		return t1, t2
	}
	for _, p := range []bool{false, true} {
		proto := map[bool]string{false: "/yamux", true: "/mplex"}[p]
		out = append(out, ccSetup{"slowtcp" + proto, throttledTCPPair, p})
		out = append(out, ccSetup{"slowtls" + proto, slowTLS, p})
	}
	return out
}

const (
	// throttleChunk is the most a throttled hop forwards at once.
	throttleChunk = 4096
	// throttlePause is the throttled hop's pause after each chunk.
	throttlePause = 100 * time.Microsecond
)

// throttledTCPPair returns two TCP conns joined by a hop that forwards the
// first's bytes to the second a small chunk at a time, and the other way
// at once: each end is a *net.TCPConn, so the second's Reads lend, and a
// frame trickles into a lent buffer.
func throttledTCPPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	a1, a2 := tcpPair(t)
	b1, b2 := tcpPair(t)
	t.Cleanup(func() { a2.Close(); b1.Close() })
	go func() {
		defer b1.Close()
		buf := make([]byte, throttleChunk)
		for {
			n, err := a2.Read(buf)
			if n > 0 {
				if _, werr := b1.Write(buf[:n]); werr != nil {
					return
				}
				time.Sleep(throttlePause)
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer a2.Close()
		_, _ = io.Copy(a2, b1)
	}()
	return a1, b2
}

// ccStreams opens a stream from a fresh client session to a fresh server
// session of setup s, closed when the test ends.
func ccStreams(t testing.TB, s ccSetup) (cs, ss *Stream, client, server *Session) {
	t.Helper()
	var cfg *Config
	if s.mplex {
		cfg = mplexConfig()
	}
	c1, c2 := s.conns(t)
	client, server = sessionPairOver(t, c1, c2, cfg)
	cs, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = cs.Write([]byte{0})
	require.NoError(t, err)
	ss, err = server.AcceptStream()
	require.NoError(t, err)
	_, err = io.ReadFull(ss, make([]byte, 1))
	require.NoError(t, err)
	return cs, ss, client, server
}

// requireTimeout checks err is a write or read deadline's error.
func requireTimeout(t testing.TB, err error) {
	t.Helper()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "%v is not a timeout", err)
}

// churnDeadline sets deadlines with set until stop is closed: in the past,
// soon, or none, at random; it clears the deadline when it stops.
func churnDeadline(stop <-chan struct{}, set func(time.Time) error) {
	defer func() { _ = set(time.Time{}) }()
	for {
		select {
		case <-stop:
			return
		default:
		}
		switch rand.IntN(4) {
		case 0:
			_ = set(time.Now().Add(-time.Second))
		case 1:
			_ = set(time.Time{})
		default:
			_ = set(time.Now().Add(rand.N(ccChurnMax)))
		}
		time.Sleep(rand.N(ccChurnMax))
	}
}

// ccWriteSizes are message sizes on both sides of the small-write and
// by-reference thresholds.
var ccWriteSizes = []int{1, 100, 4000, refThreshold - 1, refThreshold, 40000, 200000}

// TestConcurrentWritesNeverInterleave: several goroutines write messages of
// every size to one stream at once while its write deadline is set,
// changed, cleared and passes under them. The peer reads each Write's
// bytes as one contiguous run, in each writer's order, and exactly the
// bytes each Write reported (those it reported with a deadline's error
// included); a Write fails only with a timeout.
func TestConcurrentWritesNeverInterleave(t *testing.T) {
	for _, setup := range allSetups() {
		t.Run(setup.name, func(t *testing.T) {
			for range ccTrials / 2 {
				concurrentWritesTrial(t, setup)
			}
		})
	}
}

// writeRecord is one Write of a concurrent-write trial: its message's tag
// (every byte of the message) and the bytes it reported.
type writeRecord struct {
	tag byte
	n   int
}

func concurrentWritesTrial(t *testing.T, setup ccSetup) {
	cs, ss, _, _ := ccStreams(t, setup)
	got := make(chan []byte, 1)
	go func() {
		b, err := io.ReadAll(ss)
		if err != nil {
			t.Errorf("reading the writes: %v", err)
		}
		got <- b
	}()
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		churnDeadline(stop, cs.SetWriteDeadline)
	}()
	records := make([][]writeRecord, ccWriters)
	var wg sync.WaitGroup
	for g := range ccWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ccMessages {
				// A writer's tags are g modulo ccWriters, and its
				// consecutive messages' tags differ.
				tag := byte(g + ccWriters*(i%(256/ccWriters)))
				msg := make([]byte, ccWriteSizes[rand.IntN(len(ccWriteSizes))])
				for j := range msg {
					msg[j] = tag
				}
				n, err := cs.Write(msg)
				if err != nil {
					requireTimeout(t, err)
				} else {
					require.Equal(t, len(msg), n)
				}
				records[g] = append(records[g], writeRecord{tag, n})
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-churned
	require.NoError(t, cs.CloseWrite())
	var b []byte
	select {
	case b = <-got:
	case <-time.After(ccTransferBound):
		t.Fatal("the peer did not read the writes to their end")
	}
	// Split the bytes into runs of one tag each: a run is one Write's.
	seen := make([][]writeRecord, ccWriters)
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] == b[i] {
			j++
		}
		g := int(b[i]) % ccWriters
		seen[g] = append(seen[g], writeRecord{b[i], j - i})
		i = j
	}
	for g := range ccWriters {
		var want []writeRecord
		for _, r := range records[g] {
			if r.n > 0 {
				want = append(want, r)
			}
		}
		require.Equal(t, want, seen[g], "writer %d: its Writes' runs of bytes", g)
	}
}

// positionPattern returns the bytes at offsets [off, off+n) of the
// position pattern: 4-byte words, each patternSync and its index in three
// base-255 digits, so that any part of 7 bytes or more tells where it is.
func positionPattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		p := off + i
		w, k := p/patternWord, p%patternWord
		if k == 0 {
			b[i] = patternSync
			continue
		}
		for range patternWord - 1 - k {
			w /= patternBase
		}
		b[i] = byte(w % patternBase)
	}
	return b
}

// locate returns the offset of c in the position pattern, or false if c
// holds no whole word.
func locate(c []byte) (int, bool) {
	for i := 0; i < patternWord && i+patternWord <= len(c); i++ {
		if c[i] != patternSync {
			continue
		}
		w := 0
		for _, d := range c[i+1 : i+patternWord] {
			w = w*patternBase + int(d)
		}
		return w*patternWord - i, true
	}
	return 0, false
}

// requireTiles checks that chunks, read in an unknown order, are together
// exactly the position pattern's first total bytes: no byte lost,
// duplicated or altered.
func requireTiles(t *testing.T, chunks [][]byte, total int) {
	t.Helper()
	type placed struct {
		off int
		c   []byte
	}
	var at []placed
	var loose [][]byte
	sum := 0
	for _, c := range chunks {
		sum += len(c)
		if off, ok := locate(c); ok {
			at = append(at, placed{off, c})
		} else {
			loose = append(loose, c)
		}
	}
	require.Equal(t, total, sum, "bytes read in all")
	sort.Slice(at, func(i, j int) bool { return at[i].off < at[j].off })
	// Chunks too short to locate fill the gaps, each where it matches.
	var all []placed
	pos := 0
	fill := func(end int) {
		for pos < end {
			found := false
			for i, c := range loose {
				if c != nil && pos+len(c) <= end && string(positionPattern(pos, len(c))) == string(c) {
					all = append(all, placed{pos, c})
					pos += len(c)
					loose[i] = nil
					found = true
					break
				}
			}
			require.True(t, found, "no chunk read holds the bytes at offset %d", pos)
		}
	}
	for _, p := range at {
		require.GreaterOrEqual(t, p.off, pos, "bytes at offset %d read twice", p.off)
		fill(p.off)
		all = append(all, p)
		pos = p.off + len(p.c)
	}
	fill(total)
	for _, p := range all {
		require.Equal(t, positionPattern(p.off, len(p.c)), p.c, "the bytes read at offset %d", p.off)
	}
}

// TestConcurrentReadsWithDeadlineChurn: several goroutines read one stream
// at once, with buffers small and large enough to be lent, while its read
// deadline is set, changed, cleared and passes under them. Together they
// read every byte the peer wrote exactly once, unaltered; a Read fails
// only with a timeout until the peer's end, which every Read then sees
// as io.EOF.
func TestConcurrentReadsWithDeadlineChurn(t *testing.T) {
	for _, setup := range allSetups() {
		t.Run(setup.name, func(t *testing.T) {
			for range ccTrials / 2 {
				concurrentReadsTrial(t, setup)
			}
		})
	}
}

// ccReadSizes are Read buffer sizes on both sides of minLend.
var ccReadSizes = []int{7, 1000, minLend, ccLentBuf, 100000}

func concurrentReadsTrial(t *testing.T, setup ccSetup) {
	cs, ss, _, _ := ccStreams(t, setup)
	go func() {
		data := positionPattern(0, ccStreamBytes)
		for len(data) > 0 {
			n := min(len(data), 1+rand.IntN(3*ccLentBuf))
			if _, err := cs.Write(data[:n]); err != nil {
				t.Errorf("write: %v", err)
				return
			}
			data = data[n:]
		}
		if err := cs.CloseWrite(); err != nil {
			t.Errorf("close write: %v", err)
		}
	}()
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		churnDeadline(stop, ss.SetReadDeadline)
	}()
	var mu sync.Mutex
	var chunks [][]byte
	var wg sync.WaitGroup
	for r := range ccReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, ccReadSizes[r%len(ccReadSizes)])
			for {
				n, err := ss.Read(buf)
				if n > 0 {
					mu.Lock()
					chunks = append(chunks, append([]byte(nil), buf[:n]...))
					mu.Unlock()
				}
				switch {
				case err == io.EOF:
					return
				case err != nil:
					require.Zero(t, n, "bytes with an error")
					requireTimeout(t, err)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(ccTransferBound):
		t.Fatal("the Reads did not all see the stream's end")
	}
	close(stop)
	<-churned
	requireTiles(t, chunks, ccStreamBytes)
}

// readEnd is a way for a Read to have to end while its buffer may be lent.
type readEnd struct {
	name string
	end  func(s *Session, st *Stream)
	want error // what the Read fails with, if it returns no bytes
}

// readEnds is every way a waiting Read must end.
var readEnds = []readEnd{
	{"deadline", func(_ *Session, st *Stream) { _ = st.SetReadDeadline(time.Now()) }, os.ErrDeadlineExceeded},
	{"reset", func(_ *Session, st *Stream) { _ = st.Reset() }, ErrStreamReset},
	{"close read", func(_ *Session, st *Stream) { _ = st.CloseRead() }, ErrStreamClosed},
	{"session close", func(s *Session, _ *Stream) { _ = s.Close() }, ErrStreamReset},
}

const (
	// ccMaxEndDelay bounds the random wait before a call is made to end.
	ccMaxEndDelay = 500 * time.Microsecond
	// ccSlowEndDelay bounds the added wait through a throttled hop,
	// where a frame takes milliseconds to come.
	ccSlowEndDelay = 20 * time.Millisecond
	// ccSendPause bounds the sender's pause between Writes of a
	// lending test.
	ccSendPause = time.Millisecond
)

// TestLentReadEndsWhileFilled: while the peer sends large frames, a Read
// with a buffer large enough to be lent is made to end (deadline, reset,
// CloseRead, session close) at a random moment, likely while the read
// loop fills its buffer. The Read returns promptly, with bytes that are
// the stream's next ones or with its end's error (never io.EOF); its
// buffer is not written after it returned; a deadline's Read loses and
// duplicates nothing for the next Reads; and the session's read loop goes
// on for another stream.
func TestLentReadEndsWhileFilled(t *testing.T) {
	for _, setup := range lendingSetups() {
		for _, e := range readEnds {
			t.Run(setup.name+"/"+e.name, func(t *testing.T) {
				for range ccTrials {
					lentReadEndTrial(t, setup, e)
				}
			})
		}
	}
}

func lentReadEndTrial(t *testing.T, setup ccSetup, e readEnd) {
	cs, ss, client, server := ccStreams(t, setup)
	sent := make(chan struct{})
	stopSend := make(chan struct{})
	go func() {
		// The peer sends until told to stop, then ends its side.
		defer close(sent)
		for off := 0; ; {
			select {
			case <-stopSend:
				_ = cs.CloseWrite()
				return
			default:
			}
			n, err := cs.Write(positionPattern(off, ccLentBuf))
			if err != nil {
				return // the reader ended the stream or the session
			}
			off += n
			// A pause now and then: the Read waits with nothing
			// buffered when the next frame comes, and lends.
			time.Sleep(rand.N(ccSendPause))
		}
	}()
	// Start reading until the flow runs, then end a Read at random.
	off := 0
	buf := make([]byte, ccLentBuf)
	for range 2 {
		n, err := ss.Read(buf)
		require.NoError(t, err)
		require.Equal(t, positionPattern(off, n), buf[:n])
		off += n
	}
	go func() {
		time.Sleep(rand.N(ccMaxEndDelay))
		if setup.name[:4] == "slow" {
			time.Sleep(rand.N(ccSlowEndDelay))
		}
		e.end(server, ss)
	}()
	for {
		start := time.Now()
		n, err := ss.Read(buf)
		require.Less(t, time.Since(start), ccPromptly, "a Read outlived its end")
		require.Equal(t, positionPattern(off, n), buf[:n], "bytes at offset %d", off)
		off += n
		if err == nil {
			continue
		}
		require.Zero(t, n, "bytes with an error")
		require.ErrorIs(t, err, e.want)
		require.False(t, errors.Is(err, io.EOF), "%v matches io.EOF", err)
		break
	}
	// The buffer is the caller's again: nothing may write it.
	for i := range buf {
		buf[i] = ccCanary
	}
	time.Sleep(ccCanaryWatch)
	for i, c := range buf {
		require.Equal(t, byte(ccCanary), c, "the returned Read's buffer written at %d", i)
	}
	if e.name == "deadline" {
		// Nothing lost or duplicated for the next Reads.
		require.NoError(t, ss.SetReadDeadline(time.Time{}))
		close(stopSend)
		for {
			n, err := ss.Read(buf)
			require.Equal(t, positionPattern(off, n), buf[:n], "bytes at offset %d after the deadline", off)
			off += n
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
	} else {
		close(stopSend)
	}
	if e.name != "session close" {
		requireEcho(t, client, server)
	}
	_ = cs.Reset()
	<-sent
}

// requireEcho proves the sessions still carry a new stream both ways.
func requireEcho(t *testing.T, client, server *Session) {
	t.Helper()
	msg := []byte("still going")
	cs, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	defer cs.Reset()
	_, err = cs.Write(msg)
	require.NoError(t, err)
	ss, err := server.AcceptStream()
	require.NoError(t, err)
	defer ss.Reset()
	got := make([]byte, len(msg))
	require.NoError(t, ss.SetReadDeadline(time.Now().Add(ccPromptly)))
	_, err = io.ReadFull(ss, got)
	require.NoError(t, err)
	require.Equal(t, msg, got)
}

// writeEnd is a way for a by-reference Write to have to end early.
type writeEnd struct {
	name string
	end  func(s *Session, st *Stream)
}

// writeEnds is every way a by-reference Write must end.
var writeEnds = []writeEnd{
	{"deadline", func(_ *Session, st *Stream) { _ = st.SetWriteDeadline(time.Now()) }},
	{"reset", func(_ *Session, st *Stream) { _ = st.Reset() }},
	{"session close", func(s *Session, _ *Stream) { _ = s.Close() }},
}

// TestRefWriteBufferFreeOnReturn: a large Write (by reference: written
// from the caller's memory) is made to end at a random moment by a
// deadline, a reset or its session's close, while the peer reads slowly.
// Once Write returned, its caller overwrites the buffer; the peer never
// reads an overwritten byte, and, after a deadline, reads exactly the
// bytes the Writes reported, in order.
func TestRefWriteBufferFreeOnReturn(t *testing.T) {
	for _, setup := range allSetups() {
		for _, e := range writeEnds {
			t.Run(setup.name+"/"+e.name, func(t *testing.T) {
				for range ccTrials {
					refWriteEndTrial(t, setup, e)
				}
			})
		}
	}
}

// ccSlowRead is the peer's Read size in a by-reference write trial: small,
// so that the writer waits on the window and the conn.
const ccSlowRead = 4096

func refWriteEndTrial(t *testing.T, setup ccSetup, e writeEnd) {
	cs, ss, client, _ := ccStreams(t, setup)
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		var all []byte
		buf := make([]byte, ccSlowRead)
		for {
			n, err := ss.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				got <- result{all, err}
				return
			}
		}
	}()
	var ended atomic.Bool
	go func() {
		time.Sleep(rand.N(ccMaxEndDelay))
		e.end(client, cs)
		ended.Store(true)
	}()
	// The pattern's bytes are below ccCanary.
	var want []byte
	for off := 0; ; {
		msg := make([]byte, ccRefWrite)
		for i := range msg {
			msg[i] = byte((off + i) % ccCanary)
		}
		start := time.Now()
		n, err := cs.Write(msg)
		require.Less(t, time.Since(start), ccPromptly+time.Duration(DefaultConfig().ConnectionWriteTimeout), "a Write outlived its end")
		want = append(want, msg[:n]...)
		off += n
		for i := range msg {
			msg[i] = ccCanary
		}
		if err != nil {
			require.False(t, errors.Is(err, io.EOF), "%v matches io.EOF", err)
			if e.name == "deadline" {
				requireTimeout(t, err)
			}
			break
		}
		require.Equal(t, ccRefWrite, n)
		if ended.Load() && e.name == "deadline" {
			break // the deadline came between two Writes
		}
	}
	if e.name == "deadline" {
		require.NoError(t, cs.SetWriteDeadline(time.Time{}))
		require.NoError(t, cs.CloseWrite())
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(ccTransferBound):
		t.Fatal("the peer's Read did not end")
	}
	for i, c := range r.b {
		if c == ccCanary {
			t.Fatalf("the peer read a byte written to the buffer after Write returned, at %d", i)
		}
	}
	if e.name == "deadline" {
		require.Equal(t, io.EOF, r.err)
		require.Equal(t, len(want), len(r.b), "bytes the Writes reported")
		require.Equal(t, want, r.b)
	} else {
		require.False(t, errors.Is(r.err, io.EOF), "%v matches io.EOF", r.err)
		k := min(len(r.b), len(want))
		require.Equal(t, string(want[:k]), string(r.b[:k]), "the bytes the peer read before the end")
	}
}

// ccBuffered is what the peer writes before a Read with a past deadline.
const ccBuffered = "buffered"

// TestReadPastDeadlineWithDataBuffered: a read deadline in the past makes
// later Reads fail with a timeout, as SetDeadline promises ("a time in
// the past makes pending and later calls fail with os.ErrDeadlineExceeded")
// and as TCP and net.Pipe conns do, even while bytes are buffered; the
// bytes are not lost: once the deadline is cleared, the next Read returns
// them. Writes already behave so.
func TestReadPastDeadlineWithDataBuffered(t *testing.T) {
	for _, setup := range ccSetups() {
		t.Run(setup.name, func(t *testing.T) {
			cs, ss, _, _ := ccStreams(t, setup)
			_, err := cs.Write([]byte(ccBuffered))
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				ss.mu.Lock()
				defer ss.mu.Unlock()
				return ss.recv.size == len(ccBuffered)
			}, ccPromptly, time.Millisecond, "the bytes buffered")
			require.NoError(t, ss.SetReadDeadline(time.Now().Add(-time.Second)))
			n, err := ss.Read(make([]byte, len(ccBuffered)))
			require.Zero(t, n, "a Read past its deadline returned bytes")
			requireTimeout(t, err)
			require.NoError(t, ss.SetReadDeadline(time.Time{}))
			got := make([]byte, len(ccBuffered))
			_, err = io.ReadFull(ss, got)
			require.NoError(t, err)
			require.Equal(t, ccBuffered, string(got))
		})
	}
}
