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

// TestRecordCorkWholeSegments: over TLS on loopback TCP, a stream's 64
// KiB writes leave the socket as segments of several records (the writer
// corks its batches of by-reference frames and keeps the cork while they
// come back to back), not one segment or more per 16 KiB record nor a
// short one per batch; the socket is never left corked, every byte arrives in
// order, and a conn under a cork gets no TCP_NOTSENT_LOWAT, where plain
// TCP does.
func TestRecordCorkWholeSegments(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // the cork is for one P: sessions fix it as they start
	t1, t2 := tlsPair(t)
	client, server := sessionPairOver(t, t1, t2, nil)
	awaitRTT(t, client, server)
	sock := t1.NetConn().(*net.TCPConn)
	require.True(t, client.w.cork.active(), "a TLS conn over TCP is corked")
	require.Zero(t, tcpOption(t, sock, tcpNotSentLowat), "no low-water mark under a cork")

	const (
		writes    = 32
		writeSize = 64 << 10
	)
	st, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		peer, err := server.AcceptStream()
		if err != nil {
			done <- err
			return
		}
		got := make([]byte, writes*writeSize)
		if _, err := io.ReadFull(peer, got); err != nil {
			done <- err
			return
		}
		for i, b := range got {
			if b != streamByte(0, i) {
				done <- io.ErrUnexpectedEOF
				return
			}
		}
		done <- nil
	}()
	before := dataSegmentsOut(t, sock)
	buf := make([]byte, writeSize)
	for w := range writes {
		for j := range buf {
			buf[j] = streamByte(0, w*writeSize+j)
		}
		_, err := st.Write(buf)
		require.NoError(t, err)
	}
	require.NoError(t, <-done, "the bytes arrive whole and in order")
	segments := dataSegmentsOut(t, sock) - before
	records := writes * writeSize / recordSize
	t.Logf("%d data segments for %d records", segments, records)
	// Uncorked, every record is a segment or more (144-154 here, with
	// the markers' records). Corked around each batch, a batch of four
	// records left as a full segment (loopback's MSS is 65,483) and its
	// rest as a short one: 72-85, and 94 under the race detector. With
	// the cork held across back-to-back batches the rest fills the next
	// segment, and only what the writer holds when it parks leaves
	// short: 44-46, with the race detector too.
	require.Less(t, segments, records/2, "records leave merged into full segments, not a short one a batch")
	require.Zero(t, tcpOption(t, sock, syscall.TCP_CORK), "the socket is not left corked")

	runtime.GOMAXPROCS(2)
	p1, p2 := tlsPair(t)
	parallel, _ := sessionPairOver(t, p1, p2, nil)
	require.False(t, parallel.w.cork.active(), "more than one P: no cork")
	require.Equal(t, notSentLowat, tcpOption(t, p1.NetConn().(*net.TCPConn), tcpNotSentLowat), "the low-water mark where no cork is")

	c1, c2 := tcpPair(t)
	plain, _ := sessionPairOver(t, c1, c2, nil)
	require.False(t, plain.w.cork.active(), "a TCP conn has writev: no cork")
	require.Equal(t, notSentLowat, tcpOption(t, c1.(*net.TCPConn), tcpNotSentLowat))
}

// TestRecordCorkAllocates: corking and uncorking the socket under a TLS
// conn, twice a batch, allocates nothing.
func TestRecordCorkAllocates(t *testing.T) {
	t1, _ := tlsPair(t)
	k := newRecordCork(t1)
	require.True(t, k.active())
	allocs := testing.AllocsPerRun(100, func() {
		require.True(t, k.set(true))
		require.True(t, k.set(false))
	})
	require.Zero(t, allocs)
	require.Zero(t, tcpOption(t, t1.NetConn().(*net.TCPConn), syscall.TCP_CORK))
}
