package braid

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// vectorReader reads a socket into two buffers with one readv(2): the rest
// of a large payload into its own buffer, and what follows it (the next
// frames' headers and the start of the next payload) into the read
// buffer. A bulk flow's frame then costs one read system call instead of
// two (the payload's rest, then the next header's read); reads are a
// fifth of one-stream bulk's CPU time over loopback TCP. Only for
// *net.TCPConn and *net.UnixConn, whose socket is reached with
// SyscallConn; the read loop owns it. Deadlines apply as to Read: the
// raw conn waits in the runtime's poller.
type vectorReader struct {
	rc   syscall.RawConn
	iov  [2]syscall.Iovec
	fn   func(fd uintptr) bool // v.readv, bound once: no allocation per read
	n    int
	errn syscall.Errno
}

// newVectorReader returns conn's vector reader, nil where there is none.
func newVectorReader(conn net.Conn) *vectorReader {
	var sc syscall.Conn
	switch c := conn.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	v := &vectorReader{rc: rc}
	v.fn = v.readv
	return v
}

// read reads into a, then b, with one system call (waiting in the poller
// until the socket is readable); it returns the bytes read, at most
// len(a)+len(b), and io.EOF at the end of the stream. a and b are not
// empty.
func (v *vectorReader) read(a, b []byte) (int, error) {
	v.iov[0].Base, v.iov[1].Base = &a[0], &b[0]
	v.iov[0].SetLen(len(a))
	v.iov[1].SetLen(len(b))
	v.n, v.errn = 0, 0
	err := v.rc.Read(v.fn)
	v.iov[0].Base, v.iov[1].Base = nil, nil // hold no reference to the buffers
	switch {
	case err != nil:
		return 0, err
	case v.errn != 0:
		return 0, os.NewSyscallError("readv", v.errn)
	case v.n == 0:
		return 0, io.EOF
	}
	return v.n, nil
}

// readv is the raw conn's read function: false asks the poller to wait
// for the socket to be readable.
func (v *vectorReader) readv(fd uintptr) bool {
	for {
		n, _, e := syscall.Syscall(syscall.SYS_READV, fd, uintptr(unsafe.Pointer(&v.iov[0])), uintptr(len(v.iov)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			v.n = int(n)
		default:
			v.errn = e
		}
		return true
	}
}
