package main

import (
	"fmt"
	"net"
	"syscall"
)

// socketOptions: TCP_CORK is Linux's, and this is Linux.
const socketOptions = true

// setCork sets or clears TCP_CORK on the TCP conn c.
func setCork(c net.Conn, on bool) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return fmt.Errorf("%T is not a TCP conn", c)
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
