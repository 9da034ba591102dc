package braid

import (
	"io"
	"sync/atomic"
	"time"

	pool "github.com/libp2p/go-buffer-pool"
)

const (
	// readBufferSize is the session's read buffer while frames flow:
	// large enough that one system call brings in many small frames, and
	// that a 64 KiB payload bypasses it (it is read straight into its own
	// buffer).
	readBufferSize = 32 * 1024
	// smallReadSize is the buffer an idle session waits in: room for
	// pings, pongs, window updates and a small message, inside the
	// session, so that waiting costs no pooled buffer. A read that fills
	// it (more is coming), or any read during a bulk flow, takes
	// readBufferSize from the pool.
	smallReadSize = 512
	// quietRead: a read that brought less than this left the conn
	// empty, and the flow is not a bulk one (whose reads bring tens of
	// KiB): once it is consumed, the large buffer goes back to the pool.
	// A bulk flow keeps its buffer between frames, and pays no small
	// read per frame.
	quietRead = readBufferSize / 4
	// bulkGrace: a quiet read less than this after the last large one is
	// a pause inside a bulk flow, not the end of it: the buffer stays.
	bulkGrace = time.Millisecond
	// maxEmptyReads bounds reads that return nothing and no error (a
	// broken conn), as bufio does.
	maxEmptyReads = 100
)

// readBuffer is the read loop's buffered reader. It holds a pooled
// readBufferSize buffer only while frames flow: once everything read is
// consumed and the last read was quiet (less than quietRead: the conn had
// nothing more at that moment) and no large read came within bulkGrace (no
// bulk flow is running), the buffer goes back to the pool and the next
// read, which may block, waits in the small buffer. After a bulk flow the
// buffer is held until the next quiet read, such as a keep-alive's. A
// read that fills the small buffer takes the large one again. A burst
// costs one small read before the large ones, and an idle session holds
// 512 bytes instead of 32 KiB. A stream's end (FIN or RST, flowEnded)
// ends its flow too: once what is buffered is consumed, the buffer goes
// back whatever the last read brought, so that a session that goes idle
// after a bulk transfer does not wait in 32 KiB (the last reads of a
// transfer are large ones, and the closing frames come within bulkGrace).
// A bulk flow whose stream stays open keeps the buffer until the next
// quiet read: a keep-alive's ping or pong, within KeepAliveInterval. Not
// safe for concurrent use: only the read loop uses it.
type readBuffer struct {
	conn     io.Reader
	cutter   *readCutter   // interrupts reads for a lent buffer (lend.go); nil if the conn can't lend
	vec      *vectorReader // reads a payload's rest and what follows it at once (readv_linux.go); nil if the conn can't
	small    [smallReadSize]byte
	big      []byte    // from the pool while held; nil otherwise
	buf      []byte    // small[:] or big
	r, w     int       // buf[r:w] is read and not consumed
	lastRead int       // bytes the last read brought
	lastBulk time.Time // when a read last brought quietRead or more
	ended    bool      // a stream ended since the buffer was last drained
	err      error     // the conn's error, returned once the buffer is consumed
	// got counts the bytes every read of the conn brings, as they come;
	// the read loop adds, anyone may load it: the keep-alive's sign that
	// the peer is alive in the middle of a frame whose payload takes
	// longer than its wait to arrive (Session.keepAliveTick).
	got atomic.Uint64
	// parked is the read waker's flag (readwake.go), set while the read
	// loop (or a Read holding the conn turn, turn.go) waits in a conn
	// read of its own (not into a lent buffer); nil where the session has
	// no waker, so that no read pays for it. Set before the read loop
	// starts; the turn's holder stores, the waker loads. A waker's cut of
	// a Read's read makes it look at its stream and read again.
	parked *atomic.Bool
	// yieldCut, set around a header read by whoever holds the conn turn
	// (turn.go), tells whether a cut of that read ends it with
	// errTurnYield rather than reading again: never, when a Read wants
	// the turn (turnWant, the read loop's), or always (a taker's).
	yieldCut yieldRule
	turnWant *atomic.Int32 // the session's turn.want; nil where the turn is off
}

// yieldRule is readBuffer.yieldCut.
type yieldRule uint8

const (
	yieldNever  yieldRule = iota
	yieldWanted           // when a Read wants the turn
	yieldAlways
)

// yields tells whether a cut ends the read under the rule.
func (b *readBuffer) yields() bool {
	switch b.yieldCut {
	case yieldWanted:
		return b.turnWant != nil && b.turnWant.Load() > 0
	case yieldAlways:
		return true
	}
	return false
}

func newReadBuffer(conn io.Reader, cutter *readCutter, vec *vectorReader) *readBuffer {
	b := &readBuffer{conn: conn, cutter: cutter, vec: vec}
	b.buf = b.small[:]
	return b
}

// buffered returns the bytes read and not consumed.
func (b *readBuffer) buffered() int { return b.w - b.r }

// useBig moves what is buffered into a pooled large buffer.
func (b *readBuffer) useBig() {
	big := pool.Get(readBufferSize)
	b.w = copy(big, b.buf[b.r:b.w])
	b.r = 0
	b.big, b.buf = big, big
}

// settle returns the large buffer once it is consumed and either a
// stream ended or the last read was quiet, and not within bulkGrace of a
// large one; or moves buffered bytes to the front.
func (b *readBuffer) settle() {
	if b.r < b.w {
		if b.r > 0 {
			b.w = copy(b.buf, b.buf[b.r:b.w])
			b.r = 0
		}
		return
	}
	b.r, b.w = 0, 0
	if b.ended {
		// The flow that brought the large reads may be over: the next
		// read waits in the small buffer, and a flow still running
		// takes the large one again when that read fills it.
		b.ended = false
		b.lastRead, b.lastBulk = 0, time.Time{}
	} else if b.lastRead >= quietRead || b.bulkFlowing() {
		return
	}
	if b.big != nil {
		pool.Put(b.big)
		b.big, b.buf = nil, b.small[:]
	}
}

// flowEnded records that a stream ended (the read loop read its FIN or
// RST): the large buffer goes back once what is buffered is consumed.
func (b *readBuffer) flowEnded() { b.ended = true }

// bulkFlowing reports whether a large read came within bulkGrace.
func (b *readBuffer) bulkFlowing() bool {
	return !b.lastBulk.IsZero() && time.Since(b.lastBulk) <= bulkGrace
}

// noteRead records a read of n bytes, counted in got; a large one is
// timed (one clock read per large read, none per small one).
func (b *readBuffer) noteRead(n int) {
	b.lastRead = n
	if n > 0 {
		b.got.Add(uint64(n))
	}
	if n >= quietRead {
		b.lastBulk = time.Now()
	}
}

// fill reads until at least need bytes are buffered (need <=
// readBufferSize), or the conn fails.
func (b *readBuffer) fill(need int) error {
	for empty := 0; b.buffered() < need; {
		if b.err != nil {
			return b.err
		}
		b.settle()
		if b.big == nil && (need > len(b.small) || b.lastRead == len(b.small) || b.bulkFlowing()) {
			b.useBig()
		}
		n, err := b.connRead(b.buf[b.w:], nil, false)
		if err == errTurnYield {
			return err // not the conn's error: nothing was read
		}
		b.w += n
		b.took(n, err, &empty)
	}
	return nil
}

// Peek returns the next n bytes without consuming them; they are valid
// until the next call. Fewer than n come with the error that cut them.
func (b *readBuffer) Peek(n int) ([]byte, error) {
	if err := b.fill(n); err != nil {
		return b.buf[b.r:b.w], err
	}
	return b.buf[b.r : b.r+n], nil
}

// Discard skips the next n bytes.
func (b *readBuffer) Discard(n int) (int, error) {
	done := 0
	for done < n {
		if b.buffered() == 0 {
			if err := b.fill(1); err != nil {
				return done, err
			}
		}
		k := min(n-done, b.buffered())
		b.r += k
		done += k
	}
	return done, nil
}

// ReadByte returns the next byte.
func (b *readBuffer) ReadByte() (byte, error) {
	if err := b.fill(1); err != nil {
		return 0, err
	}
	c := b.buf[b.r]
	b.r++
	return c, nil
}

// Read reads into p: what is buffered, else one read of the conn, straight
// into p when p is at least a large buffer's size.
func (b *readBuffer) Read(p []byte) (int, error) { return b.read(p, readBufferSize) }

// readPayload fills p with bytes a frame header announced (the rest of a
// payload): what is buffered, then reads of the conn straight into p
// whatever its size, where Read would read a p under readBufferSize
// through the buffer, a copy. The bytes after p still come into the
// buffer in the same read on a vector reader. It returns the conn's error
// (io.EOF included) if the conn ends first.
func (b *readBuffer) readPayload(p []byte) error {
	for n := 0; n < len(p); {
		m, err := b.read(p[n:], 1)
		if err != nil {
			return err
		}
		n += m
	}
	return nil
}

// read is Read, straight into p when p has at least direct bytes.
func (b *readBuffer) read(p []byte, direct int) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.buffered() == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.settle()
		if len(p) >= direct {
			// Reads with neither bytes nor an error are counted here
			// too (took): returned as (0, nil), they made the caller,
			// io.ReadFull, read again for ever on a broken conn.
			for empty := 0; ; {
				n, total, err := b.connReadPast(p, false)
				b.took(total, err, &empty)
				if n > 0 {
					return n, nil // an error waits in b.err for the next call
				}
				if b.err != nil {
					return 0, b.err
				}
			}
		}
		if b.big == nil && len(p) > len(b.small) {
			b.useBig() // a payload larger than the small buffer is coming
		}
		if err := b.fill(1); err != nil {
			return 0, err
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}

// took records a conn read of fill's or readLent's loop that brought n
// bytes: its error becomes the buffer's, and too many reads in a row
// (empty counts them) with neither bytes nor an error are
// io.ErrNoProgress.
func (b *readBuffer) took(n int, err error, empty *int) {
	b.noteRead(n)
	switch {
	case err != nil:
		b.err = err
	case n == 0:
		if *empty++; *empty >= maxEmptyReads {
			b.err = io.ErrNoProgress
		}
	}
}

// connRead is one read of the conn into p, and when tail is not empty
// (only with a vector reader), on into tail in the same system call; it
// returns the bytes it brought in all. A cut's timeout (lend.go) is not
// the conn's error: the read is retried, or with lent, ends with
// errLendCut and what it brought, or where yieldCut says so, ends with
// errTurnYield (turn.go).
func (b *readBuffer) connRead(p, tail []byte, lent bool) (int, error) {
	for {
		var n int
		var err error
		if len(tail) > 0 {
			n, err = b.vec.read(p, tail)
		} else {
			tell := !lent && b.parked != nil
			if tell {
				b.parked.Store(true)
			}
			n, err = b.conn.Read(p)
			if tell {
				b.parked.Store(false)
			}
		}
		if err == nil || b.cutter == nil || !b.cutter.cleared(err) {
			return n, err
		}
		if lent {
			return n, errLendCut
		}
		if n > 0 {
			return n, nil
		}
		if b.yields() {
			return 0, errTurnYield
		}
	}
}

// connReadPast is connRead into p (the rest of a payload, nothing
// buffered), and with a vector reader on into the read buffer: what
// follows the payload on the conn is buffered as fill would buffer it.
// It returns the bytes put in p and the bytes the read brought in all.
func (b *readBuffer) connReadPast(p []byte, lent bool) (inP, total int, err error) {
	var tail []byte
	if b.vec != nil {
		if b.big == nil {
			b.useBig()
		}
		tail = b.buf[b.w:]
	}
	total, err = b.connRead(p, tail, lent)
	inP = min(total, len(p))
	b.w += total - inP
	return inP, total, err
}

// readLent fills p, a Read's lent buffer: with what is buffered, then
// straight from the conn. A cut ends it early with errLendCut; a conn's
// error with that error. It returns the bytes put in p.
func (b *readBuffer) readLent(p []byte) (int, error) {
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	for empty := 0; n < len(p); {
		if b.err != nil {
			return n, b.err
		}
		b.settle()
		m, total, err := b.connReadPast(p[n:], true)
		n += m
		if err == errLendCut {
			b.noteRead(total)
			return n, err
		}
		b.took(total, err, &empty)
	}
	return n, nil
}

// minHandOff is the least of a large buffer's capacity that what is
// buffered must fill for handOff to give the buffer away rather than have
// it copied: a pool Get and Put cost about as much as a copy of a few KiB,
// and a stream that holds the buffer unread holds at most this share of it
// as payload.
const minHandOff = readBufferSize / 2

// handOff gives away the large buffer when it holds at least minHandOff
// bytes, all of them within the next max bytes (a frame's payload, so
// nothing after the payload has to be moved): it returns those bytes in
// the pooled buffer that holds them, which the caller owns now, and the
// reader goes on in a new buffer. Otherwise it returns an empty chunk.
func (b *readBuffer) handOff(max int) recvChunk {
	n := b.buffered()
	if b.big == nil || n < minHandOff || n > max {
		return recvChunk{}
	}
	c := recvChunk{data: b.big[b.r:b.w], base: b.big}
	b.big, b.buf = nil, b.small[:]
	b.r, b.w = 0, 0
	return c
}

// release returns the large buffer, if held; the read loop calls it when
// it ends.
func (b *readBuffer) release() {
	if b.big != nil {
		pool.Put(b.big)
		b.big, b.buf = nil, b.small[:]
		b.r, b.w = 0, 0
	}
}
