package braid

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"

	varint "github.com/multiformats/go-varint"
)

// mplexFrameBytes encodes one raw mplex frame: uvarint(id<<3|tag),
// uvarint(len(body)), body.
func mplexFrameBytes(id, tag uint64, body []byte) []byte {
	b := varint.ToUvarint(id<<3 | tag)
	b = append(b, varint.ToUvarint(uint64(len(body)))...)
	return append(b, body...)
}

// decodeMplex runs the codec of the client or server side on b.
func decodeMplex(client bool, b []byte) (header, int, error) {
	return mplexCodec{client: client}.readHeader(bufio.NewReader(bytes.NewReader(b)))
}

func TestMplexKeyMapping(t *testing.T) {
	for _, id := range []uint64{0, 1, 2, 1000, mplexMaxStreamID} {
		for _, byClient := range []bool{true, false} {
			key := mplexKey(id, byClient)
			if (key%2 == 1) != byClient {
				t.Errorf("key %d of id %d (client %v) has the wrong parity", key, id, byClient)
			}
			gotID, gotClient := mplexWireID(key)
			if gotID != id || gotClient != byClient {
				t.Errorf("key %d maps back to (%d, %v), want (%d, %v)", key, gotID, gotClient, id, byClient)
			}
		}
	}
	// The largest key fits: no wrap-around to small keys.
	if k := mplexKey(mplexMaxStreamID, false); k < mplexKey(mplexMaxStreamID, true) || k == 0 {
		t.Errorf("largest key %d wrapped", k)
	}
}

// TestMplexDecodeTags checks every tag as each side sees it: which stream
// (key) and which engine frame it becomes.
func TestMplexDecodeTags(t *testing.T) {
	type want struct {
		typ    frameType
		flags  frameFlags
		length uint32
		peers  bool // the stream is one the sender (our peer) opened
	}
	cases := []struct {
		tag  uint64
		body []byte
		want want
	}{
		{mplexNewStream, []byte("7"), want{typeWindowUpdate, flagSYN, 0, true}},
		{mplexMessageInitiator, []byte("hello"), want{typeData, 0, 5, true}},
		{mplexMessageReceiver, []byte("hello"), want{typeData, 0, 5, false}},
		{mplexCloseInitiator, nil, want{typeWindowUpdate, flagFIN, 0, true}},
		{mplexCloseReceiver, nil, want{typeWindowUpdate, flagFIN, 0, false}},
		{mplexResetInitiator, nil, want{typeWindowUpdate, flagRST, 0, true}},
		{mplexResetReceiver, []byte("ignored"), want{typeWindowUpdate, flagRST, 0, false}},
	}
	for _, client := range []bool{true, false} {
		for _, c := range cases {
			frame := mplexFrameBytes(7, c.tag, c.body)
			h, n, err := decodeMplex(client, frame)
			if err != nil {
				t.Fatalf("client %v tag %d: %v", client, c.tag, err)
			}
			if n != len(frame) && c.want.typ != typeData {
				t.Errorf("client %v tag %d: consumed %d of %d bytes", client, c.tag, n, len(frame))
			}
			// The peer's streams have the peer's parity.
			wantKey := mplexKey(7, c.want.peers != client)
			if h.typ != c.want.typ || h.flags != c.want.flags || h.length != c.want.length || h.streamID != wantKey {
				t.Errorf("client %v tag %d: got %+v, want %+v key %d", client, c.tag, h, c.want, wantKey)
			}
		}
	}
}

// TestMplexEncode checks the bytes appendHeader produces against
// hand-encoded mplex frames.
func TestMplexEncode(t *testing.T) {
	c := mplexCodec{client: true}
	ours, theirs := mplexKey(5, true), mplexKey(5, false)
	cases := []struct {
		name string
		h    header
		want []byte
	}{
		{"open", header{typ: typeWindowUpdate, flags: flagSYN, streamID: ours}, mplexFrameBytes(5, mplexNewStream, []byte("5"))},
		{"open+close", header{typ: typeWindowUpdate, flags: flagSYN | flagFIN, streamID: ours},
			append(mplexFrameBytes(5, mplexNewStream, []byte("5")), mplexFrameBytes(5, mplexCloseInitiator, nil)...)},
		{"data ours", header{typ: typeData, streamID: ours, length: 300}, mplexFrameBytes(5, mplexMessageInitiator, make([]byte, 300))[:3]},
		{"data theirs", header{typ: typeData, streamID: theirs, length: 3}, []byte{5<<3 | mplexMessageReceiver, 3}},
		{"close ours", header{typ: typeWindowUpdate, flags: flagFIN, streamID: ours}, mplexFrameBytes(5, mplexCloseInitiator, nil)},
		{"close theirs", header{typ: typeWindowUpdate, flags: flagFIN, streamID: theirs}, mplexFrameBytes(5, mplexCloseReceiver, nil)},
		{"reset ours", header{typ: typeWindowUpdate, flags: flagRST, streamID: ours, length: 42}, mplexFrameBytes(5, mplexResetInitiator, nil)},
		{"reset theirs", header{typ: typeWindowUpdate, flags: flagRST | flagFIN, streamID: theirs}, mplexFrameBytes(5, mplexResetReceiver, nil)},
		{"window update", header{typ: typeWindowUpdate, streamID: ours, length: 1000}, nil},
		{"ping", header{typ: typePing, flags: flagSYN, length: 1}, nil},
		{"go-away", header{typ: typeGoAway, length: 1}, nil},
	}
	for _, tc := range cases {
		if got := c.appendHeader(nil, tc.h); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: got % x, want % x", tc.name, got, tc.want)
		}
	}
}

func TestMplexUvarint(t *testing.T) {
	ff := func(n int, last byte) []byte { return append(bytes.Repeat([]byte{0xff}, n), last) }
	cases := []struct {
		name  string
		in    []byte
		want  uint64
		n     int
		err   error // nil, io.EOF, io.ErrUnexpectedEOF or ErrProtocol
		proto bool
	}{
		{"zero", []byte{0}, 0, 1, nil, false},
		{"one byte", []byte{0x7f}, 127, 1, nil, false},
		{"two bytes", []byte{0x80, 0x01}, 128, 2, nil, false},
		{"nine bytes (63 bits)", ff(8, 0x7f), 1<<63 - 1, 9, nil, false},
		{"empty", nil, 0, 0, io.EOF, false},
		{"truncated", []byte{0x80}, 0, 1, io.ErrUnexpectedEOF, false},
		{"truncated long", ff(5, 0xff), 0, 6, io.ErrUnexpectedEOF, false},
		{"not minimal", []byte{0x80, 0x00}, 0, 2, ErrProtocol, true},
		{"ten bytes", ff(9, 0x01), 0, 9, ErrProtocol, true},
		{"eleven bytes", ff(10, 0x01), 0, 9, ErrProtocol, true},
	}
	for _, c := range cases {
		x, n, err := readUvarint(bufio.NewReader(bytes.NewReader(c.in)))
		var pe *ProtocolError
		if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) || c.proto != errors.As(err, &pe) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.err)
		}
		if n != c.n || (err == nil && x != c.want) {
			t.Errorf("%s: got %d (%d bytes), want %d (%d bytes)", c.name, x, n, c.want, c.n)
		}
		// go-varint agrees on what is valid.
		if _, _, verr := varint.FromUvarint(c.in); (verr == nil) != (err == nil) && c.err != io.ErrUnexpectedEOF {
			t.Errorf("%s: go-varint says %v, braid %v", c.name, verr, err)
		}
	}
}

// TestMplexDecodeErrors checks frames the codec must refuse, and
// truncations, which must read as io.ErrUnexpectedEOF (the conn ended
// inside a frame), never as a clean io.EOF.
func TestMplexDecodeErrors(t *testing.T) {
	over := varint.ToUvarint(MplexMaxMessage + 1)
	cases := []struct {
		name string
		in   []byte
		err  error
	}{
		{"message over 1 MiB", append(varint.ToUvarint(1<<3|mplexMessageInitiator), over...), ErrProtocol},
		{"name over 1 MiB", append(varint.ToUvarint(1<<3|mplexNewStream), over...), ErrProtocol},
		{"id beyond the key space", mplexFrameBytes(mplexMaxStreamID+1, mplexNewStream, nil), ErrProtocol},
		{"huge id", mplexFrameBytes(1<<59, mplexMessageInitiator, nil), ErrProtocol},
		{"unknown tag 7", mplexFrameBytes(1, 7, nil), ErrProtocol},
		{"header only", varint.ToUvarint(1<<3 | mplexNewStream), io.ErrUnexpectedEOF},
		{"truncated length", append(varint.ToUvarint(1<<3|mplexNewStream), 0x80), io.ErrUnexpectedEOF},
		{"truncated name", mplexFrameBytes(1, mplexNewStream, []byte("12345"))[:4], io.ErrUnexpectedEOF},
		{"truncated reset body", mplexFrameBytes(1, mplexResetInitiator, []byte("xx"))[:3], io.ErrUnexpectedEOF},
	}
	for _, client := range []bool{true, false} {
		for _, c := range cases {
			_, n, err := decodeMplex(client, c.in)
			if !errors.Is(err, c.err) {
				t.Errorf("%s: got %v, want %v", c.name, err, c.err)
			}
			if n > len(c.in) {
				t.Errorf("%s: claims %d bytes consumed of %d", c.name, n, len(c.in))
			}
		}
	}
	// The largest legal id and a 1 MiB name are fine.
	if _, _, err := decodeMplex(false, mplexFrameBytes(mplexMaxStreamID, mplexNewStream, nil)); err != nil {
		t.Errorf("largest id: %v", err)
	}
	name := bytes.Repeat([]byte("n"), MplexMaxMessage)
	h, n, err := decodeMplex(false, mplexFrameBytes(3, mplexNewStream, name))
	if err != nil || h.flags != flagSYN || h.length != 0 || n != MplexMaxMessage+1+3 {
		t.Errorf("1 MiB name: %+v %d %v", h, n, err)
	}
}

// FuzzMplexDecoder feeds arbitrary bytes to the mplex codec of either side:
// it never panics, never claims more bytes than it read, and every frame
// it accepts encodes back (by the peer's codec) to a frame that decodes to
// the same header; a data frame's header encodes back to the same bytes.
func FuzzMplexDecoder(f *testing.F) {
	peer := mplexCodec{client: true}
	for _, h := range []header{
		{typ: typeWindowUpdate, flags: flagSYN, streamID: mplexKey(0, true)},
		{typ: typeData, streamID: mplexKey(0, true), length: 5},
		{typ: typeData, streamID: mplexKey(9, false), length: MplexMaxMessage},
		{typ: typeWindowUpdate, flags: flagFIN, streamID: mplexKey(300, true)},
		{typ: typeWindowUpdate, flags: flagRST, streamID: mplexKey(mplexMaxStreamID, false)},
	} {
		f.Add(false, peer.appendHeader(nil, h))
	}
	f.Add(true, mplexFrameBytes(1, mplexNewStream, []byte("a name")))
	f.Add(true, mplexFrameBytes(1, mplexResetReceiver, []byte("body")))
	f.Add(false, bytes.Repeat([]byte{0xff}, 11))
	f.Add(false, []byte{0x80, 0x00, 0x00})
	f.Add(true, append(varint.ToUvarint(8), varint.ToUvarint(MplexMaxMessage+1)...))
	f.Fuzz(func(t *testing.T, client bool, in []byte) {
		// A buffer that holds all of in, so r.Buffered() accounts for
		// every byte (with bufio's default 4096, an input one byte longer
		// left a byte unread and the count off by one).
		r := bufio.NewReaderSize(bytes.NewReader(in), len(in)+16)
		c := mplexCodec{client: client}
		h, n, err := c.readHeader(r)
		if consumed := len(in) - r.Buffered(); n != consumed && !(err == nil && h.typ == typeData) {
			// Data frames leave their payload to the session; the
			// bufio.Reader may have buffered it.
			t.Fatalf("reported %d bytes consumed, read %d (err %v)", n, consumed, err)
		}
		if n > len(in) {
			t.Fatalf("reported %d bytes consumed of %d", n, len(in))
		}
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) && err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			if err == io.EOF && n != 0 {
				t.Fatalf("clean io.EOF after %d bytes of a frame", n)
			}
			return
		}
		if h.streamID == 0 || (h.typ != typeData && h.length != 0) {
			t.Fatalf("bad header %+v", h)
		}
		if !((h.typ == typeData && h.flags == 0) || (h.typ == typeWindowUpdate &&
			(h.flags == flagSYN || h.flags == flagFIN || h.flags == flagRST))) {
			t.Fatalf("unexpected frame %+v", h)
		}
		if _, opened := mplexWireID(h.streamID); h.flags == flagSYN && opened == client {
			t.Fatalf("NewStream mapped to one of our own keys: %+v", h)
		}
		enc := mplexCodec{client: !client}.appendHeader(nil, h)
		if h.typ == typeData {
			if !bytes.Equal(enc, in[:n]) {
				t.Fatalf("data header re-encodes to % x, read % x", enc, in[:n])
			}
			enc = append(enc, make([]byte, h.length)...)
		}
		h2, n2, err := decodeMplex(client, enc)
		if err != nil || h2 != h || n2 != len(enc)-int(h2.length) {
			t.Fatalf("round trip: %+v -> % x -> %+v, %d, %v", h, enc, h2, n2, err)
		}
		if h.flags == flagSYN {
			id, _ := mplexWireID(h.streamID)
			want := mplexFrameBytes(id, mplexNewStream, []byte(strconv.FormatUint(id, 10)))
			if !bytes.Equal(enc, want) {
				t.Fatalf("NewStream encodes to % x, want % x", enc, want)
			}
		}
	})
}
