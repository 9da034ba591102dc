package slowconn

import (
	"io"
	"net"
)

// opError wraps err as the standard library's conns do, so callers can use
// errors.Is (os.ErrDeadlineExceeded, net.ErrClosed, io.ErrClosedPipe) and
// net.Error's Timeout. io.EOF is returned bare, as io.Reader requires.
func opError(op string, local, remote net.Addr, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: network, Source: local, Addr: remote, Err: err}
}

// network is the Network of a Pipe end's addresses.
const network = "slowconn"

// addr is the address of one end of a Pipe.
type addr string

// Network returns "slowconn".
func (addr) Network() string { return network }

// String returns the end's name.
func (a addr) String() string { return string(a) }
