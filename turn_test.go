package braid

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// turnStreamPair is streamPair at two P, where the read turn is on.
func turnStreamPair(t *testing.T) (client, server *Session, a, b *Stream) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	client, server, a, b = streamPair(t, nil)
	require.True(t, client.turn.on && server.turn.on, "the read turn at two P over TCP")
	return client, server, a, b
}

// awaitTaker waits until st's Read holds s's read turn.
func awaitTaker(t *testing.T, s *Session, st *Stream) {
	t.Helper()
	require.Eventually(t, func() bool { return s.turn.holder.Load() == st },
		5*time.Second, 100*time.Microsecond, "the Read to take the read turn")
}

// TestReadTurnWhere: the read turn is on at more than one P, on yamux,
// over conns whose reads can be cut (TCP, TLS over TCP); off at one P, on
// mplex and over net.Pipe.
func TestReadTurnWhere(t *testing.T) {
	func() {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
		c, s := sessionPair(t, nil)
		require.True(t, c.turn.on && s.turn.on, "TCP, two P")
		t1, t2 := tlsPair(t)
		c, s = sessionPairOver(t, t1, t2, nil)
		require.True(t, c.turn.on && s.turn.on, "TLS, two P")
		c, s = sessionPair(t, &Config{Protocol: Mplex})
		require.False(t, c.turn.on || s.turn.on, "mplex")
		p1, p2 := net.Pipe()
		c, s = sessionPairOver(t, p1, p2, nil)
		require.False(t, c.turn.on || s.turn.on, "net.Pipe: reads can't be cut")
	}()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c, s := sessionPair(t, nil)
	require.False(t, c.turn.on || s.turn.on, "one P")
}

// TestReadTurnRequestResponse: in a request-response exchange on an
// otherwise quiet session, the waiting Reads read the conn themselves on
// both sides, and every byte arrives in order.
func TestReadTurnRequestResponse(t *testing.T) {
	for _, overTLS := range []bool{false, true} {
		name := "tcp"
		if overTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			var client, server *Session
			func() {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
				if overTLS {
					t1, t2 := tlsPair(t)
					client, server = sessionPairOver(t, t1, t2, nil)
				} else {
					client, server = sessionPair(t, nil)
				}
			}()
			a, err := client.OpenStream(context.Background())
			require.NoError(t, err)
			_, err = a.Write([]byte{0})
			require.NoError(t, err)
			b, err := server.AcceptStream()
			require.NoError(t, err)
			_, err = io.ReadFull(b, make([]byte, 1)) // the opener, before the echo reads
			require.NoError(t, err)
			echoed := make(chan error, 1)
			go func() { echoed <- echoMessages(b, 64) }() // until the client's FIN
			pingRoundTrips(t, a, 300, 64)
			require.NoError(t, a.CloseWrite())
			require.NoError(t, errWithin(t, echoed, "the echo"))
			require.NotZero(t, client.turn.taken.Load(), "frames the client's Reads read")
			require.NotZero(t, server.turn.taken.Load(), "frames the server's Reads read")
		})
	}
}

// TestReadTurnEventsReachTheTaker: a Read that holds the read turn, waiting
// in a conn read, returns for its stream's own events (as a parked Read
// does) and for the session's end, with the error a parked Read returns.
func TestReadTurnEventsReachTheTaker(t *testing.T) {
	cases := []struct {
		name  string
		event func(client, server *Session, b *Stream)
		want  error
	}{
		{"CloseRead", func(_, _ *Session, b *Stream) { _ = b.CloseRead() }, ErrStreamClosed},
		{"Close", func(_, _ *Session, b *Stream) { _ = b.Close() }, ErrStreamClosed},
		{"Reset", func(_, _ *Session, b *Stream) { _ = b.Reset() }, ErrStreamReset},
		{"deadline passed", func(_, _ *Session, b *Stream) { _ = b.SetReadDeadline(time.Now()) }, os.ErrDeadlineExceeded},
		{"deadline to come", func(_, _ *Session, b *Stream) { _ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond)) }, os.ErrDeadlineExceeded},
		{"SetDeadline", func(_, _ *Session, b *Stream) { _ = b.SetDeadline(time.Now().Add(20 * time.Millisecond)) }, os.ErrDeadlineExceeded},
		{"session Close", func(_, server *Session, _ *Stream) { _ = server.Close() }, ErrSessionClosed},
		{"peer's session Close", func(client, _ *Session, _ *Stream) { _ = client.Close() }, ErrStreamReset},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			client, server, _, b := turnStreamPair(t)
			read := readInBackground(b, 8)
			awaitTaker(t, server, b)
			c.event(client, server, b)
			err := errWithin(t, read, "the Read holding the turn")
			require.ErrorIs(t, err, c.want)
			require.NotErrorIs(t, err, io.EOF)
		})
	}
}

// TestReadTurnServesTheSession: while one stream's Read holds the read
// turn, the frames it reads serve the whole session: another stream's
// parked Read gets its data, a new stream is accepted, a ping is
// answered, and the window updates of a transfer larger than a window
// come back, so that its Write ends; each byte arrives in order.
func TestReadTurnServesTheSession(t *testing.T) {
	client, server, _, b := turnStreamPair(t)
	held := readInBackground(b, 8)
	awaitTaker(t, server, b)

	// A new stream, accepted while the Read reads.
	a2, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = a2.Write([]byte("second"))
	require.NoError(t, err)
	b2, err := server.AcceptStream()
	require.NoError(t, err)
	got := make([]byte, 6)
	_, err = io.ReadFull(b2, got)
	require.NoError(t, err)
	require.Equal(t, "second", string(got))

	// A ping of the server's: its pong comes as a frame.
	_, err = server.Ping()
	require.NoError(t, err)

	// 1 MiB from the server: four windows, their updates read by
	// whoever holds the turn.
	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := b2.Write(payload)
		wrote <- err
	}()
	recv := make([]byte, len(payload))
	_, err = io.ReadFull(a2, recv)
	require.NoError(t, err)
	require.True(t, bytes.Equal(payload, recv), "the transfer's bytes")
	require.NoError(t, errWithin(t, wrote, "the transfer's Write"))

	// And the held Read still gets its own data.
	a := client.streams[b.ID()]
	require.NotNil(t, a)
	_, err = a.Write([]byte("held-end"))
	require.NoError(t, err)
	require.NoError(t, errWithin(t, held, "the held Read"))
}

// TestReadTurnLargeFramesGoToTheReadLoop: a Read that holds the turn
// when a frame larger than takerMaxFrame comes gives the turn back, and
// the read loop reads the frame straight into the Read's lent buffer
// (BytesLent); large messages arrive whole and in order, and the stream's
// end after them.
func TestReadTurnLargeFramesGoToTheReadLoop(t *testing.T) {
	_, server, a, b := turnStreamPair(t)
	msg := make([]byte, 256<<10)
	for i := range msg {
		msg[i] = byte(i % 251)
	}
	const messages = 8
	got := make([]byte, len(msg)*messages)
	read := make(chan error, 1)
	go func() { _, err := io.ReadFull(b, got); read <- err }()
	awaitTaker(t, server, b) // before a byte is written
	lent := server.Stats().BytesLent
	for range messages {
		_, err := a.Write(msg)
		require.NoError(t, err)
	}
	require.NoError(t, a.CloseWrite())
	require.NoError(t, errWithin(t, read, "the Read of the messages"))
	for i := range messages {
		require.True(t, bytes.Equal(msg, got[i*len(msg):(i+1)*len(msg)]), "message %d", i)
	}
	require.Greater(t, server.Stats().BytesLent-lent, uint64(takerMaxFrame), "bytes the read loop read into the lent buffer")
	_, err := b.Read(got)
	require.ErrorIs(t, err, io.EOF)
	require.Nil(t, server.turn.holder.Load())
}

// rawPeerTaker makes a braid server at two P beside a raw peer, which
// opens stream 1 with a byte that braid reads; then a Read of n bytes on
// stream 1 waits, holding the conn turn, and its error comes on read.
func rawPeerTaker(t *testing.T, n int) (p *rawPeer, s *Session, read <-chan error) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	p, s = quirkPeer(t, nil, false)
	require.True(t, s.turn.on)
	p.send(header{typ: typeData, flags: flagSYN, streamID: 1, length: 1}, []byte("a"))
	st := acceptID(t, s, 1)
	got := make([]byte, 1)
	_, err := io.ReadFull(st, got)
	require.NoError(t, err)
	read = readInBackground(st, n)
	awaitTaker(t, s, st)
	return p, s, read
}

// TestReadTurnProtocolErrorFromATaker: a frame that breaks the protocol,
// read by a Read holding the turn, ends the session as the read loop's
// own reading of it does: a go-away with the protocol-error code, and the
// Read fails with an error that does not match io.EOF.
func TestReadTurnProtocolErrorFromATaker(t *testing.T) {
	p, s, read := rawPeerTaker(t, 8)
	p.send(header{typ: typeData, flags: flagSYN, streamID: 2, length: 1}, []byte("x")) // the client opens an even id: wrong parity
	err := errWithin(t, read, "the Read holding the turn")
	require.Error(t, err)
	require.NotErrorIs(t, err, io.EOF)
	p.await("go-away", 1, func(f rawFrame) bool { return f.typ == typeGoAway && f.length == GoAwayProtocolError })
	require.ErrorIs(t, s.Err(), ErrProtocol)
}

// TestReadTurnGoesBackWhenFree: once a taker has its data and nobody else
// waits, the turn is free; a frame nobody waits for (the peer's ping) is
// still answered, by the read loop once it takes the turn back.
func TestReadTurnGoesBackWhenFree(t *testing.T) {
	p, s, read := rawPeerTaker(t, 1)
	p.send(header{typ: typeData, streamID: 1, length: 1}, []byte("b"))
	require.NoError(t, errWithin(t, read, "the Read holding the turn"))
	require.Nil(t, s.turn.holder.Load())
	p.ping(0xB0B) // awaits the pong
}

// TestReadTurnPeerHangsUp: the peer's conn ends while a Read holds the
// turn: the Read fails with an error of the session's end, never io.EOF,
// and the session closes.
func TestReadTurnPeerHangsUp(t *testing.T) {
	p, s, read := rawPeerTaker(t, 8)
	require.NoError(t, p.conn.Close())
	err := errWithin(t, read, "the Read holding the turn")
	require.ErrorIs(t, err, ErrStreamReset)
	require.NotErrorIs(t, err, io.EOF)
	select {
	case <-s.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("the session did not close")
	}
}

// TestReadTurnManyWaitingReads: with a Read waiting on each of many
// streams, one holds the turn and the others want it; messages to each in
// turn reach each, whoever reads them, and the turn goes round.
func TestReadTurnManyWaitingReads(t *testing.T) {
	client, server, _, _ := turnStreamPair(t)
	const streams = 50
	outs := make([]*Stream, streams)
	reads := make([]<-chan error, streams)
	for i := range outs {
		a, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		_, err = a.Write([]byte{byte(i)})
		require.NoError(t, err)
		b, err := server.AcceptStream()
		require.NoError(t, err)
		first := make([]byte, 1)
		_, err = io.ReadFull(b, first)
		require.NoError(t, err)
		require.Equal(t, byte(i), first[0])
		outs[i] = a
		reads[i] = readExactly(b, []byte{byte(i), 'x'})
	}
	for i, a := range outs {
		_, err := a.Write([]byte{byte(i), 'x'})
		require.NoError(t, err)
		require.NoError(t, errWithin(t, reads[i], "a waiting Read"))
	}
	require.NotZero(t, server.turn.taken.Load(), "frames the server's Reads read")
}

// readExactly starts a ReadFull of len(want) bytes on st, and sends nil if
// they are want, else the error.
func readExactly(st *Stream, want []byte) <-chan error {
	errc := make(chan error, 1)
	go func() {
		got := make([]byte, len(want))
		if _, err := io.ReadFull(st, got); err != nil {
			errc <- err
			return
		}
		if !bytes.Equal(got, want) {
			errc <- errors.New("read " + string(got) + ", want " + string(want))
			return
		}
		errc <- nil
	}()
	return errc
}

// TestReadTurnHostPingPong: request-response on a session with an
// AcceptStream waiting on both sides, as in every go-libp2p host. A
// taker's release leaves the turn free rather than waking the read loop
// for the AcceptStream (releaseTurn), so the read loop lends the turn far
// less often than once a round trip: only when its loan ran out
// (turnLoan) or a stream ended. Waking it at every release lent the turn
// once or more a round trip. A new stream opened afterwards is still
// accepted, and every byte arrives in order.
func TestReadTurnHostPingPong(t *testing.T) {
	client, server, a, b := turnStreamPair(t)
	accepted := make(chan *Stream, 2)
	for _, s := range []*Session{client, server} {
		go func() {
			st, err := s.AcceptStream()
			if err == nil {
				accepted <- st
			}
		}()
	}
	require.Eventually(t, func() bool { return client.turn.accepts.Load() == 1 && server.turn.accepts.Load() == 1 },
		5*time.Second, 100*time.Microsecond, "an AcceptStream waiting on each side")
	echoed := make(chan error, 1)
	go func() { echoed <- echoMessages(b, 64) }()
	const rounds = 800
	loans0 := client.turn.loans.Load() + server.turn.loans.Load()
	start := time.Now()
	pingRoundTrips(t, a, rounds, 64)
	elapsed := time.Since(start)
	loans := client.turn.loans.Load() + server.turn.loans.Load() - loans0
	// Both sides together. Waking the read loop at every release made
	// 44-78 loans in 400 round trips (10-12 ms); leaving the turn free,
	// 2-4: a loan runs out at most once a turnLoan on each side.
	bound := uint64(rounds/40) + 2*uint64(elapsed/turnLoan) + 4
	require.Less(t, loans, bound, "loans in %d round trips (%v)", rounds, elapsed)
	require.NotZero(t, client.turn.taken.Load(), "frames the client's Reads read")
	require.NotZero(t, server.turn.taken.Load(), "frames the server's Reads read")

	c, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	_, err = c.Write([]byte("new"))
	require.NoError(t, err)
	select {
	case st := <-accepted:
		require.NoError(t, <-readExactly(st, []byte("new")))
	case <-time.After(5 * time.Second):
		t.Fatal("the new stream was not accepted")
	}
	require.NoError(t, a.CloseWrite())
	require.NoError(t, errWithin(t, echoed, "the echo"))
}

// TestReadTurnOwedPaidAtStreamEnd: a stream that owes the read loop a
// call (its Read left the turn free while an AcceptStream waited) pays it
// when it ends, by CloseRead, CloseWrite or Reset: its Read won't come
// back for the turn, and a SYN must not wait for the loan to run out.
// Another stream's end does not pay it.
func TestReadTurnOwedPaidAtStreamEnd(t *testing.T) {
	ends := map[string]func(*Stream) error{
		"CloseRead":  (*Stream).CloseRead,
		"CloseWrite": (*Stream).CloseWrite,
		"Close":      (*Stream).Close,
		"Reset":      (*Stream).Reset,
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			client, server, _, b := turnStreamPair(t)
			other, err := client.OpenStream(context.Background())
			require.NoError(t, err)
			_, err = other.Write([]byte{0})
			require.NoError(t, err)
			o, err := server.AcceptStream()
			require.NoError(t, err)
			// No Read waits: the read loop keeps the turn, and a
			// call back stays in its channel to be seen.
			tr := &server.turn
			tr.owed.Store(b)
			require.NoError(t, end(o))
			require.Same(t, b, tr.owed.Load(), "another stream's end")
			require.Empty(t, tr.back)
			require.NoError(t, end(b))
			require.Nil(t, tr.owed.Load())
			require.Len(t, tr.back, 1, "the read loop called back")
		})
	}
}

// TestReadTurnWithReadDeadline: a Read with a read deadline pending takes
// the turn too (go-libp2p's protocols set one around their reads), and
// still returns at its deadline: the deadline's timer cuts its conn read.
func TestReadTurnWithReadDeadline(t *testing.T) {
	_, server, a, b := turnStreamPair(t)
	require.NoError(t, b.SetReadDeadline(time.Now().Add(time.Minute)))
	require.NoError(t, a.SetReadDeadline(time.Now().Add(time.Minute)))
	echoed := make(chan error, 1)
	go func() { echoed <- echoMessages(b, 64) }()
	pingRoundTrips(t, a, 200, 64)
	require.NotZero(t, server.turn.taken.Load(), "frames the server's Reads read")

	require.NoError(t, b.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	err := errWithin(t, echoed, "the echo's Read at its deadline")
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NotErrorIs(t, err, io.EOF)
}
