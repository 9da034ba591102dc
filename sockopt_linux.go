package braid

import (
	"net"
	"syscall"
	"unsafe"
)

// setNotSentLowat bounds the bytes the kernel holds unsent on c's socket
// (TCP_NOTSENT_LOWAT), so that the writer, not the kernel's send queue,
// decides what goes next. c is a *net.TCPConn, or a conn wrapping one that
// exposes it with NetConn (crypto/tls) or embeds it in an unnamed struct
// (wrappedNetConn: go-multiaddr's). Other conns are left alone: there
// the connection-level in-flight bound (inflight.go) does the job. It
// reports whether the option was set.
func setNotSentLowat(c net.Conn, n int) bool {
	return socketUnder(c).setInt(tcpNotSentLowat, n)
}

// tcpSocket is the TCP socket of a conn, for its options; the zero value
// reaches none.
type tcpSocket struct {
	raw syscall.RawConn
}

// socketUnder returns the TCP socket of c: c's own if c is a
// *net.TCPConn, or that of the conn under it, followed through NetConn
// methods (crypto/tls) at most maxUnwrap deep and then into an unnamed
// struct that embeds it (wrappedNetConn).
func socketUnder(c net.Conn) tcpSocket {
	for range maxUnwrap {
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = nc.NetConn()
	}
	if w := wrappedNetConn(c); w != nil {
		c = w
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return tcpSocket{}
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return tcpSocket{}
	}
	return tcpSocket{raw: raw}
}

// setInt sets the IPPROTO_TCP option opt to v; it reports whether it did.
func (s tcpSocket) setInt(opt, v int) bool {
	if s.raw == nil {
		return false
	}
	var serr error
	err := s.raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, opt, v)
	})
	return err == nil && serr == nil
}

// getInt reads the IPPROTO_TCP option opt; ok is false if it could not.
func (s tcpSocket) getInt(opt int) (v int, ok bool) {
	if s.raw == nil {
		return 0, false
	}
	var serr error
	err := s.raw.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, opt)
	})
	return v, err == nil && serr == nil
}

// socketPeek looks at a socket's receive queue; not safe for concurrent
// use (readWaker serializes it). Its function is made once, so that a
// look does not allocate.
type socketPeek struct {
	raw   syscall.RawConn
	n     int32 // bytes in the receive queue, as the last look found
	errno syscall.Errno
	look  func(fd uintptr)
}

// peeker returns s's peek, or nil if s reaches no socket.
func (s tcpSocket) peeker() *socketPeek {
	if s.raw == nil {
		return nil
	}
	p := &socketPeek{raw: s.raw}
	p.look = func(fd uintptr) {
		p.n = 0
		_, _, p.errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&p.n)))
	}
	return p
}

// bytesQueued returns how many bytes the socket's receive queue holds
// (FIONREAD, which is TIOCINQ on Linux), 0 if the look failed.
func (p *socketPeek) bytesQueued() int {
	if p.raw.Control(p.look) != nil || p.errno != 0 {
		return 0
	}
	return int(p.n)
}

// corker returns a function that sets (on) or clears TCP_CORK on s and
// reports whether it did, or nil if s reaches no socket. While TCP_CORK
// is set the kernel sends only full segments; clearing it sends what is
// held at once. With mark above 0 the socket's TCP_NOTSENT_LOWAT is mark
// while uncorked and none while corked (cork.go): the mark is cleared
// before the cork goes on and set again once it is off, or when the cork
// could not be set. The functions passed to Control are made here, once:
// a function passed to it escapes, so one made per call would allocate
// (four allocations per 64 KiB over TLS, two corks a batch).
func (s tcpSocket) corker(mark int) func(on bool) bool {
	if s.raw == nil {
		return nil
	}
	var serr error
	setOpt := func(fd uintptr, opt, v int) {
		if serr == nil {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, opt, v)
		}
	}
	set := func(fd uintptr) {
		serr = nil
		if mark > 0 {
			setOpt(fd, tcpNotSentLowat, 0) // 0: the system's, which is none unless an administrator set one
		}
		setOpt(fd, syscall.TCP_CORK, 1)
		if serr != nil && mark > 0 {
			// Not corked: the writer goes on uncorked, so the mark is
			// put back (the failure is still reported).
			_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpNotSentLowat, mark)
		}
	}
	unset := func(fd uintptr) {
		serr = nil
		setOpt(fd, syscall.TCP_CORK, 0)
		if mark > 0 {
			setOpt(fd, tcpNotSentLowat, mark)
		}
	}
	return func(on bool) bool {
		f := unset
		if on {
			f = set
		}
		return s.raw.Control(f) == nil && serr == nil
	}
}

// tcpNotSentLowat is TCP_NOTSENT_LOWAT in linux/tcp.h, the same on every
// architecture (the syscall package has it only for some).
const tcpNotSentLowat = 25

// maxUnwrap bounds the NetConn chain socketUnder follows.
const maxUnwrap = 4

// tcpSegmentSize returns c's MSS (TCP_MAXSEG) if c is a *net.TCPConn, or
// 0: a conn that wraps one may not write what it is given as one write,
// and a conn without writev writes records (writeFlat), not segments.
func tcpSegmentSize(c net.Conn) int {
	if _, ok := c.(*net.TCPConn); !ok {
		return 0
	}
	mss, ok := socketUnder(c).getInt(syscall.TCP_MAXSEG)
	if !ok || mss <= 0 {
		return 0
	}
	return mss
}
