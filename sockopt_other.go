//go:build !linux

package braid

import "net"

// setNotSentLowat is a no-op where TCP_NOTSENT_LOWAT is not known; the
// connection-level in-flight bound (inflight.go) still applies.
func setNotSentLowat(net.Conn, int) bool { return false }

// tcpSegmentSize is 0 where TCP_MAXSEG is not read: writes are not cut to
// whole segments (segment.go).
func tcpSegmentSize(net.Conn) int { return 0 }

// tcpSocket reaches no socket where its options are not known.
type tcpSocket struct{}

// socketUnder reaches no socket here.
func socketUnder(net.Conn) tcpSocket { return tcpSocket{} }

// socketPeek looks at no socket here.
type socketPeek struct{}

// peeker is nil: no socket is reached here.
func (tcpSocket) peeker() *socketPeek { return nil }

// bytesQueued is 0: no socket is looked at here.
func (*socketPeek) bytesQueued() int { return 0 }

// corker is nil: no socket is reached here.
func (tcpSocket) corker(int) func(on bool) bool { return nil }
