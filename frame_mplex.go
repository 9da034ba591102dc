package braid

import (
	"io"
	"math"
	"strconv"

	varint "github.com/multiformats/go-varint"
)

// mplex wire tags (the low three bits of a header). Tags sent by the side
// that opened the stream are even ("initiator"), those sent by the other
// side odd ("receiver"); NewStream is always sent by the opener.
const (
	mplexNewStream        = 0
	mplexMessageReceiver  = 1
	mplexMessageInitiator = 2
	mplexCloseReceiver    = 3
	mplexCloseInitiator   = 4
	mplexResetReceiver    = 5
	mplexResetInitiator   = 6

	// mplexMaxStreamID keeps mplex stream ids inside braid's 32-bit
	// stream keys (key = 2*id + 1 or 2); a peer would need two billion
	// streams to reach it.
	mplexMaxStreamID = (math.MaxUint32 - 2) / 2
)

// MplexMaxMessage is the largest mplex message (go-mplex's MaxMessageSize):
// a longer one is a protocol error, and braid splits writes into messages
// of at most this size.
const MplexMaxMessage = 1 << 20

// mplexCodec translates mplex frames to and from the engine's header.
//
// mplex numbers the streams each side opens from 0, so an id alone is
// ambiguous; the engine keys streams as yamux numbers them: streams the
// client side opened get odd keys (2*id + 1), the server side's even keys
// (2*id + 2). With that mapping the engine's parity rules hold unchanged.
type mplexCodec struct {
	client bool // this side is the session's client
}

// key returns the engine key of wire id opened by the client side or not.
func mplexKey(id uint64, openedByClient bool) uint32 {
	if openedByClient {
		return uint32(2*id + 1)
	}
	return uint32(2*id + 2)
}

// wireID splits an engine key into the wire id and whether the client side
// opened the stream.
func mplexWireID(key uint32) (id uint64, openedByClient bool) {
	if key%2 == 1 {
		return uint64(key-1) / 2, true
	}
	return uint64(key-2) / 2, false
}

func (c mplexCodec) caps() capabilities {
	return capabilities{maxDataFrame: MplexMaxMessage}
}

// readHeader reads one mplex frame header. NewStream names and the
// payloads of Close and Reset (always empty from go-mplex) are consumed
// here: the engine sees them as SYN, FIN and RST frames without data.
func (c mplexCodec) readHeader(r frameReader) (header, int, error) {
	tagged, n1, err := readUvarint(r)
	if err != nil {
		return header{}, n1, err
	}
	length, n2, err := readUvarint(r)
	n := n1 + n2
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the conn ended inside a frame
	}
	if err != nil {
		return header{}, n, err
	}
	if length > MplexMaxMessage {
		return header{}, n, &ProtocolError{Reason: "mplex message over 1 MiB"}
	}
	id, tag := tagged>>3, tagged&7
	if id > mplexMaxStreamID {
		return header{}, n, &ProtocolError{Reason: "mplex stream id out of range"}
	}
	// Who opened the stream: the sender for NewStream and even tags.
	senderOpened := tag == mplexNewStream || tag%2 == 0
	openedByClient := senderOpened != c.client // the sender is the peer
	h := header{typ: typeWindowUpdate, streamID: mplexKey(id, openedByClient), length: uint32(length)}
	switch tag {
	case mplexNewStream:
		h.flags = flagSYN
	case mplexMessageReceiver, mplexMessageInitiator:
		h.typ = typeData
		return h, n, nil
	case mplexCloseReceiver, mplexCloseInitiator:
		h.flags = flagFIN
	case mplexResetReceiver, mplexResetInitiator:
		h.flags = flagRST
	default:
		return header{}, n, &ProtocolError{Reason: "unknown mplex tag " + strconv.Itoa(int(tag))}
	}
	// Not data: skip the name (or the empty body) here.
	m, err := r.Discard(int(length))
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	h.length = 0
	return h, n + m, err
}

// appendHeader appends the mplex form of h: a NewStream with the stream's
// decimal id as its name for SYN, a Message header for data, Close for
// FIN, Reset for RST. Frames mplex has no form for (window updates, ACKs,
// pings, go-aways) append nothing; the engine doesn't send them when the
// codec's capabilities say so.
func (c mplexCodec) appendHeader(dst []byte, h header) []byte {
	id, openedByClient := mplexWireID(h.streamID)
	weOpened := openedByClient == c.client
	tag := func(initiator, receiver uint64) uint64 {
		if weOpened {
			return initiator
		}
		return receiver
	}
	switch {
	case h.typ == typeData:
		dst = appendUvarint(dst, id<<3|tag(mplexMessageInitiator, mplexMessageReceiver))
		return appendUvarint(dst, uint64(h.length))
	case h.typ != typeWindowUpdate:
		return dst
	case h.flags&flagRST != 0:
		dst = appendUvarint(dst, id<<3|tag(mplexResetInitiator, mplexResetReceiver))
		return appendUvarint(dst, 0)
	case h.flags&flagSYN != 0:
		var name [20]byte
		nameB := strconv.AppendUint(name[:0], id, 10)
		dst = appendUvarint(dst, id<<3|mplexNewStream)
		dst = appendUvarint(dst, uint64(len(nameB)))
		dst = append(dst, nameB...)
		if h.flags&flagFIN == 0 {
			return dst
		}
		fallthrough
	case h.flags&flagFIN != 0:
		dst = appendUvarint(dst, id<<3|tag(mplexCloseInitiator, mplexCloseReceiver))
		return appendUvarint(dst, 0)
	}
	return dst
}

// extendData never extends an mplex frame: its length is a uvarint, which
// may need another byte for the longer payload.
func (mplexCodec) extendData([]byte, int, int) bool { return false }

// encodeData returns a Message header: two uvarints of at most 5 bytes
// (id < 2^31, tag) and 3 bytes (length <= 1 MiB), within headerSize.
func (c mplexCodec) encodeData(h header) (b [headerSize]byte, n int) {
	id, openedByClient := mplexWireID(h.streamID)
	tag := uint64(mplexMessageReceiver)
	if openedByClient == c.client {
		tag = mplexMessageInitiator
	}
	n = varint.PutUvarint(b[:], id<<3|tag)
	n += varint.PutUvarint(b[n:], uint64(h.length))
	return b, n
}

// readUvarint reads a minimal uvarint of at most 9 bytes (63 bits), as
// go-varint defines it; anything else is a *ProtocolError. It also returns
// the bytes it consumed.
func readUvarint(r frameReader) (uint64, int, error) {
	var x uint64
	for i := 0; ; i++ {
		b, err := r.ReadByte()
		if err != nil {
			if err == io.EOF && i > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, i, err
		}
		if i == varint.MaxLenUvarint63-1 && b >= 0x80 {
			return 0, i + 1, &ProtocolError{Reason: "mplex varint longer than 9 bytes"}
		}
		if b < 0x80 {
			if b == 0 && i > 0 {
				return 0, i + 1, &ProtocolError{Reason: "mplex varint not minimally encoded"}
			}
			return x | uint64(b)<<(7*i), i + 1, nil
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
}

// appendUvarint appends x as a uvarint, encoded by go-varint.
func appendUvarint(dst []byte, x uint64) []byte {
	var b [varint.MaxLenUvarint63 + 1]byte
	return append(dst, b[:varint.PutUvarint(b[:], x)]...)
}
