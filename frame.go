package braid

import (
	"encoding/binary"
	"io"
	"strconv"
)

// frameType is the yamux frame type.
type frameType uint8

const (
	typeData         frameType = 0 // payload of one stream
	typeWindowUpdate frameType = 1 // credit delta, or stream flags alone
	typePing         frameType = 2 // session ping; length carries the opaque id
	typeGoAway       frameType = 3 // session end; length carries the code
	typeLast                   = typeGoAway
)

func (t frameType) String() string {
	switch t {
	case typeData:
		return "data"
	case typeWindowUpdate:
		return "window-update"
	case typePing:
		return "ping"
	case typeGoAway:
		return "go-away"
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// frameFlags are the yamux flags; several can be set on one frame.
type frameFlags uint16

const (
	flagSYN frameFlags = 1 << iota // opens a stream, or asks for a pong
	flagACK                        // acknowledges a stream, or is a pong
	flagFIN                        // half-closes the sender's side
	flagRST                        // resets the stream; a window update's length is then the error code
)

const (
	// headerSize is the fixed size of a yamux header.
	headerSize = 12
	// protoVersion is the only yamux version there is.
	protoVersion = 0
)

// header is one decoded yamux frame header. For data frames length is the
// payload size that follows; for the other types it is the frame's value
// (window delta, ping id, go-away code, reset code).
type header struct {
	typ      frameType
	flags    frameFlags
	streamID uint32
	length   uint32
}

// put encodes h into b, which must hold headerSize bytes.
func (h header) put(b []byte) {
	_ = b[headerSize-1]
	b[0] = protoVersion
	b[1] = byte(h.typ)
	binary.BigEndian.PutUint16(b[2:4], uint16(h.flags))
	binary.BigEndian.PutUint32(b[4:8], h.streamID)
	binary.BigEndian.PutUint32(b[8:12], h.length)
}

// appendTo appends the encoded header to dst.
func (h header) appendTo(dst []byte) []byte {
	var b [headerSize]byte
	h.put(b[:])
	return append(dst, b[:]...)
}

// decodeHeader parses and checks a header. Anything a yamux peer can't
// legally send in a header alone (another version, an unknown type, a
// session frame with a stream id, a stream frame without one) is a
// *ProtocolError; checks that need session state are the session's.
func decodeHeader(b []byte) (header, error) {
	_ = b[headerSize-1]
	if b[0] != protoVersion {
		return header{}, &ProtocolError{Reason: "unsupported yamux version " + strconv.Itoa(int(b[0]))}
	}
	h := header{
		typ:      frameType(b[1]),
		flags:    frameFlags(binary.BigEndian.Uint16(b[2:4])),
		streamID: binary.BigEndian.Uint32(b[4:8]),
		length:   binary.BigEndian.Uint32(b[8:12]),
	}
	switch h.typ {
	case typeData, typeWindowUpdate:
		if h.streamID == 0 {
			return header{}, &ProtocolError{Reason: h.typ.String() + " frame on stream 0"}
		}
	case typePing, typeGoAway:
		if h.streamID != 0 {
			return header{}, &ProtocolError{Reason: h.typ.String() + " frame with a stream id", StreamID: h.streamID}
		}
	default:
		return header{}, &ProtocolError{Reason: "unknown frame " + h.typ.String()}
	}
	return h, nil
}

// capabilities are what a wire protocol can express, so that the engine
// asks the codec instead of checking which protocol it speaks.
type capabilities struct {
	// flowControl: per-stream windows and window updates (yamux). Without
	// it, each stream's receive buffer is bounded by
	// Config.MaxReceiveBuffer and a stream that overflows it is reset.
	flowControl bool
	// acks: the peer acknowledges new streams (yamux ACK), which the
	// libp2p ACK backlog counts.
	acks bool
	// ping: ping frames, for Ping, keep-alive and RTT measurement.
	ping bool
	// goAway: go-away frames with a code.
	goAway bool
	// resetCodes: a reset carries an error code.
	resetCodes bool
	// maxDataFrame bounds a data frame's payload; 0 means no bound.
	maxDataFrame int
}

// frameReader is the buffered reader codecs read frames from: the read
// loop's readBuffer, or a bufio.Reader.
type frameReader interface {
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	ReadByte() (byte, error)
}

// codec translates between a wire protocol and the engine's header.
type codec interface {
	caps() capabilities
	// readHeader reads the next frame's header from r, consuming any part
	// of the frame that isn't stream data (mplex names). It returns the
	// bytes it consumed, and a *ProtocolError for malformed input.
	readHeader(r frameReader) (header, int, error)
	// appendHeader appends the wire form of h (for data frames, the part
	// before the payload) to dst.
	appendHeader(dst []byte, h header) []byte
	// encodeData returns the wire header of data frame h by value (no
	// allocation), for payloads written by reference.
	encodeData(h header) (b [headerSize]byte, n int)
	// extendData makes frame, one encoded data frame (header and
	// payload), announce n more payload bytes, which the caller appends,
	// if its header can say so in place and its payload stays within
	// max; it reports whether it did. A frame that ends its stream's
	// side (FIN, RST) is never extended.
	extendData(frame []byte, n, max int) bool
}

// yamuxCodec is the yamux wire format.
type yamuxCodec struct{}

func (yamuxCodec) caps() capabilities {
	return capabilities{flowControl: true, acks: true, ping: true, goAway: true, resetCodes: true, maxDataFrame: maxYamuxDataFrame}
}

// maxYamuxDataFrame bounds the payload of the yamux Data frames braid
// sends, whatever MaxBatchBytes and the peer's window allow: rust-yamux
// (rust-libp2p, litep2p) closes the connection on a frame body over 1 MiB.
const maxYamuxDataFrame = 1 << 20

func (yamuxCodec) readHeader(r frameReader) (header, int, error) {
	b, err := r.Peek(headerSize)
	if err != nil {
		if err == io.EOF && len(b) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return header{}, len(b), err
	}
	h, err := decodeHeader(b)
	_, _ = r.Discard(headerSize)
	return h, headerSize, err
}

func (yamuxCodec) appendHeader(dst []byte, h header) []byte { return h.appendTo(dst) }

func (yamuxCodec) extendData(frame []byte, n, max int) bool {
	if len(frame) < headerSize || frameType(frame[1]) != typeData ||
		frameFlags(binary.BigEndian.Uint16(frame[2:4]))&(flagFIN|flagRST) != 0 {
		return false
	}
	length := binary.BigEndian.Uint32(frame[8:12])
	if int(length)+n > max {
		return false
	}
	binary.BigEndian.PutUint32(frame[8:12], length+uint32(n))
	return true
}

func (yamuxCodec) encodeData(h header) (b [headerSize]byte, n int) {
	h.put(b[:])
	return b, headerSize
}

// newCodec returns the codec of p for the client or server side.
func newCodec(p Protocol, client bool) codec {
	if p == Mplex {
		return mplexCodec{client: client}
	}
	return yamuxCodec{}
}
