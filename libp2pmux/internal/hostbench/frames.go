package hostbench

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The scenarios' application messages, as braidbench writes them: a
// 4-byte big-endian length, then the payload, written with one Write as a
// delimited protobuf writer does.

// frameHeader is the length prefix of a message.
const frameHeader = 4

// maxFrame bounds a message a scenario reads.
const maxFrame = 4 << 20

// newFrame allocates a message of n payload bytes with its header set.
func newFrame(n int) []byte {
	b := make([]byte, frameHeader+n)
	binary.BigEndian.PutUint32(b, uint32(n))
	return b
}

// readFrame reads one message into a new buffer, as an application that
// decodes it would.
func readFrame(r io.Reader) ([]byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > maxFrame {
		return nil, fmt.Errorf("message of %d bytes: over %d", n, maxFrame)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
