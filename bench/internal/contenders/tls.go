package contenders

import (
	"net"

	"github.com/braidmux/braid/internal/tlstest"
)

// The TLS transport: every libp2p connection is secured, and a secured
// conn has no writev, so every contender is also measured over TLS 1.3
// (crypto/tls, a certificate generated for the run: internal/tlstest).

// securer makes TLS 1.3 conns from connected conns with one generated
// certificate.
type securer = tlstest.Securer

// newSecurer generates the certificate and the two configs that trust it.
func newSecurer() (*securer, error) { return tlstest.New() }

// TLS is c over TLS 1.3: its sessions run over secured conns, and the raw
// limit (RawTCP) becomes one TLS connection per stream. The name stays c's.
func TLS(c Contender) Contender {
	if c.overTLS != nil {
		return c.overTLS()
	}
	return Contender{Name: c.Name, New: func(c1, c2 net.Conn) (Session, Session, error) {
		s, err := newSecurer()
		if err != nil {
			c1.Close()
			c2.Close()
			return nil, nil, err
		}
		t1, t2, err := s.Pair(c1, c2)
		if err != nil {
			return nil, nil, err
		}
		return c.New(t1, t2)
	}}
}
