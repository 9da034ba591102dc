package braid

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// tcpInfoDataSegsOut is the offset of tcpi_data_segs_out (a __u32) in
// struct tcp_info (linux/tcp.h, Linux 4.6 and later).
const tcpInfoDataSegsOut = 156

// dataSegmentsOut is the count of data segments c's socket has sent
// (tcp_info, which no syscall wrapper reads).
func dataSegmentsOut(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	require.NoError(t, err)
	var info [512]byte
	n := uint32(len(info))
	var errno syscall.Errno
	require.NoError(t, raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&n)), 0)
	}))
	require.Zero(t, errno, "getsockopt TCP_INFO")
	require.GreaterOrEqual(t, int(n), tcpInfoDataSegsOut+4, "tcp_info without tcpi_data_segs_out (Linux 4.6 and later)")
	return int(binary.NativeEndian.Uint32(info[tcpInfoDataSegsOut:]))
}

// tcpOption reads an int IPPROTO_TCP option of c's socket.
func tcpOption(t *testing.T, c *net.TCPConn, opt int) int {
	t.Helper()
	v, ok := socketUnder(c).getInt(opt)
	require.True(t, ok, "getsockopt %d", opt)
	return v
}

// TestRecordCorkWholeSegments: over TLS on loopback TCP, the 64 KiB
// writes of one stream and of two leave the socket as segments of several
// records (the writer corks its batches of by-reference frames and keeps
// the cork while they come back to back), not one segment or more per
// 16 KiB record nor a short one per batch; the socket is never left
// corked, every byte arrives in order, and a conn under a cork gets no
// TCP_NOTSENT_LOWAT at one P, where plain TCP does. At two P a lone
// stream's records leave merged too, and the low-water mark, off while
// corked, is back once the stream is done.
func TestRecordCorkWholeSegments(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P first (every batch corked), then two (bulk alone): sessions fix it as they start
	for _, streams := range []int{1, 2} {
		t1, t2 := tlsPair(t)
		client, server := sessionPairOver(t, t1, t2, nil)
		awaitRTT(t, client, server)
		sock := t1.NetConn().(*net.TCPConn)
		require.True(t, client.w.cork.active(), "a TLS conn over TCP is corked")
		require.Zero(t, tcpOption(t, sock, tcpNotSentLowat), "no low-water mark under a cork")

		before := dataSegmentsOut(t, sock)
		records := sendCheckedStreams(t, client, server, streams)
		segments := dataSegmentsOut(t, sock) - before
		t.Logf("%d streams: %d data segments for %d records", streams, segments, records)
		// Uncorked, every record is a segment or more (a lone stream's,
		// uncorked until session 39: 95-135 segments for 128 records,
		// where the kernel merged records the receiver had not yet
		// taken). Corked around each batch, a batch of four records
		// left as a full segment (loopback's MSS is 65,483) and its rest
		// as a short one. With the cork held across back-to-back batches
		// the rest fills the next segment, and only what the writer
		// holds when it parks leaves short: 44-46 segments for 128
		// records, 81-92 for 256, with the race detector too.
		require.Less(t, segments, records/2, "%d streams: records leave merged into full segments, not a short one a batch", streams)
		require.Zero(t, tcpOption(t, sock, syscall.TCP_CORK), "the socket is not left corked")
	}

	// With more than one P a lone stream's batches are corked, and the
	// low-water mark is off while they are.
	runtime.GOMAXPROCS(2)
	p1, p2 := tlsPair(t)
	parallel, parallelServer := sessionPairOver(t, p1, p2, nil)
	awaitRTT(t, parallel, parallelServer)
	psock := p1.NetConn().(*net.TCPConn)
	require.True(t, parallel.w.cork.active(), "more than one P: a cork for a lone stream")
	require.Equal(t, notSentLowat, tcpOption(t, psock, tcpNotSentLowat), "the low-water mark while uncorked")
	before := dataSegmentsOut(t, psock)
	records := sendCheckedStreams(t, parallel, parallelServer, 1)
	segments := dataSegmentsOut(t, psock) - before
	t.Logf("two P, a lone stream: %d data segments for %d records", segments, records)
	require.Less(t, segments, records/2, "two P: a lone stream's records leave merged into full segments")
	require.Zero(t, tcpOption(t, psock, syscall.TCP_CORK), "the socket is not left corked")
	require.Equal(t, notSentLowat, tcpOption(t, psock, tcpNotSentLowat), "nor without its low-water mark")

	c1, c2 := tcpPair(t)
	plain, _ := sessionPairOver(t, c1, c2, nil)
	require.False(t, plain.w.cork.active(), "a TCP conn has writev: no cork")
	require.Equal(t, notSentLowat, tcpOption(t, c1.(*net.TCPConn), tcpNotSentLowat))
}

// sendCheckedStreams writes 32 x 64 KiB on each of n streams from client,
// side by side, checks that server reads every byte of each in order, and
// returns how many TLS records of data that was.
func sendCheckedStreams(t *testing.T, client, server *Session, n int) (records int) {
	t.Helper()
	const (
		writes    = 32
		writeSize = 64 << 10
	)
	done := make(chan error, 2*n)
	start := make(chan struct{}) // the writers write side by side from here
	for i := range n {
		st, err := client.OpenStream(context.Background())
		require.NoError(t, err)
		// The bytes are made before the writes, so that the Writes
		// come back to back, as a transfer's do.
		data := make([]byte, writes*writeSize)
		for k := range data {
			data[k] = streamByte(i, k)
		}
		go func() {
			<-start
			for w := range writes {
				if _, err := st.Write(data[w*writeSize : (w+1)*writeSize]); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	close(start)
	for range n {
		peer, err := server.AcceptStream()
		require.NoError(t, err)
		go func() {
			got := make([]byte, writes*writeSize)
			if _, err := io.ReadFull(peer, got); err != nil {
				done <- err
				return
			}
			i := 0 // which stream this is: the one whose first byte it has
			for i < n-1 && streamByte(i, 0) != got[0] {
				i++
			}
			for k, b := range got {
				if b != streamByte(i, k) {
					done <- io.ErrUnexpectedEOF
					return
				}
			}
			done <- nil
		}()
	}
	for range 2 * n {
		require.NoError(t, <-done, "the bytes arrive whole and in order")
	}
	return n * writes * writeSize / recordSize
}

// TestRecordCorkAllocates: corking and uncorking the socket under a TLS
// conn, twice a batch, allocates nothing.
func TestRecordCorkAllocates(t *testing.T) {
	t1, _ := tlsPair(t)
	k := newRecordCork(t1, false)
	require.True(t, k.active())
	allocs := testing.AllocsPerRun(100, func() {
		require.True(t, k.set(true))
		require.True(t, k.set(false))
	})
	require.Zero(t, allocs)
	require.Zero(t, tcpOption(t, t1.NetConn().(*net.TCPConn), syscall.TCP_CORK))
}

// TestNotSentLowatThroughWrapper: the socket under TLS over a wrapped TCP
// conn (wrappedNetConn, as under a go-libp2p host's TLS) gets the
// writer's cork and TCP_NOTSENT_LOWAT at two P, as under TLS over TCP.
func TestNotSentLowatThroughWrapper(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	tcp1, t1, t2 := tlsOverWrappedPair(t)
	client, _ := sessionPairOver(t, t1, t2, nil)
	require.True(t, client.w.cork.active())
	require.Equal(t, notSentLowat, tcpOption(t, tcp1, tcpNotSentLowat))
}

// TestCorkClearsLowWaterAtTwoP: with more than one P the cork takes the
// socket's TCP_NOTSENT_LOWAT off while it is on and puts notSentLowat back
// once it is off (cork.go: a mark beside a held segment kept the writer
// waiting for the cork's 200 ms), allocating nothing; at one P it leaves
// the option alone.
func TestCorkClearsLowWaterAtTwoP(t *testing.T) {
	t1, _ := tlsPair(t)
	sock := t1.NetConn().(*net.TCPConn)
	require.True(t, setNotSentLowat(t1, notSentLowat))
	k := newRecordCork(t1, true)
	require.True(t, k.active())
	require.True(t, k.set(true))
	require.Equal(t, 1, tcpOption(t, sock, syscall.TCP_CORK))
	require.Zero(t, tcpOption(t, sock, tcpNotSentLowat), "no low-water mark while corked")
	require.True(t, k.set(false))
	require.Zero(t, tcpOption(t, sock, syscall.TCP_CORK))
	require.Equal(t, notSentLowat, tcpOption(t, sock, tcpNotSentLowat), "the mark is back once uncorked")
	allocs := testing.AllocsPerRun(100, func() {
		require.True(t, k.set(true))
		require.True(t, k.set(false))
	})
	require.Zero(t, allocs)

	serial := newRecordCork(t1, false)
	require.True(t, serial.set(true))
	require.Equal(t, notSentLowat, tcpOption(t, sock, tcpNotSentLowat), "one P: the cork leaves the option alone")
	require.True(t, serial.set(false))
}
