package braid

import "net"

// Whole segments under TLS (recordCork).
//
// crypto/tls makes every record of a Write a system call of its own, and
// on a TCP socket with TCP_NODELAY (Go's default) each goes out as a
// segment of its own: a 64 KiB frame is four segments, each a trip through
// both ends' network stacks, where a raw TLS conn whose receiver lags
// sends the same records merged into segments of up to the MSS (the
// kernel appends to a segment it could not send yet). On the 2-core AMD
// EPYC VM of session 11, one-stream TLS bulk sent 55,001 data segments
// for 655 MB (braid) against 13,584 (raw TLS), and each write system call
// cost twice raw's: the kernel's per-segment work, not the bytes.
//
// Only at one P (session 12, Intel VM, 4 interleaved rounds): there the
// two ends take turns on one core, and merged records save the kernel's
// per-segment work and nothing else (TLS bulk 1,717 against 1,595 MB/s
// uncorked, 64 KiB notifications 29.2k against 27.3k). With more than one
// P the peer decrypts a record while this side encrypts the next, and
// holding records back until the batch is written cost that overlap:
// bulk 1,358 against 2,019 MB/s, 64 KiB notifications 25.0k against 35.3k,
// the ping beside bulk p50 130 against 100 µs. There the conn gets
// TCP_NOTSENT_LOWAT as plain TCP does. (On session 11's AMD VM the cork
// had helped at two P too; the trade is recorded in docs/design.md.)
//
// So on a conn without writev whose security layer exposes the TCP
// socket under it (tls.Conn.NetConn), the writer corks the socket
// (TCP_CORK) around a batch of by-reference frames that spans two records
// or more, and uncorks it when the batch is written: the records leave as
// full segments, and the uncork sends the rest at once, so nothing waits
// past the batch's own write. The cost is two setsockopt calls a corked
// batch, against its four or more record writes. Batches of copied
// (small) frames are left as they are: they measured no better corked
// (100 x 64 B over TLS, 7 % fewer messages, within noise). Such a conn gets no TCP_NOTSENT_LOWAT:
// with the low-water mark, a corked partial segment of more than the mark
// that the receiver's window held back kept the socket from ever turning
// writable, until the cork's 200 ms ceiling (256 KiB notifications at one
// P: 0.43 s a run against 0.20). The in-flight bound (inflight.go) bounds
// what the kernel holds there instead, as it does over noise.

// recordCork is the TCP socket under a conn without writev, corked around
// the writer's batches; the zero value (no socket reached) does nothing.
// It belongs to run, which alone writes batches of by-reference frames on
// such a conn.
type recordCork struct {
	setCork func(on bool) bool // nil: no socket; see tcpSocket.corker
}

// newRecordCork returns the cork of conn: the TCP socket under it when
// conn is a security layer over TCP (it has a NetConn method), not a TCP
// conn itself (that one has writev, and its batches are one system call).
func newRecordCork(conn net.Conn) recordCork {
	if _, ok := conn.(interface{ NetConn() net.Conn }); !ok {
		return recordCork{}
	}
	return recordCork{setCork: socketUnder(conn).corker()}
}

// active tells whether the cork reaches a socket.
func (k recordCork) active() bool { return k.setCork != nil }

// worth tells whether a batch of n bytes, with refs by-reference frames,
// is corked: by-reference frames spanning two records or more.
func (k recordCork) worth(n, refs int) bool {
	return k.active() && refs > 0 && n >= 2*recordSize
}

// set corks (on) or uncorks the socket; it reports whether it did. It
// does not allocate (TestRecordCorkAllocates).
func (k recordCork) set(on bool) bool { return k.setCork(on) }
