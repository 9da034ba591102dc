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
