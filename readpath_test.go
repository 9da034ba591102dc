package braid

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Tests of the receive path (readbuf.go, lend.go, mux.go's
// readPayload): each one failed before the fix it names.

// emptyReadConn passes reads through until after bytes have been read,
// then returns (0, nil) to every Read, as a broken conn may, until it is
// closed.
type emptyReadConn struct {
	net.Conn
	after int

	mu     sync.Mutex
	read   int
	empty  int // reads answered with (0, nil)
	closed bool
}

func (c *emptyReadConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	if c.read >= c.after {
		c.empty++
		c.mu.Unlock()
		return 0, nil
	}
	want := min(len(p), c.after-c.read)
	c.mu.Unlock()
	n, err := c.Conn.Read(p[:want])
	c.mu.Lock()
	c.read += n
	c.mu.Unlock()
	return n, err
}

func (c *emptyReadConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

// TestEmptyReadsInLargePayloadEndSession: a conn that keeps answering
// reads with neither bytes nor an error while the read loop reads a large
// payload's rest straight into its buffer (readBuffer.Read, the path of a
// payload of readBufferSize or more) ends the session with
// io.ErrNoProgress after maxEmptyReads, as it does everywhere else the
// read loop reads (fill, readLent). It spun in io.ReadFull for ever, the
// session never ended, and the conn saw millions of reads.
func TestEmptyReadsInLargePayloadEndSession(t *testing.T) {
	c1, c2 := net.Pipe()
	// The SYN and the data frame's header come; the payload never does.
	broken := &emptyReadConn{Conn: c2, after: 2 * headerSize}
	p, s := newRawPeerOver(t, c1, broken, &Config{DisableKeepAlive: true}, false)
	go func() {
		// net.Pipe: a write waits for braid's reads; what braid
		// never reads is released by the cleanup's close.
		b := syn(1).appendTo(nil)
		b = header{typ: typeData, streamID: 1, length: 64 * 1024}.appendTo(b)
		_, _ = p.conn.Write(b)
	}()
	select {
	case <-s.CloseChan():
	case <-time.After(2 * time.Second):
		broken.mu.Lock()
		empty := broken.empty
		broken.mu.Unlock()
		t.Fatalf("the session still reads after %d empty reads", empty)
	}
	require.ErrorIs(t, s.Err(), io.ErrNoProgress)
	require.ErrorIs(t, s.Err(), ErrSessionClosed)
}

// TestDrainedStreamKeepsNoChunkArray: a stream whose reader lagged behind
// a window's worth of small frames (each payload a chunk of its own) keeps
// no chunk array over maxKeptChunks once it has read them all: an idle
// stream holds no large index of payloads it no longer has. It kept the
// array for the stream's life, 48 bytes a frame (here 341 entries; 786 KB
// for a 16 MiB window of 1 KiB frames), on every stream that once had a
// backlog.
func TestDrainedStreamKeepsNoChunkArray(t *testing.T) {
	p, s := newRawPeer(t, nil, false)
	p.startReading()
	p.send(syn(1), nil)
	st := acceptID(t, s, 1)
	const size = maxSmallPayload + 1 // a pooled chunk each
	frames := InitialStreamWindow / size
	var wire []byte
	for i := range frames {
		h := header{typ: typeData, streamID: 1, length: size}
		wire = append(h.appendTo(wire), pattern(size)[:size]...)
		wire[len(wire)-1] = byte(i)
	}
	p.sendRaw(wire)
	require.Eventually(t, func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.recv.size == frames*size
	}, 5*time.Second, time.Millisecond, "the frames buffered")
	buf := make([]byte, size)
	for i := range frames {
		_, err := io.ReadFull(st, buf)
		require.NoError(t, err)
		require.Equal(t, byte(i), buf[size-1], "frame %d in order", i)
	}
	st.mu.Lock()
	chunks := cap(st.recv.chunks)
	st.mu.Unlock()
	require.LessOrEqual(t, chunks, maxKeptChunks, "chunk array capacity kept by a drained stream (of %d frames)", frames)
}
