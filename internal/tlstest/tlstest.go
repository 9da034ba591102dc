// Package tlstest secures loopback conns with TLS 1.3 for tests and
// benchmarks: every libp2p connection is secured, and a secured conn has
// no writev, so braid is tested and measured over crypto/tls too. The
// certificate is generated for the run.
package tlstest

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

// ServerName is the name the generated certificate is for.
const ServerName = "braid.test"

// certLifetime is the generated certificate's validity.
const certLifetime = 24 * time.Hour

// Securer makes TLS 1.3 conns from connected conns with one generated
// certificate.
type Securer struct {
	Client, Server *tls.Config
}

// New generates a self-signed ECDSA P-256 certificate and the two configs
// that trust it.
func New() (*Securer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: ServerName},
		DNSNames:     []string{ServerName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLifetime),
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
	return &Securer{
		Server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
		},
		Client: &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: ServerName},
	}, nil
}

// Pair runs the handshake of c1 (client) and c2 (server) and returns the
// secured conns. On failure it closes both.
func (s *Securer) Pair(c1, c2 net.Conn) (*tls.Conn, *tls.Conn, error) {
	t1, t2 := tls.Client(c1, s.Client), tls.Server(c2, s.Server)
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

// Secure secures c1 (client) and c2 (server) with a certificate generated
// for them. On failure it closes both and returns nil conns (not typed
// nil *tls.Conns).
func Secure(c1, c2 net.Conn) (net.Conn, net.Conn, error) {
	s, err := New()
	if err != nil {
		c1.Close()
		c2.Close()
		return nil, nil, err
	}
	t1, t2, err := s.Pair(c1, c2)
	if err != nil {
		return nil, nil, err
	}
	return t1, t2, nil
}
