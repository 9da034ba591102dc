//go:build !linux

package braid

import (
	"io"
	"net"
)

// vectorReader is the read loop's readv(2) reader (readv_linux.go); none
// here, and the read loop reads a large payload's rest and the next
// header with a system call each.
type vectorReader struct{}

func newVectorReader(net.Conn) *vectorReader { return nil }

// read is never called: newVectorReader gives none.
func (*vectorReader) read(a, b []byte) (int, error) { return 0, io.ErrNoProgress }
