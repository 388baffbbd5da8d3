package httpgw

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files LoadOrCreateCertificate keeps in the data directory.
const (
	certFile = "https-cert.pem"
	keyFile  = "https-key.pem"
)

// certLifetime is how long a generated certificate is valid.
const certLifetime = 10 * 365 * 24 * time.Hour

// LoadOrCreateCertificate returns the HTTPS certificate kept in dataDir,
// creating it on first use: a self-signed ECDSA P-256 certificate for
// localhost, 127.0.0.1, ::1 and hosts (names or IP addresses). An existing
// certificate is reused while it is valid and covers every host; otherwise
// it is replaced. certPEMPath is the certificate file, which clients add
// to their trusted roots (the Go and JS admin clients insist on https).
func LoadOrCreateCertificate(dataDir string, hosts []string) (cert tls.Certificate, certPEMPath string, err error) {
	certPath, keyPath := filepath.Join(dataDir, certFile), filepath.Join(dataDir, keyFile)
	names, ips := certSubjects(hosts)
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && certCovers(c, names, ips, time.Now()) {
		return c, certPath, nil
	}
	certPEM, keyPEM, err := newSelfSigned(names, ips, time.Now())
	if err != nil {
		return tls.Certificate{}, "", err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("httpgw: certificate directory: %w", err)
	}
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, "", err
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, "", err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, "", fmt.Errorf("httpgw: generated certificate: %w", err)
	}
	return c, certPath, nil
}

// certSubjects splits the always-included and extra hosts into DNS names
// and IP addresses, without duplicates.
func certSubjects(hosts []string) ([]string, []net.IP) {
	names := []string{"localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		} else if !slices.Contains(names, h) {
			names = append(names, h)
		}
	}
	return names, ips
}

// certCovers reports whether c is valid at now (with a day to spare) and
// names every host.
func certCovers(c tls.Certificate, names []string, ips []net.IP, now time.Time) bool {
	if len(c.Certificate) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil || now.Before(leaf.NotBefore) || now.Add(24*time.Hour).After(leaf.NotAfter) {
		return false
	}
	for _, n := range names {
		if !slices.Contains(leaf.DNSNames, n) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// newSelfSigned creates a self-signed server certificate and its key, PEM
// encoded.
func newSelfSigned(names []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "omnibus local broker", Organization: []string{"omnibus"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // so clients can trust it directly as a root
		DNSNames:              names,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so a crash never leaves half a key.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("httpgw: write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), perm)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("httpgw: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("httpgw: write %s: %w", path, err)
	}
	return nil
}
