package libp2pmux

import (
	"crypto/tls"
	"net"
	"reflect"

	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
)

// braidConn returns the conn a session over the security conn nc reads
// and writes: nc itself, or for go-libp2p's TLS the *tls.Conn it carries.
//
// go-libp2p's TLS security conn (p2p/security/tls, conn.go) is a
// *tls.Conn embedded beside the peers' identities; the methods it declares
// are those identities' alone (LocalPeer, RemotePeer, RemotePublicKey,
// ConnState), so every net.Conn method is crypto/tls's own. braid reads
// crypto/tls differently from a conn it does not know: crypto/tls over
// TCP (and over go-multiaddr's wrapper of it, which every go-libp2p TCP
// conn is; braid sees through that itself) can have a read cut by a read
// deadline and resumed, a record half read staying buffered, so a Read
// may lend its buffer to the read loop and take the conn turn, and the
// socket under it gets TCP_NOTSENT_LOWAT. A conn braid does not know may
// lose its state at a timeout, as noise's does, and gets none of it.
// Handed the wrapper, braid would treat the security go-libp2p hosts
// negotiate first as such a conn. Measured between two go-libp2p hosts
// over TLS at GOMAXPROCS 2 (session 32, a throwaway test: 4,500 round
// trips of 64 B on one stream, no read deadline, 3 alternating rounds):
// p50 25.0-25.4 µs and p99 63-67 against 30.5-31.0 and 88-96 handed the
// wrapper (stock yamux: 26.8-49.6 and 90-92); the hosts' notifications
// over TLS within their spread (hostbench, 3 rounds).
func braidConn(nc net.Conn) net.Conn {
	if tc := libp2pTLSConn(nc); tc != nil {
		return tc
	}
	return nc
}

// libp2pTLSConn returns the *tls.Conn that nc embeds if nc is go-libp2p's
// TLS security conn, else nil. Its type is unexported (conn, in the
// package of libp2ptls.Transport) and names no security protocol of its
// own (its ConnState leaves that to the upgrader), so the type and the
// embedded field are found by reflection.
func libp2pTLSConn(nc net.Conn) *tls.Conn {
	v := reflect.ValueOf(nc)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	typ := v.Elem().Type()
	if typ.Name() != "conn" || typ.PkgPath() != reflect.TypeFor[libp2ptls.Transport]().PkgPath() {
		return nil
	}
	f, ok := typ.FieldByName("Conn")
	if !ok || !f.Anonymous || len(f.Index) != 1 || f.Type != reflect.TypeFor[*tls.Conn]() {
		return nil
	}
	tc, _ := v.Elem().Field(f.Index[0]).Interface().(*tls.Conn)
	return tc
}
