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
// At one P (session 12, Intel VM, 4 interleaved rounds) the two ends take
// turns on one core, and merged records save the kernel's per-segment work
// and nothing else (TLS bulk 1,717 against 1,595 MB/s uncorked, 64 KiB
// notifications 29.2k against 27.3k). With more than one P the peer
// decrypts a record while this side encrypts the next, and a cork put on
// and taken off around each batch cost that overlap (session 12: bulk 1,358
// against 2,019 MB/s, 64 KiB notifications 25.0k against 35.3k, the ping
// beside bulk p50 130 against 100 µs). Held across batches (session 19,
// below) it costs none while bulk goes alone, and at two P the writer is
// the busy end of such a flow over TLS, its time mostly the kernel's (`go
// run ./bench/cmd/writecost`, session 47: a 16 KiB record's write(2) 8.5
// µs, corked 6.9, four records in one write 6.6 each; sealing one 3.0).
// Session 47, the AMD EPYC VM under PVM, paired against the code before
// (benchpairs, the build run first alternating): 256 KiB TLS notifications
// x1.126 and x1.143, 64 KiB x1.107 and x1.076 (14 of 16 and 10 of 12
// pairs), one-stream TLS bulk x1.092 and x1.076, both ways x1.05, ten bulk
// streams x1.098 (8 of 8), data segments per 64 KiB message 1.7 against
// 5.5; the pings beside one or ten bulk streams, the spaced and sparse
// pings and 100 x 64 B x0.90-1.02, the cork never set there (54 setsockopt
// calls in a run of both pings beside bulk, as before), and at one P, where
// the code is the same, x0.97-0.98. So with more than one P the writer
// corks bulk that goes alone only (writer.bulkOnlyLocked): lone budgets,
// and no small frame of another stream for loneQuiet; a batch with a small
// frame in it is never corked. Corking every batch, as at one P, put the
// ping beside ten bulk streams at p50 x1.54 (session 46): its frames waited
// in the held segment.
//
// The low-water mark stays at two P while the cork is off (the ping
// beside bulk keeps its bound) and is off while it is on (the cork
// clears TCP_NOTSENT_LOWAT before it corks and sets it again after it
// uncorks, tcpSocket.corker). With a mark beside the cork the writer
// waited out the cork's 200 ms now and then, in the conn write with a
// partial segment held and every byte sent acknowledged (session 47's
// trace, `ss -tin`): with the mark at notSentLowat plus the MSS, once
// or twice, 64 KiB notifications measured x0.17-0.41 and one-stream
// bulk x0.66; session 46 saw it at notSentLowat. While corked, the
// in-flight bound (inflight.go) bounds what the kernel holds, as at one
// P.
//
// So on a conn without writev whose security layer exposes the TCP socket
// under it (tls.Conn.NetConn), the writer corks the socket (TCP_CORK) for a
// batch of by-reference frames that spans two records or more, one stream's
// or several's (below; with more than one P only while bulk goes alone,
// above): the records leave as full segments. It keeps the cork on while
// such batches come back to back (writer.corked), so that the partial
// segment one batch leaves is filled by the next, and takes it off once a
// batch is not worth a cork (control or copied frames: they leave at once)
// and before it parks, waits for CoalesceDelay or stops (writer.uncork):
// nothing waits past the writer's last write before it has nothing to do.
// While the cork is on no inline write starts (it counts as writing).
// Uncorked after every batch (sessions 12-18), each 64 KiB frame left as a
// full segment and a short one, two trips through the network stacks, and
// two setsockopt calls a frame: a trace at one P put 3.4 µs on the uncork's
// call alone, which sent the short segment. Held across batches (session
// 19; paired runs at GOMAXPROCS 1 over TLS, against uncorking each batch):
// one-stream bulk x1.17 (9 of 10 pairs) and x1.08, 64 KiB notifications
// x1.16 (8 of 8), 256 KiB x0.99 (4 of 8), the ping beside 10 bulk streams
// p50 x0.93 and p99 x0.95 with their bulk x1.08 (6 of 6), beside one p50
// x0.94, p99 x0.87, bulk x1.07; TestRecordCorkWholeSegments counts 44-46
// segments for 128 records where uncorking each batch sent 72-85. Batches
// of copied (small) frames are left as they are: they measured no better
// corked (100 x 64 B over TLS, 7 % fewer messages, within noise).
//
// A stream that sends alone is corked too (session 39). From session 26
// to 38 it was not: on the AMD EPYC VM under PVM, with BBR as its
// congestion control, which paces inside TCP on loopback, the cork made
// one-stream TLS bulk at one P bimodal, runs at 1,010-1,090 MB/s and
// runs at 560-790 in the same minutes, BBR pacing each corked segment
// with a timer interrupt in the slow ones, and uncorked it ran at
// 930-1,030 then. Session 39 found what sets the mode (serialRamp in
// inflight.go): BBR paces a connection once it has left its start-up,
// which it does after round trips in which the kernel had more to send
// than the windows let out. Uncorked, a lone stream's 16 KiB records
// are a segment each, and its budgets' segments outnumber the
// congestion window: every run left start-up, paced throughout. Corked,
// its segments are 64 KiB and fit, once the session's first bytes have
// gone with one budget (serialRamp): 3 of 3 runs stayed in start-up,
// and in paired runs at GOMAXPROCS 1 over TLS, against the code before,
// one-stream bulk measured x1.096 (10 of 10 pairs), 64 KiB
// notifications x1.073 and x1.080 (15 of 16), 256 KiB x0.979 and x1.022,
// a request every 10 ms beside a transfer p50 x0.84 and the transfer
// x1.18, the pings beside one or 10 bulk streams within x0.99-1.04;
// the cork alone, without the ramp, x0.882 (bimodal, as in session 26).
// TestRecordCorkWholeSegments counts 42-46 segments for a lone stream's
// 128 records, where uncorked it sent 95-135.
//
// At one P such a conn gets no TCP_NOTSENT_LOWAT at all: with the
// low-water mark, a corked partial segment of more than the mark that the
// receiver's window held back kept the socket from ever turning writable,
// until the cork's 200 ms ceiling (256 KiB notifications at one P: 0.43 s
// a run against 0.20). The in-flight bound (inflight.go) bounds what the
// kernel holds there instead, as it does over noise.

// recordCork is the TCP socket under a conn without writev, corked while
// the writer's batches of by-reference frames come back to back; the zero
// value (no socket reached) does nothing. It belongs to run, which alone
// writes batches of by-reference frames on such a conn.
type recordCork struct {
	setCork func(on bool) bool // nil: no socket; see tcpSocket.corker
}

// newRecordCork returns the cork of conn: the TCP socket under it when
// conn is a security layer over TCP (it has a NetConn method), not a TCP
// conn itself (that one has writev, and its batches are one system call).
// With more than one P (parallel) the socket keeps notSentLowat as its
// TCP_NOTSENT_LOWAT while uncorked, and has none while corked (see the
// comment above).
func newRecordCork(conn net.Conn, parallel bool) recordCork {
	if _, ok := conn.(interface{ NetConn() net.Conn }); !ok {
		return recordCork{}
	}
	mark := 0
	if parallel {
		mark = notSentLowat
	}
	return recordCork{setCork: socketUnder(conn).corker(mark)}
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
