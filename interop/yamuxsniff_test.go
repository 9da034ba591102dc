package interop_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// What a yamux peer reads, seen on the wire: a decoder of the frame
// headers in a yamux byte stream, a recorder of the control frames it
// finds (the matrix wraps an in-process peer's conn with one), and a relay
// that passes an external peer's connection through this process and
// records the frames each way (braid keeps a real *net.TCPConn: the relay
// copies between the peer's conn and one end of a loopback pair, braid
// uses the other end).

// yamux frame types and flags, as on the wire (the spec's, not braid's
// constants: the tests check braid against the wire format).
const (
	yamuxHeaderSize   = 12
	yamuxTypeData     = 0
	yamuxTypeWindow   = 1
	yamuxTypePing     = 2
	yamuxTypeGoAway   = 3
	yamuxFlagSYN      = 0x1
	yamuxFlagACK      = 0x2
	yamuxSniffCtlKept = 1 << 16 // control frames a sniffer keeps; counts go on
)

// yamuxHeader is one decoded frame header: version, type, flags, stream
// id, length (big-endian on the wire). A data frame's length bytes of
// payload follow it; the other types carry none (the length is a window
// delta, a ping's opaque value or a go-away's code).
type yamuxHeader struct {
	Version  uint8
	Type     uint8
	Flags    uint16
	StreamID uint32
	Length   uint32
}

func (h yamuxHeader) String() string {
	return fmt.Sprintf("{type %d flags %#x stream %d length %d}", h.Type, h.Flags, h.StreamID, h.Length)
}

// yamuxDecoder decodes the headers of a yamux byte stream fed to it in
// pieces of any size.
type yamuxDecoder struct {
	hdr  [yamuxHeaderSize]byte
	have int    // bytes of hdr filled so far
	skip uint32 // payload bytes of the last data frame still to come
	err  error  // the stream stopped being yamux; nothing is decoded after it
}

// feed decodes p, the next bytes of the stream, and calls fn with every
// header completed in p and the offset in p just past the header's last
// byte. It returns the decoder's error, once a header does not decode.
func (d *yamuxDecoder) feed(p []byte, fn func(h yamuxHeader, end int)) error {
	off := 0
	for off < len(p) && d.err == nil {
		if d.skip > 0 {
			n := int(min(uint64(d.skip), uint64(len(p)-off)))
			d.skip -= uint32(n)
			off += n
			continue
		}
		n := copy(d.hdr[d.have:], p[off:])
		d.have += n
		off += n
		if d.have < yamuxHeaderSize {
			break
		}
		d.have = 0
		h := yamuxHeader{
			Version:  d.hdr[0],
			Type:     d.hdr[1],
			Flags:    binary.BigEndian.Uint16(d.hdr[2:4]),
			StreamID: binary.BigEndian.Uint32(d.hdr[4:8]),
			Length:   binary.BigEndian.Uint32(d.hdr[8:12]),
		}
		if h.Version != 0 || h.Type > yamuxTypeGoAway {
			d.err = fmt.Errorf("not a yamux header: % x", d.hdr)
			break
		}
		if h.Type == yamuxTypeData {
			d.skip = h.Length
		}
		fn(h, off)
	}
	return d.err
}

// yamuxSniffer records the frames of one direction of a yamux connection:
// a count of each type and every ping and go-away, in order. Safe for
// concurrent use.
type yamuxSniffer struct {
	mu      sync.Mutex // guards everything below
	dec     yamuxDecoder
	counts  [4]int
	control []yamuxHeader
}

// observe decodes p, the next bytes of the direction.
func (s *yamuxSniffer) observe(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.dec.feed(p, func(h yamuxHeader, _ int) {
		s.counts[h.Type]++
		if (h.Type == yamuxTypePing || h.Type == yamuxTypeGoAway) && len(s.control) < yamuxSniffCtlKept {
			s.control = append(s.control, h)
		}
	})
}

// frames returns the pings and go-aways seen so far, in order, and the
// decoder's error.
func (s *yamuxSniffer) frames() ([]yamuxHeader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.control), s.dec.err
}

// goAwayCodes returns the codes of the go-aways seen so far.
func (s *yamuxSniffer) goAwayCodes() []uint32 {
	ctl, _ := s.frames()
	var codes []uint32
	for _, h := range ctl {
		if h.Type == yamuxTypeGoAway {
			codes = append(codes, h.Length)
		}
	}
	return codes
}

// sniffConn is a net.Conn whose reads a sniffer decodes: what the holder
// of the conn read.
type sniffConn struct {
	net.Conn
	read *yamuxSniffer
}

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.observe(p[:n])
	return n, err
}

// yamuxRelay copies a yamux connection between an external peer's conn
// and braid's, recording the frames each way.
type yamuxRelay struct {
	fromPeer  yamuxSniffer // what the peer sent, forwarded to braid
	fromBraid yamuxSniffer // what braid sent, forwarded to the peer
	wg        sync.WaitGroup
}

// startYamuxRelay interposes a relay between peerConn and a new loopback
// TCP connection, and returns that connection's other end for braid (a
// *net.TCPConn). Each way, the relay forwards what it reads, passes a
// half-close on (CloseWrite) at the end of the bytes, and closes both of
// its conns on any other error. Its conns are closed and its goroutines
// ended when the test ends.
func startYamuxRelay(t testing.TB, peerConn net.Conn) (*yamuxRelay, net.Conn) {
	t.Helper()
	relayEnd, braidEnd := tcpPair(t)
	r := &yamuxRelay{}
	closeAll := func() {
		_ = peerConn.Close()
		_ = relayEnd.Close()
	}
	r.wg.Add(2)
	go r.pipe(relayEnd, peerConn, &r.fromPeer, closeAll)
	go r.pipe(peerConn, relayEnd, &r.fromBraid, closeAll)
	t.Cleanup(func() {
		closeAll()
		r.wg.Wait()
	})
	return r, braidEnd
}

// pipe forwards src to dst; what dst was sent is recorded in s.
func (r *yamuxRelay) pipe(dst, src net.Conn, s *yamuxSniffer, closeAll func()) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				closeAll()
				return
			}
			s.observe(buf[:n])
		}
		if err == io.EOF {
			if cw, ok := dst.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
				closeAll()
			}
			return
		}
		if err != nil {
			closeAll()
			return
		}
	}
}

// appendYamuxFrame appends a frame (header and, for data, payload) to b.
func appendYamuxFrame(b []byte, h yamuxHeader, payload []byte) []byte {
	b = append(b, h.Version, h.Type)
	b = binary.BigEndian.AppendUint16(b, h.Flags)
	b = binary.BigEndian.AppendUint32(b, h.StreamID)
	b = binary.BigEndian.AppendUint32(b, h.Length)
	return append(b, payload...)
}

// TestYamuxSniffer: the decoder finds every header of a stream fed in
// pieces of every size, skips data payloads (made of bytes that would
// decode as go-aways and pings), and stops at a header that is not yamux.
func TestYamuxSniffer(t *testing.T) {
	// A payload that is nothing but go-away and ping headers.
	var fake []byte
	for range 50 {
		fake = appendYamuxFrame(fake, yamuxHeader{Type: yamuxTypeGoAway, Length: 9}, nil)
		fake = appendYamuxFrame(fake, yamuxHeader{Type: yamuxTypePing, Flags: yamuxFlagSYN, Length: 9}, nil)
	}
	frames := []struct {
		h       yamuxHeader
		payload []byte
	}{
		{yamuxHeader{Type: yamuxTypeWindow, Flags: yamuxFlagSYN, StreamID: 1, Length: 0}, nil},
		{yamuxHeader{Type: yamuxTypeData, StreamID: 1, Length: uint32(len(fake))}, fake},
		{yamuxHeader{Type: yamuxTypePing, Flags: yamuxFlagSYN, Length: 0xdeadbeef}, nil},
		{yamuxHeader{Type: yamuxTypeData, Flags: yamuxFlagACK, StreamID: 2, Length: 0}, nil}, // no payload
		{yamuxHeader{Type: yamuxTypeData, StreamID: 1, Length: 1}, []byte{yamuxTypeGoAway}},
		{yamuxHeader{Type: yamuxTypePing, Flags: yamuxFlagACK, Length: 0xdeadbeef}, nil},
		{yamuxHeader{Type: yamuxTypeWindow, StreamID: 1, Length: 256 << 10}, nil},
		{yamuxHeader{Type: yamuxTypeGoAway, Length: 5}, nil},
	}
	var stream []byte
	var wantCtl []yamuxHeader
	var wantEnds []int
	for _, f := range frames {
		stream = appendYamuxFrame(stream, f.h, f.payload)
		wantEnds = append(wantEnds, len(stream)-len(f.payload))
		if f.h.Type == yamuxTypePing || f.h.Type == yamuxTypeGoAway {
			wantCtl = append(wantCtl, f.h)
		}
	}
	wantCounts := [4]int{3, 2, 2, 1}

	check := func(t *testing.T, pieces [][]byte) {
		t.Helper()
		var s yamuxSniffer
		var d yamuxDecoder
		var ends []int
		pos := 0
		for _, p := range pieces {
			s.observe(p)
			if err := d.feed(p, func(_ yamuxHeader, end int) { ends = append(ends, pos+end) }); err != nil {
				t.Fatal(err)
			}
			pos += len(p)
		}
		ctl, err := s.frames()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ctl, wantCtl) {
			t.Fatalf("control frames %v, want %v", ctl, wantCtl)
		}
		if s.counts != wantCounts {
			t.Fatalf("frames by type %v, want %v", s.counts, wantCounts)
		}
		if !slices.Equal(s.goAwayCodes(), []uint32{5}) {
			t.Fatalf("go-away codes %v, want [5]", s.goAwayCodes())
		}
		if !slices.Equal(ends, wantEnds) {
			t.Fatalf("header ends %v, want %v", ends, wantEnds)
		}
	}
	t.Run("whole", func(t *testing.T) { check(t, [][]byte{stream}) })
	t.Run("byte-by-byte", func(t *testing.T) {
		var pieces [][]byte
		for i := range stream {
			pieces = append(pieces, stream[i:i+1])
		}
		check(t, pieces)
	})
	t.Run("every-split", func(t *testing.T) {
		for i := range len(stream) + 1 {
			check(t, [][]byte{stream[:i], stream[i:]})
		}
	})
	t.Run("random-splits", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			var pieces [][]byte
			for rest := stream; len(rest) > 0; {
				n := min(len(rest), rng.IntN(40))
				pieces = append(pieces, rest[:n])
				rest = rest[n:]
			}
			check(t, pieces)
		}
	})
	t.Run("not-yamux", func(t *testing.T) {
		var s yamuxSniffer
		bad := appendYamuxFrame(nil, yamuxHeader{Version: 1, Type: yamuxTypeGoAway}, nil)
		s.observe(append(bad, appendYamuxFrame(nil, yamuxHeader{Type: yamuxTypeGoAway, Length: 5}, nil)...))
		ctl, err := s.frames()
		if err == nil || len(ctl) != 0 {
			t.Fatalf("version 1: %v, %v; want an error and nothing decoded", ctl, err)
		}
		var s2 yamuxSniffer
		s2.observe(appendYamuxFrame(nil, yamuxHeader{Type: 4}, nil))
		if _, err := s2.frames(); err == nil {
			t.Fatal("type 4 decoded")
		}
	})
}

// TestYamuxRelay: the relay forwards both ways, records what it forwards,
// passes each half-close on, and its goroutines end with the test (the
// package's goleak check).
func TestYamuxRelay(t *testing.T) {
	peerConn, peerSide := tcpPair(t) // peerSide plays the external peer
	r, braidConn := startYamuxRelay(t, peerConn)
	if _, ok := braidConn.(*net.TCPConn); !ok {
		t.Fatalf("braid's end is a %T, not a *net.TCPConn", braidConn)
	}
	deadline := time.Now().Add(30 * time.Second)
	_ = peerSide.SetDeadline(deadline)
	_ = braidConn.SetDeadline(deadline)

	payload := bytes.Repeat([]byte{yamuxTypeGoAway}, 100<<10)
	fromPeer := appendYamuxFrame(nil, yamuxHeader{Type: yamuxTypePing, Flags: yamuxFlagSYN, Length: 77}, nil)
	fromPeer = appendYamuxFrame(fromPeer, yamuxHeader{Type: yamuxTypeData, Flags: yamuxFlagSYN, StreamID: 1, Length: uint32(len(payload))}, payload)
	fromBraid := appendYamuxFrame(nil, yamuxHeader{Type: yamuxTypePing, Flags: yamuxFlagACK, Length: 77}, nil)
	fromBraid = appendYamuxFrame(fromBraid, yamuxHeader{Type: yamuxTypeGoAway, Length: 0}, nil)

	errc := make(chan error, 2)
	go func() {
		_, err := peerSide.Write(fromPeer)
		if err == nil {
			err = peerSide.(*net.TCPConn).CloseWrite()
		}
		errc <- err
	}()
	go func() {
		_, err := braidConn.Write(fromBraid)
		if err == nil {
			err = braidConn.(*net.TCPConn).CloseWrite()
		}
		errc <- err
	}()
	gotAtBraid, err := io.ReadAll(braidConn) // to the peer's half-close
	if err != nil || !bytes.Equal(gotAtBraid, fromPeer) {
		t.Fatalf("braid read %d bytes (want %d), %v", len(gotAtBraid), len(fromPeer), err)
	}
	gotAtPeer, err := io.ReadAll(peerSide) // to braid's half-close
	if err != nil || !bytes.Equal(gotAtPeer, fromBraid) {
		t.Fatalf("the peer read %d bytes (want %d), %v", len(gotAtPeer), len(fromBraid), err)
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	r.wg.Wait() // both ways ended at the half-closes
	if ctl, err := r.fromPeer.frames(); err != nil || !slices.Equal(ctl, []yamuxHeader{{Type: yamuxTypePing, Flags: yamuxFlagSYN, Length: 77}}) || r.fromPeer.counts[yamuxTypeData] != 1 {
		t.Fatalf("from the peer: %v, %v, %v", ctl, r.fromPeer.counts, err)
	}
	if ctl, err := r.fromBraid.frames(); err != nil || !slices.Equal(ctl, []yamuxHeader{{Type: yamuxTypePing, Flags: yamuxFlagACK, Length: 77}, {Type: yamuxTypeGoAway}}) {
		t.Fatalf("from braid: %v, %v", ctl, err)
	}
}
