//go:build !linux

package main

import (
	"errors"
	"net"
)

// setCork fails: TCP_CORK is Linux's.
func setCork(net.Conn, bool) error { return errors.New("TCP_CORK is Linux-only") }
