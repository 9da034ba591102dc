package braid

import (
	"net"
	"reflect"
)

// wrappedNetConn returns the *net.TCPConn or *net.UnixConn that c wraps
// when c is an unnamed struct (or a pointer to one) that embeds it
// directly, else nil. Such a conn is that conn: a type without a name has
// no methods of its own, and an embedded field's methods at the first
// depth are the struct's unless another field at that depth has the same
// one, in which case the struct would not be a net.Conn. go-multiaddr's
// net package wraps every conn it dials or accepts so (manet.wrap:
// struct{ *net.TCPConn; maEndpoints }), and go-libp2p's TCP transport
// with it: without this, the socket under every go-libp2p connection
// would be out of braid's reach (no TCP_NOTSENT_LOWAT, no cork, reads that
// can't lend). A named type may define its own Read, so none is followed.
func wrappedNetConn(c net.Conn) net.Conn {
	v := reflect.ValueOf(c)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || v.Type().Name() != "" {
		return nil
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.Anonymous || !f.IsExported() {
			continue
		}
		switch nc := v.Field(i).Interface().(type) {
		case *net.TCPConn:
			if nc != nil {
				return nc
			}
		case *net.UnixConn:
			if nc != nil {
				return nc
			}
		}
	}
	return nil
}
