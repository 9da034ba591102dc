package braid

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVectorReader: one read fills the first buffer, then the second, and
// the end of the stream is io.EOF; only sockets get a vector reader.
func TestVectorReader(t *testing.T) {
	c1, c2 := tcpPair(t)
	v := newVectorReader(c2)
	require.NotNil(t, v, "a TCP conn has a vector reader")
	msg := bytes.Repeat([]byte("0123456789"), 10)
	_, err := c1.Write(msg)
	require.NoError(t, err)
	a, b := make([]byte, 10), make([]byte, 200)
	n, err := v.read(a, b) // one small write on loopback: one segment, read whole
	require.NoError(t, err)
	require.Equal(t, len(msg), n)
	require.Equal(t, msg[:10], a)
	require.Equal(t, msg[10:], b[:len(msg)-10])
	require.NoError(t, c1.Close())
	_, err = v.read(a, b)
	require.ErrorIs(t, err, io.EOF)

	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	require.Nil(t, newVectorReader(p1), "a pipe has none")
}
