package peertls

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// Rotating the CA, without a moment when two members refuse each other
// (storage/raftstore/README.md, "Rotating the CA"):
//
//  1. Rotate, on one member: a new CA, and a cross-certificate of it
//     signed by the current CA. The member trusts both, signs with the
//     new one, and presents a certificate of the new CA followed by the
//     cross-certificate, which members that trust only the old CA follow
//     to it.
//  2. Renew, on every other member, from the first (its certificate and
//     the Manage key): the same trust, the new CA's key, and a
//     certificate of the new CA with the cross-certificate.
//  3. Finish, on every member once all run renewed: trust only the new
//     CA, and present the certificate without the cross-certificate. A
//     certificate of the old CA, a removed member's say, is refused from
//     then on.

// IssueChain issues node id's certificate for pub with the signing CA,
// followed by what this node presents after its own certificate (the
// cross-certificate during a rotation, else the CA's).
func (c *Creds) IssueChain(pub any, id uint64, now time.Time) ([][]byte, error) {
	if c.CA == nil {
		return nil, errors.New("peertls: this node holds no CA key")
	}
	leaf, err := c.CA.Issue(pub, id, now)
	if err != nil {
		return nil, err
	}
	return append([][]byte{leaf.Raw}, c.chainTail()...), nil
}

// chainTail is what follows a certificate of the signing CA: the rest of
// this node's own chain if the signing CA issued its certificate, else
// the CA's certificate.
func (c *Creds) chainTail() [][]byte {
	if c.Cert.Leaf.CheckSignatureFrom(c.CA.Cert) == nil && len(c.Cert.Certificate) > 1 {
		return c.Cert.Certificate[1:]
	}
	return [][]byte{c.CA.Cert.Raw}
}

// Rotate begins a CA rotation on this node (step 1 above) and returns its
// new credentials.
func (c *Creds) Rotate(now time.Time) (*Creds, error) {
	if c.CA == nil {
		return nil, errors.New("peertls: this node holds no CA key to rotate")
	}
	next, err := NewCA(now)
	if err != nil {
		return nil, err
	}
	cross, err := c.CA.crossSign(next, now)
	if err != nil {
		return nil, err
	}
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	leaf, err := next.Issue(key.Public(), c.ID, now)
	if err != nil {
		return nil, err
	}
	trusted := append(append([]*x509.Certificate(nil), c.Trusted...), next.Cert)
	return NewCreds(tls.Certificate{Certificate: [][]byte{leaf.Raw, cross.Raw}, PrivateKey: key}, trusted, next)
}

// crossSign certifies next's key as a CA under ca, for node certificates
// only.
func (ca *CA) crossSign(next *CA, now time.Time) (*x509.Certificate, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	notAfter := next.Cert.NotAfter
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               next.Cert.Subject,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, next.Key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("peertls: cross-sign the new CA: %w", err)
	}
	return x509.ParseCertificate(der)
}

// Finish ends a rotation on this node (step 3 above): it trusts only the
// signing CA, and presents its certificate with the CA's own. It refuses
// while its certificate is not of the signing CA (renew first).
func (c *Creds) Finish() (*Creds, error) {
	if c.CA == nil {
		return nil, errors.New("peertls: this node holds no CA key")
	}
	if err := c.Cert.Leaf.CheckSignatureFrom(c.CA.Cert); err != nil {
		return nil, errors.New("peertls: this node's certificate is not of the signing CA yet: renew it first")
	}
	cert := c.Cert
	cert.Certificate = [][]byte{cert.Certificate[0], c.CA.Cert.Raw}
	return NewCreds(cert, []*x509.Certificate{c.CA.Cert}, c.CA)
}
