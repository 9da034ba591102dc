package main

import (
	"fmt"
	"net"
	"syscall"
)

// canCork: TCP_CORK is Linux's, and this is Linux.
const canCork = true

// setCork sets or clears TCP_CORK on the TCP socket under the TLS conn c.
func setCork(c net.Conn, on bool) error {
	nc, ok := c.(interface{ NetConn() net.Conn })
	if !ok {
		return fmt.Errorf("%T has no NetConn", c)
	}
	tc, ok := nc.NetConn().(*net.TCPConn)
	if !ok {
		return fmt.Errorf("%T is not a TCP conn", nc.NetConn())
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
	}); err != nil {
		return err
	}
	return serr
}
