package peertls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strconv"
	"time"
)

// Lifetimes of what this package issues. A node's certificate is renewed
// with `omnibus cluster ca renew` (storage/raftstore/README.md); the CA is
// rotated long before it ends.
const (
	CALifetime   = 20 * 365 * 24 * time.Hour
	NodeLifetime = 5 * 365 * 24 * time.Hour
	// backdate covers clocks a little behind the issuer's.
	backdate = time.Hour
)

// uriScheme names a node in its certificate: "omnibus-node:<id>".
const uriScheme = "omnibus-node"

// CA is a cluster certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA creates a CA (ECDSA P-256) for a new cluster.
func NewCA(now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"omnibus cluster"}, CommonName: "omnibus cluster CA " + serial.Text(16)[:8]},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// It signs node certificates, and, when the CA is rotated, its
		// successor's cross-certificate (which signs node certificates only).
		MaxPathLen: 1,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("peertls: create CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue signs a certificate naming node id for pub, usable by both ends of
// a peer connection.
func (ca *CA) Issue(pub crypto.PublicKey, id uint64, now time.Time) (*x509.Certificate, error) {
	if id == 0 {
		return nil, errors.New("peertls: node id 0")
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(NodeLifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"omnibus cluster"}, CommonName: "omnibus node " + strconv.FormatUint(id, 10)},
		URIs:         []*url.URL{NodeURI(id)},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("peertls: issue node %d's certificate: %w", id, err)
	}
	return x509.ParseCertificate(der)
}

// RequestKey is the public key of a certificate request (DER), after
// checking the request's signature: the requester holds the key. The
// request's names are ignored: the id a certificate names is the
// issuer's to decide (a join token's, the renewing node's).
func RequestKey(csrDER []byte) (crypto.PublicKey, error) {
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, fmt.Errorf("peertls: certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("peertls: certificate request: %w", err)
	}
	return csr.PublicKey, nil
}

// NewKey makes a node's key (ECDSA P-256).
func NewKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// NewRequest makes a certificate request (DER) for key: what a joining
// node sends with its token.
func NewRequest(key crypto.Signer, id uint64) ([]byte, error) {
	return x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "omnibus node " + strconv.FormatUint(id, 10)},
	}, key)
}

// NodeURI is the name a certificate gives node id.
func NodeURI(id uint64) *url.URL {
	return &url.URL{Scheme: uriScheme, Opaque: strconv.FormatUint(id, 10)}
}

// NodeID is the node id cert names (its one omnibus-node URI).
func NodeID(cert *x509.Certificate) (uint64, error) {
	var id uint64
	for _, u := range cert.URIs {
		if u.Scheme != uriScheme {
			continue
		}
		n, err := strconv.ParseUint(u.Opaque, 10, 64)
		if err != nil || n == 0 || id != 0 {
			return 0, fmt.Errorf("peertls: certificate %q names no single node id", cert.Subject.CommonName)
		}
		id = n
	}
	if id == 0 {
		return 0, fmt.Errorf("peertls: certificate %q names no node (not an omnibus node certificate)", cert.Subject.CommonName)
	}
	return id, nil
}

// Fingerprint is the SHA-256 of a certificate's public key
// (SubjectPublicKeyInfo), hex: what a join token carries of the CA, so
// that the joiner knows whom it talks to. It is the key's, not the
// certificate's: a CA's own certificate and one cross-signed for it
// while the CA is rotated have the same.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
