package main

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
)

const (
	// recordPlain is a full TLS 1.3 record's plaintext: 16 KiB, and the
	// content type byte sealed with it.
	recordPlain = 16*1024 + 1
	// recordWire is a full record on the wire: its plaintext, the 5-byte
	// header and the 16-byte AEAD tag.
	recordWire = recordPlain + 5 + 16
	// shortWire is a short record on the wire: raw TLS's fifth per 64 KiB
	// message of the notification benchmark (its 4-byte length prefix
	// spills over), 4 bytes of plaintext sealed.
	shortWire = 4 + 1 + 5 + 16
	// recordsPerMessage is the full records of a 64 KiB message.
	recordsPerMessage = 4
	messageSize       = recordsPerMessage * 16 * 1024
	// readSize is the reader's read: a muxer's read loop reads what the
	// socket holds, up to its buffer.
	readSize = 64 * 1024
)

// The shapes' names, for printMessageCosts.
const (
	shapeRecords = "a record a write"
	shapeShort   = "a record a write, each followed by a short one"
	shapeCorked  = "a record a write, corked throughout"
	shapeMerged  = "four records a write"
)

// shape is one way of writing records to a loopback TCP conn.
type shape struct {
	name    string
	records int  // full records per write
	short   bool // a short record's write after each
	corked  bool // TCP_CORK on the writer's socket from the first write to the last (Linux)
}

// shapes are what run measures, in turn; the corked shape only where
// TCP_CORK is known (socketOptions).
var shapes = slices.DeleteFunc([]shape{
	{name: shapeRecords, records: 1},
	{name: shapeShort, records: 1, short: true},
	{name: shapeCorked, records: 1, corked: true},
	{name: shapeMerged, records: recordsPerMessage},
}, func(s shape) bool { return s.corked && !socketOptions })

// run writes total bytes of records over a fresh loopback TCP conn in s's
// shape, a reader draining the other end, and returns the time per full
// record, from the first write to the last one's return (the writer's
// time): the short records' writes count in the record they follow. It
// fails if the reader did not read every byte written.
func (s shape) run(total int64) (time.Duration, error) {
	w, r, err := slowdown.TCPPair()
	if err != nil {
		return 0, err
	}
	defer w.Close()
	defer r.Close()
	type drain struct {
		n   int64
		err error
	}
	drained := make(chan drain, 1)
	go func() { // the reader: until the writer's Close
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, make([]byte, readSize))
		drained <- drain{n, err}
	}()
	if s.corked {
		if err := setCork(w, true); err != nil {
			return 0, err
		}
	}
	buf := make([]byte, s.records*recordWire)
	short := make([]byte, shortWire)
	writes := max(1, int(total/int64(len(buf))))
	start := time.Now()
	for range writes {
		if _, err := w.Write(buf); err != nil {
			return 0, err
		}
		if s.short {
			if _, err := w.Write(short); err != nil {
				return 0, err
			}
		}
	}
	if s.corked {
		if err := setCork(w, false); err != nil { // sends the last partial segment
			return 0, err
		}
	}
	elapsed := time.Since(start)
	if err := w.Close(); err != nil {
		return 0, err
	}
	d := <-drained
	if d.err != nil {
		return 0, d.err
	}
	written := int64(writes * len(buf))
	if s.short {
		written += int64(writes * len(short))
	}
	if d.n != written {
		return 0, fmt.Errorf("the reader read %d bytes of %d written", d.n, written)
	}
	return elapsed / time.Duration(writes*s.records), nil
}

// sealCost is the time to seal one full record with AES-128-GCM, the
// cipher of a TLS 1.3 connection between Go peers, over total bytes.
func sealCost(total int64) (time.Duration, error) {
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		return 0, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return 0, err
	}
	nonce := make([]byte, aead.NonceSize())
	plain := make([]byte, recordPlain)
	sealed := make([]byte, 0, recordPlain+aead.Overhead())
	n := max(1, int(total/recordPlain))
	start := time.Now()
	for i := range n {
		nonce[0] = byte(i)
		sealed = aead.Seal(sealed[:0], nonce, plain, nil)
	}
	elapsed := time.Since(start)
	if len(sealed) != recordPlain+aead.Overhead() {
		return 0, errors.New("seal: short output")
	}
	return elapsed / time.Duration(n), nil
}

// copyCost is the time to copy one 64 KiB message between two buffers,
// as go-yamux copies each frame into a buffer of its own, over total
// bytes.
func copyCost(total int64) time.Duration {
	src, dst := make([]byte, messageSize), make([]byte, messageSize)
	n := max(1, int(total/messageSize))
	start := time.Now()
	for i := range n {
		src[0] = byte(i)
		copy(dst, src)
	}
	return time.Since(start) / time.Duration(n)
}
