//go:build !linux

package main

import (
	"errors"
	"net"
)

// socketOptions: TCP_CORK is Linux's; the corked shape is not measured
// here.
const socketOptions = false

// setCork fails: TCP_CORK is Linux-only.
func setCork(net.Conn, bool) error { return errors.New("TCP_CORK is Linux-only") }
