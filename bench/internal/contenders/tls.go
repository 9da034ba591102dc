package contenders

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"time"
)

// The TLS transport: every libp2p connection is secured, and a secured
// conn has no writev, so every contender is also measured over TLS 1.3
// (crypto/tls, a certificate generated for the run).

// tlsServerName is the name the generated certificate is for.
const tlsServerName = "braid.test"

// tlsCertLifetime is the generated certificate's validity.
const tlsCertLifetime = 24 * time.Hour

// securer makes TLS 1.3 conns from connected conns with one generated
// certificate.
type securer struct {
	client, server *tls.Config
}

// newSecurer generates a self-signed ECDSA P-256 certificate and the two
// configs that trust it.
func newSecurer() (*securer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: tlsServerName},
		DNSNames:     []string{tlsServerName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(tlsCertLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return &securer{
		server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
		},
		client: &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: tlsServerName},
	}, nil
}

// pair runs the handshake of c1 (client) and c2 (server) and returns the
// secured conns. On failure it closes both.
func (s *securer) pair(c1, c2 net.Conn) (*tls.Conn, *tls.Conn, error) {
	t1, t2 := tls.Client(c1, s.client), tls.Server(c2, s.server)
	errc := make(chan error, 1)
	go func() { errc <- t2.Handshake() }()
	err := t1.Handshake()
	if err != nil {
		c2.Close() // unblocks the server's handshake
	}
	err = errors.Join(err, <-errc)
	if err != nil {
		c1.Close()
		c2.Close()
		return nil, nil, err
	}
	return t1, t2, nil
}

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
		t1, t2, err := s.pair(c1, c2)
		if err != nil {
			return nil, nil, err
		}
		return c.New(t1, t2)
	}}
}
