package peertls

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Files of a node's TLS directory.
const (
	TrustFile  = "ca.pem"
	CAKeyFile  = "ca-key.pem"
	CertFile   = "node.pem"
	KeyFile    = "node-key.pem"
	pemCert    = "CERTIFICATE"
	pemPrivKey = "PRIVATE KEY"
)

// Exists reports whether dir holds a node certificate.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, CertFile))
	return err == nil
}

// Init creates a new cluster's CA and node id's certificate in dir
// (`omnibus cluster init`). It refuses a directory that already holds a
// node certificate.
func Init(dir string, id uint64, now time.Time) (*Creds, error) {
	if Exists(dir) {
		return nil, fmt.Errorf("peertls: %s already holds a node certificate", dir)
	}
	ca, err := NewCA(now)
	if err != nil {
		return nil, err
	}
	c, err := ca.NewNode(id, []*x509.Certificate{ca.Cert}, now)
	if err != nil {
		return nil, err
	}
	return c, c.Save(dir)
}

// NewNode makes a key and a certificate for node id, issued by ca, and
// returns them as credentials that trust trusted and can sign with ca.
func (ca *CA) NewNode(id uint64, trusted []*x509.Certificate, now time.Time) (*Creds, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Issue(key.Public(), id, now)
	if err != nil {
		return nil, err
	}
	return NewCreds(tls.Certificate{Certificate: [][]byte{leaf.Raw, ca.Cert.Raw}, PrivateKey: key}, trusted, ca)
}

// Load reads the credentials kept in dir. A directory without a node
// certificate gives an error wrapping os.ErrNotExist.
func Load(dir string) (*Creds, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("peertls: node certificate in %s: %w", dir, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, TrustFile))
	if err != nil {
		return nil, fmt.Errorf("peertls: trusted CAs: %w", err)
	}
	trusted, err := ParseCerts(b)
	if err != nil {
		return nil, fmt.Errorf("peertls: %s: %w", TrustFile, err)
	}
	var ca *CA
	if b, err := os.ReadFile(filepath.Join(dir, CAKeyFile)); err == nil {
		if ca, err = ParseCA(b); err != nil {
			return nil, fmt.Errorf("peertls: %s: %w", CAKeyFile, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("peertls: %w", err)
	}
	c, err := NewCreds(cert, trusted, ca)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	return c, nil
}

// Save writes c into dir (created, mode 0700), each file replaced
// atomically; keys get mode 0600.
func (c *Creds) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("peertls: %w", err)
	}
	key, err := EncodeKey(c.Cert.PrivateKey)
	if err != nil {
		return err
	}
	var chain []byte
	for _, der := range c.Cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: der})...)
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{TrustFile, EncodeCerts(c.Trusted), 0o644},
		{KeyFile, key, 0o600},
		{CertFile, chain, 0o644}, // last: its presence says the rest is there
	}
	if c.CA != nil {
		b, err := EncodeCA(c.CA)
		if err != nil {
			return err
		}
		files = append([]struct {
			name string
			data []byte
			mode os.FileMode
		}{{CAKeyFile, b, 0o600}}, files...)
	}
	for _, f := range files {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// EncodeCerts is certs as PEM.
func EncodeCerts(certs []*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: c.Raw})...)
	}
	return b
}

// ParseCerts reads PEM certificates; it wants at least one.
func ParseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type != pemCert {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate")
	}
	return out, nil
}

// EncodeKey is a private key as PKCS #8 PEM.
func EncodeKey(key crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("peertls: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivKey, Bytes: der}), nil
}

// EncodeCA is the CA's key and certificate, PEM, in one file.
func EncodeCA(ca *CA) ([]byte, error) {
	key, err := EncodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	return append(key, EncodeCerts([]*x509.Certificate{ca.Cert})...), nil
}

// ParseCA reads what EncodeCA wrote, checking the key is the
// certificate's.
func ParseCA(b []byte) (*CA, error) {
	certs, err := ParseCerts(b)
	if err != nil {
		return nil, err
	}
	var key crypto.Signer
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type == pemPrivKey {
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, errors.New("the CA key cannot sign")
			}
			key = s
		}
	}
	if key == nil {
		return nil, errors.New("no CA key")
	}
	ca := &CA{Cert: certs[0], Key: key}
	if !ca.Cert.IsCA {
		return nil, errors.New("not a CA certificate")
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(ca.Cert.PublicKey) {
		return nil, errors.New("the CA key does not match its certificate")
	}
	return ca, nil
}

// writeFileAtomic replaces path with data: a temporary file, fsynced,
// renamed over path, the directory fsynced.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("peertls: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("peertls: write %s: %w", path, err)
	}
	return nil
}
