package peertls

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// Creds are a node's credentials on the peer port.
type Creds struct {
	// ID is the node id Cert names.
	ID uint64
	// Cert is the node's certificate and key, its issuer's certificate as
	// the chain.
	Cert tls.Certificate
	// Trusted are the CAs whose node certificates this node accepts.
	Trusted []*x509.Certificate
	// CA is the signing CA, nil if this node has none (it cannot admit
	// new members).
	CA *CA

	roots *x509.CertPool
	// now is the clock certificates are checked against (tests).
	now func() time.Time
}

// NewCreds assembles credentials and checks that they fit together: the
// certificate names a node and is issued by a trusted CA.
func NewCreds(cert tls.Certificate, trusted []*x509.Certificate, ca *CA) (*Creds, error) {
	if len(cert.Certificate) == 0 {
		return nil, errors.New("peertls: no node certificate")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("peertls: node certificate: %w", err)
	}
	cert.Leaf = leaf
	k, ok := cert.PrivateKey.(crypto.Signer)
	pub, ok2 := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !ok2 || !pub.Equal(k.Public()) {
		return nil, errors.New("peertls: the node's key does not match its certificate")
	}
	if len(trusted) == 0 {
		return nil, errors.New("peertls: no trusted CA")
	}
	c := &Creds{Cert: cert, Trusted: trusted, CA: ca, roots: x509.NewCertPool(), now: time.Now}
	for _, t := range trusted {
		c.roots.AddCert(t)
	}
	if c.ID, err = c.Verify([]*x509.Certificate{leaf}, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, fmt.Errorf("peertls: this node's own certificate: %w", err)
	}
	if ca != nil && !c.trusts(ca.Cert) {
		return nil, errors.New("peertls: the signing CA is not among the trusted ones")
	}
	return c, nil
}

// SetClock replaces the clock certificates are checked against (tests).
func (c *Creds) SetClock(now func() time.Time) { c.now = now }

func (c *Creds) trusts(ca *x509.Certificate) bool {
	for _, t := range c.Trusted {
		if t.Equal(ca) {
			return true
		}
	}
	return false
}

// Errors of [Creds.Verify], wrapped with the detail.
var (
	ErrNoCertificate = errors.New("peertls: no client certificate")
	ErrUntrusted     = errors.New("peertls: certificate not issued by this cluster's CA")
	ErrExpired       = errors.New("peertls: certificate expired or not yet valid")
	ErrWrongNode     = errors.New("peertls: certificate of another node")
)

// Verify checks a chain a peer presented (leaf first): the leaf is issued
// by a trusted CA, valid now, for usage; it returns the node id the leaf
// names.
func (c *Creds) Verify(chain []*x509.Certificate, usage x509.ExtKeyUsage) (uint64, error) {
	if len(chain) == 0 {
		return 0, ErrNoCertificate
	}
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, x := range chain[1:] {
		inter.AddCert(x)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: c.roots, Intermediates: inter, CurrentTime: c.now(),
		KeyUsages: []x509.ExtKeyUsage{usage}})
	var inv x509.CertificateInvalidError
	switch {
	case errors.As(err, &inv) && inv.Reason == x509.Expired:
		return 0, fmt.Errorf("%w: %q valid %s to %s", ErrExpired, leaf.Subject.CommonName,
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	case errors.As(err, new(x509.UnknownAuthorityError)):
		return 0, fmt.Errorf("%w: %q issued by %q", ErrUntrusted, leaf.Subject.CommonName, leaf.Issuer.CommonName)
	case err != nil:
		return 0, fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	return NodeID(leaf)
}

// ServerConfig is the peer port's TLS configuration. A client certificate
// is asked for and, when one is given, checked with [Creds.Verify] during
// the handshake (refused: the handshake fails, and refused calls with the
// reason); a client without one gets through the handshake, for the join
// exchange only: the caller refuses everything else to it.
func (c *Creds) ServerConfig(refused func(error)) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Cert},
		ClientAuth:   tls.RequestClientCert,
		NextProtos:   []string{"h2", "http/1.1"},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil
			}
			_, err := c.Verify(cs.PeerCertificates, x509.ExtKeyUsageClientAuth)
			if err != nil && refused != nil {
				refused(err)
			}
			return err
		},
	}
}

// ClientConfig is the TLS configuration to dial a peer with: it presents
// this node's certificate and accepts the peer's only if a trusted CA
// issued it and it names node peer (0: any member).
func (c *Creds) ClientConfig(peer uint64) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Cert},
		// Peers are named by node id, not host name: Go's host name check
		// is replaced by VerifyConnection's.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := c.Verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if peer != 0 && id != peer {
				return fmt.Errorf("%w: the peer presented node %d's certificate, expected node %d's", ErrWrongNode, id, peer)
			}
			return nil
		},
	}
}
