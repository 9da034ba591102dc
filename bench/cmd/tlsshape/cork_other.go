//go:build !linux

package main

import (
	"errors"
	"net"
)

// canCork: TCP_CORK is Linux's; the corked shape is not measured here.
const canCork = false

// setCork fails: TCP_CORK is Linux's.
func setCork(net.Conn, bool) error { return errors.New("TCP_CORK is Linux-only") }
