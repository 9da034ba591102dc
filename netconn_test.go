package braid

import (
	"context"
	"crypto/tls"
	"net"
	"runtime"
	"testing"

	"github.com/braidmux/braid/internal/tlstest"
	"github.com/stretchr/testify/require"
)

// namedTCPWrap is a named wrapper of a TCP conn: it could define a Read
// of its own, so braid does not see through it.
type namedTCPWrap struct{ *net.TCPConn }

// maWrap wraps a TCP conn as go-multiaddr's net package (manet.wrap) does:
// an unnamed struct embedding the conn beside a field of its own.
func maWrap(c net.Conn) net.Conn {
	return &struct {
		*net.TCPConn
		endpoints [2]string
	}{c.(*net.TCPConn), [2]string{"/ip4/127.0.0.1", "/ip4/127.0.0.1"}}
}

// tlsOverWrappedPair returns TLS over a loopback TCP pair whose ends are
// wrapped as maWrap wraps them, and the first end's TCP conn.
func tlsOverWrappedPair(t *testing.T) (tcp1 *net.TCPConn, t1, t2 *tls.Conn) {
	t.Helper()
	c1, c2 := tcpPair(t)
	sec, err := tlstest.New()
	require.NoError(t, err)
	t1, t2, err = sec.Pair(maWrap(c1), maWrap(c2))
	require.NoError(t, err)
	return c1.(*net.TCPConn), t1, t2
}

// TestWrappedNetConn: an unnamed struct that embeds a *net.TCPConn (or a
// pointer to one) is that conn: its reads can lend, and TLS over it too;
// a named wrapper, a struct embedding none and net.Pipe are not.
func TestWrappedNetConn(t *testing.T) {
	tc, t1, t2 := tlsOverWrappedPair(t)
	require.Same(t, tc, wrappedNetConn(maWrap(tc)))
	require.True(t, lendable(maWrap(tc)))
	require.Same(t, tc, wrappedNetConn(struct{ *net.TCPConn }{tc}), "an unnamed struct value")
	require.Nil(t, wrappedNetConn(struct{ *net.TCPConn }{}), "nothing embedded")
	require.Nil(t, wrappedNetConn(namedTCPWrap{tc}))
	require.False(t, lendable(namedTCPWrap{tc}), "a named wrapper may read its own way")
	require.Nil(t, wrappedNetConn(tc), "the conn itself is not a wrapper")
	require.True(t, lendable(tc))
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	require.Nil(t, wrappedNetConn(p1))
	require.False(t, lendable(p1))
	require.True(t, lendable(t1), "TLS over the wrapper")
	require.NoError(t, t1.Close())
	require.NoError(t, t2.Close())
}

// TestSessionOverWrappedTCP: a session over TLS over a wrapped TCP conn,
// as a go-libp2p host's over its TCP transport, gets what one over TLS
// over TCP gets: the conn turn at two P, lent reads, and every byte.
func TestSessionOverWrappedTCP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	_, t1, t2 := tlsOverWrappedPair(t)
	client, server := sessionPairOver(t, t1, t2, nil)
	require.True(t, client.turn.on && server.turn.on, "the conn turn")
	require.NotNil(t, client.cutter, "reads that can lend")
	a, err := client.OpenStream(context.Background())
	require.NoError(t, err)
	b, err := server.AcceptStream()
	require.NoError(t, err)
	echoed := make(chan error, 1)
	go func() { echoed <- echoMessages(b, 64) }()
	pingRoundTrips(t, a, 200, 64)
	require.NoError(t, a.CloseWrite())
	require.NoError(t, errWithin(t, echoed, "the echo"))
	require.NotZero(t, client.turn.taken.Load()+server.turn.taken.Load(), "frames Reads read")
}
