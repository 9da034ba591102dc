package braid

import "net"

// checkedReader passes reads through to a net.Conn and turns a count that
// breaks the io.Reader contract (negative, or more than asked for) into
// errInvalidRead, which ends the session, instead of letting bufio panic
// in the read loop on a broken conn.
type checkedReader struct{ conn net.Conn }

func (r checkedReader) Read(p []byte) (int, error) {
	n, err := r.conn.Read(p)
	if n < 0 || n > len(p) {
		return 0, errInvalidRead
	}
	return n, err
}

// breakConn closes conn after a write on it failed, to wake the read loop
// and end the session. A security layer's Close would first write its
// close alert (crypto/tls: with a 5 s write deadline) after a write that
// just failed, often mid-record and into a socket the peer no longer
// drains, and the writer calls this with its lock held: so the conn under
// a layer that exposes it (NetConn, as *tls.Conn does) is closed instead,
// which also wakes the layer's reads. The session's own Close closes conn
// itself later, as always.
func breakConn(conn net.Conn) {
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		if under := nc.NetConn(); under != nil {
			conn = under
		}
	}
	_ = conn.Close()
}
