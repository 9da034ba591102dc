// Package appframe is the application message format of the benchmark
// scenarios (chunk delivery, notifications) that braidbench runs between
// bare sessions and hostbench between go-libp2p hosts: a 4-byte big-endian
// length, then the payload, written with one Write as a delimited protobuf
// writer does. One definition, so both measure the same bytes.
package appframe

import (
	"encoding/binary"
	"fmt"
	"io"
)

// HeaderSize is the length prefix of a message.
const HeaderSize = 4

// MaxSize bounds a message a scenario reads.
const MaxSize = 4 << 20

// New allocates a message of n payload bytes with its header set.
func New(n int) []byte {
	b := make([]byte, HeaderSize+n)
	binary.BigEndian.PutUint32(b, uint32(n))
	return b
}

// Read reads one message into a new buffer, as an application that decodes
// it would.
func Read(r io.Reader) ([]byte, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxSize {
		return nil, fmt.Errorf("message of %d bytes: over %d", n, MaxSize)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
