//go:build !linux

package main

import (
	"errors"
	"net"
)

// canCork: TCP_CORK is Linux's; the corked shapes are not measured here.
const canCork = false

// canLowWater: TCP_NOTSENT_LOWAT is Linux's; the low-water shapes are not
// measured here.
const canLowWater = false

// setCork fails: TCP_CORK is Linux-only.
func setCork(net.Conn, bool) error { return errors.New("TCP_CORK is Linux-only") }

// setLowWater fails: TCP_NOTSENT_LOWAT is Linux-only.
func setLowWater(net.Conn, int) error { return errors.New("TCP_NOTSENT_LOWAT is Linux-only") }
