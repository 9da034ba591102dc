package main

import (
	"net"
	"syscall"
	"testing"
)

// TestSetLowWaterReachesTheSocket: setLowWater sets TCP_NOTSENT_LOWAT on
// the TCP socket under the TLS conn, as the low-water shapes need, and
// setCork sets and clears TCP_CORK there.
func TestSetLowWaterReachesTheSocket(t *testing.T) {
	w, r, err := tlsPair()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	if err := setLowWater(w, lowWater); err != nil {
		t.Fatal(err)
	}
	if got := tcpOption(t, w, tcpNotSentLowat); got != lowWater {
		t.Errorf("TCP_NOTSENT_LOWAT = %d, want %d", got, lowWater)
	}
	for _, on := range []bool{true, false} {
		if err := setCork(w, on); err != nil {
			t.Fatal(err)
		}
		if got := tcpOption(t, w, syscall.TCP_CORK) != 0; got != on {
			t.Errorf("TCP_CORK on = %v, want %v", got, on)
		}
	}
}

// tcpOption reads the IPPROTO_TCP option opt of the TCP socket under the
// TLS conn c.
func tcpOption(t *testing.T, c net.Conn, opt int) int {
	t.Helper()
	rc, err := tcpSocketUnder(c)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}
