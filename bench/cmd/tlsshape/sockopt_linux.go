package main

import (
	"fmt"
	"net"
	"syscall"
)

// socketOptions: the options the corked and low-water shapes set,
// TCP_CORK and TCP_NOTSENT_LOWAT (since 3.12), are Linux's, and this is
// Linux.
const socketOptions = true

// tcpNotSentLowat is TCP_NOTSENT_LOWAT in linux/tcp.h; package syscall
// does not name it.
const tcpNotSentLowat = 25

// setCork sets or clears TCP_CORK on the TCP socket under the TLS conn c.
func setCork(c net.Conn, on bool) error {
	v := 0
	if on {
		v = 1
	}
	return setTCPOption(c, syscall.TCP_CORK, v)
}

// setLowWater sets TCP_NOTSENT_LOWAT on the TCP socket under the TLS conn
// c: the socket turns writable, and a write goes on, only while fewer
// than n bytes wait unsent.
func setLowWater(c net.Conn, n int) error { return setTCPOption(c, tcpNotSentLowat, n) }

// setTCPOption sets the IPPROTO_TCP option opt to v on the TCP socket
// under the TLS conn c.
func setTCPOption(c net.Conn, opt, v int) error {
	rc, err := tcpSocketUnder(c)
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, opt, v)
	}); err != nil {
		return err
	}
	return serr
}

// tcpSocketUnder returns the raw TCP socket under the TLS conn c.
func tcpSocketUnder(c net.Conn) (syscall.RawConn, error) {
	nc, ok := c.(interface{ NetConn() net.Conn })
	if !ok {
		return nil, fmt.Errorf("%T has no NetConn", c)
	}
	tc, ok := nc.NetConn().(*net.TCPConn)
	if !ok {
		return nil, fmt.Errorf("%T is not a TCP conn", nc.NetConn())
	}
	return tc.SyscallConn()
}
