package libp2pmux

import (
	"errors"
	"fmt"
	"os"

	"github.com/braidmux/braid"
	"github.com/libp2p/go-libp2p/core/network"
)

// ErrNilSession is returned by NewMuxedConn for a nil *braid.Session. It
// matches os.ErrInvalid.
var ErrNilSession = fmt.Errorf("libp2pmux: nil *braid.Session: %w", os.ErrInvalid)

// parseError maps an error of braid to go-libp2p's, exactly as go-libp2p's
// yamux adapter maps go-yamux's errors:
//
//   - a *braid.StreamError (a stream reset by either side) becomes a
//     *network.StreamError with the same code and side, which matches
//     network.ErrReset;
//   - a *braid.GoAwayError (a connection closed with a go-away code)
//     becomes a *network.ConnError, which matches network.ErrReset too;
//   - any other error matching braid.ErrStreamReset (a stream cut short
//     because its connection died) is wrapped so that it matches
//     network.ErrReset;
//   - every other error is returned as it is.
//
// The braid error stays reachable with errors.Is and errors.As.
func parseError(err error) error {
	if err == nil {
		return nil
	}
	var se *braid.StreamError
	if errors.As(err, &se) {
		return &network.StreamError{
			ErrorCode:      network.StreamErrorCode(se.ErrorCode),
			Remote:         se.Remote,
			TransportError: err,
		}
	}
	var ge *braid.GoAwayError
	if errors.As(err, &ge) {
		return &network.ConnError{
			ErrorCode:      network.ConnErrorCode(ge.ErrorCode),
			Remote:         ge.Remote,
			TransportError: err,
		}
	}
	if errors.Is(err, braid.ErrStreamReset) {
		return fmt.Errorf("%w: %w", network.ErrReset, err)
	}
	return err
}
