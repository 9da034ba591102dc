//go:build !linux

package main

import (
	"errors"
	"net"
)

// socketOptions: TCP_CORK and TCP_NOTSENT_LOWAT are Linux's; the corked
// and low-water shapes are not measured here.
const socketOptions = false

// setCork fails: TCP_CORK is Linux-only.
func setCork(net.Conn, bool) error { return errors.New("TCP_CORK is Linux-only") }

// setLowWater fails: TCP_NOTSENT_LOWAT is Linux-only.
func setLowWater(net.Conn, int) error { return errors.New("TCP_NOTSENT_LOWAT is Linux-only") }
