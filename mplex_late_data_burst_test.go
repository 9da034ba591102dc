package braid

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mplex against what go-mplex v0.7.0 sends: a peer's late
// data after its Close, a burst towards a reader that waited in Read for
// longer than MaxReceiveStall, and Config.Memory under a flood of
// streams. The same with go-mplex itself as the peer are in
// interop/gomplex_late_data_test.go.

// reservedInTable sums what the streams in s's table hold from
// Config.Memory.
func reservedInTable(s *Session) int {
	n := 0
	for _, st := range streamsOf(s) {
		st.mu.Lock()
		n += st.reserved
		st.mu.Unlock()
	}
	return n
}

// bufferedInTable sums the unread bytes of the streams in s's table.
func bufferedInTable(s *Session) int {
	n := 0
	for _, st := range streamsOf(s) {
		st.mu.Lock()
		n += st.recv.size
		st.mu.Unlock()
	}
	return n
}

// heldBy returns what m holds.
func heldBy(m *cappedMemory) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

// TestMplexDataAfterPeerCloseDropped promises that a Message the peer
// sends on a stream after its Close (go-mplex v0.7.0 does, when a Write
// races its CloseWrite: interop's TestMplexGoMplexWriteRacingCloseWrite)
// is dropped, as go-mplex drops it, reserving no memory: the stream still
// reads what came before the Close and then io.EOF, and the session and
// its other streams go on. Before, braid ended the whole session with a
// *ProtocolError ("data after FIN").
func TestMplexDataAfterPeerCloseDropped(t *testing.T) {
	const lateSize = MplexMaxMessage // large enough to need a reservation if it were buffered
	cfg := mplexConfig()
	mem := &cappedMemory{limit: 1 << 30}
	cfg.Memory = mem
	p, s := newMplexRawPeer(t, cfg)
	p.send(rawMplex(0, mplexNewStream, nil), rawMplex(0, mplexMessageInitiator, []byte("before")), rawMplex(0, mplexCloseInitiator, nil))
	st := acceptWithin(t, s)
	waitMplex(t, "the peer's Close", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.readState == halfClosed
	})
	held := heldBy(mem)
	p.send(rawMplex(0, mplexMessageInitiator, make([]byte, lateSize)))
	requireMplexUsable(t, p, s, 1, false) // the read loop is past the late message
	require.Equal(t, held+InitialStreamWindow, heldBy(mem), "only stream 1's opening reservation, none for the dropped bytes")
	got, err := io.ReadAll(st)
	require.NoError(t, err, "stream 0 ends with io.EOF")
	require.Equal(t, "before", string(got))
	_, err = st.Write([]byte("reply"))
	require.NoError(t, err, "stream 0's write side is open")
}

// TestMplexIdleReaderNotResetByBurst promises that a reader waiting in
// Read is not a stalled reader: a stream idle for longer than
// MaxReceiveStall, whose reader waits in Read with a small buffer (no
// lending), takes a burst of many times MaxReceiveBuffer without a
// reset: the push-back waits for the reader, which reads as soon as it
// runs. Before, the stall was counted from the reader's last Read before
// the idle time, so the read loop, reaching the full buffer before the
// woken reader ran, reset the stream at once.
func TestMplexIdleReaderNotResetByBurst(t *testing.T) {
	const (
		bufBound = 64 << 10
		stall    = 50 * time.Millisecond
		idle     = 2 * stall
		messages = 8 // of bufBound each, in one TCP write
		readSize = 1024
		trials   = 5
	)
	for trial := range trials {
		cfg := mplexConfig()
		cfg.MaxReceiveBuffer = bufBound
		cfg.MaxReceiveStall = stall
		p, s := newMplexRawPeer(t, cfg)
		p.send(rawMplex(0, mplexNewStream, nil))
		st := acceptWithin(t, s)
		done := make(chan error, 1)
		go func() {
			buf := make([]byte, readSize)
			got := 0
			for got < messages*bufBound {
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
		var burst [][]byte
		for range messages {
			burst = append(burst, rawMplex(0, mplexMessageInitiator, make([]byte, bufBound)))
		}
		p.send(burst...)
		if err := <-done; err != nil {
			t.Fatalf("trial %d: the reader waiting in Read got %v", trial, err)
		}
	}
}

// TestMplexFloodReservationsCoverBuffers promises that under a peer that
// opens many streams and fills each past its opening reservation while
// nobody reads, what Config.Memory holds is exactly what the streams in
// the table hold (every other stream's reservation went back when it was
// reset), never more than the manager's limit, and covers every byte
// buffered; and that all of it goes back with the session.
func TestMplexFloodReservationsCoverBuffers(t *testing.T) {
	const (
		streams   = 40
		limit     = 8 << 20
		msgSize   = 700 << 10
		perStream = 3
		stall     = 20 * time.Millisecond
	)
	cfg := mplexConfig()
	mem := &cappedMemory{limit: limit}
	cfg.Memory = mem
	cfg.MaxReceiveStall = stall
	p, s := newMplexRawPeer(t, cfg)
	go func() { // accept and never read
		for {
			if _, err := s.AcceptStream(); err != nil {
				return
			}
		}
	}()
	go func() { // drain braid's resets
		for {
			if _, err := p.next(); err != nil {
				return
			}
		}
	}()
	body := make([]byte, msgSize)
	sent := 0
	for i := range uint64(streams) {
		frames := [][]byte{rawMplex(i, mplexNewStream, nil)}
		for range perStream {
			frames = append(frames, rawMplex(i, mplexMessageInitiator, body))
		}
		for _, f := range frames {
			sent += len(f)
		}
		p.send(frames...)
	}
	waitMplex(t, "braid to read the flood", func() bool { return s.Stats().BytesReceived == uint64(sent) })
	held := heldBy(mem)
	require.LessOrEqual(t, held, limit)
	require.Equal(t, held, reservedInTable(s), "the manager holds what the streams in the table hold")
	require.LessOrEqual(t, bufferedInTable(s), held, "every buffered byte reserved")
	require.NoError(t, s.Close())
	require.Zero(t, heldBy(mem), "all of it back with the session")
}
