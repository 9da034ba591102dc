package contenders

import (
	"net"

	"github.com/braidmux/braid/internal/tlstest"
)

// The TLS transport: every libp2p connection is secured, and a secured
// conn has no writev, so every contender is also measured over TLS 1.3
// (crypto/tls, a certificate generated for the run: internal/tlstest).

// TLS is c over TLS 1.3: its sessions run over secured conns, and the raw
// limit (RawTCP) becomes one TLS connection per stream. The name stays c's.
func TLS(c Contender) Contender {
	if c.overTLS != nil {
		return c.overTLS()
	}
	return Contender{Name: c.Name, New: func(c1, c2 net.Conn) (Session, Session, error) {
		t1, t2, err := tlstest.Secure(c1, c2)
		if err != nil {
			return nil, nil, err
		}
		return c.New(t1, t2)
	}}
}
