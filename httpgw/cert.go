package httpgw

import (
	"crypto"
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
	"strings"
	"time"
)

// The broker's TLS identity, when the user brings no certificate: a local
// certificate authority, created once and kept, and a server certificate
// it issues for HTTPS and AMQPS. Clients trust the CA once; the server
// certificate can then be renewed, or reissued for more hosts, without
// anyone trusting anything again.
//
// The CA is name-constrained to loopback (localhost, 127.0.0.0/8, ::1) and
// the hosts it was created for, so that its key, which sits in a file,
// can never vouch for any other site a user's machine talks to. A later
// start asking for a host outside those constraints gets a new CA, and
// says so (CertificateFiles.NewCA).

// Files LoadOrCreateCertificates keeps in its directory.
const (
	// CAFile is the local CA's certificate: the file clients trust.
	CAFile = "omnibus-ca.pem"
	// caKeyFile holds the CA's key and certificate together, so that
	// the two are created (and read) in one step.
	caKeyFile = "omnibus-ca-key.pem"
	// CertFile is the server certificate followed by the CA's.
	CertFile = "omnibus-tls-cert.pem"
	// KeyFile is the server certificate's key.
	KeyFile = "omnibus-tls-key.pem"
)

// Lifetimes of what LoadOrCreateCertificates generates. A server
// certificate within renewBefore of its end is replaced at the next
// start; so is a CA (then trusted again).
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	certLifetime = 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

// CertificateFiles is the broker's TLS identity and where it is kept.
type CertificateFiles struct {
	// Certificate is the server certificate with its key, the CA's
	// certificate as its chain.
	Certificate tls.Certificate
	// CAPath is the CA's certificate file, which clients add to their
	// trusted roots; CertPath and KeyPath are the server certificate's.
	CAPath, CertPath, KeyPath string
	// NewCA says the CA was created (or replaced) by this call: clients
	// that trusted an earlier one must trust this one.
	NewCA bool
}

// LoadOrCreateCertificate is [LoadOrCreateCertificates] for callers that
// need only the certificate and the file clients trust (the CA's).
func LoadOrCreateCertificate(dir string, hosts []string) (cert tls.Certificate, caPath string, err error) {
	f, err := LoadOrCreateCertificates(dir, hosts)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	return f.Certificate, f.CAPath, nil
}

// LoadOrCreateCertificates returns the TLS identity kept in dir, creating
// what is missing or no longer fits: the local CA (ECDSA P-256, ten
// years), and a server certificate it issues (one year) for localhost,
// 127.0.0.1, ::1 and hosts (names or IP addresses). Existing files are
// reused while they are valid for at least another 30 days and cover
// every host. Keys are written with mode 0600.
//
// Several processes may share dir: the CA is created with an exclusive
// link, so they all end up with the same one.
func LoadOrCreateCertificates(dir string, hosts []string) (*CertificateFiles, error) {
	names, ips := certSubjects(hosts)
	now := time.Now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("httpgw: certificate directory: %w", err)
	}
	f := &CertificateFiles{CAPath: filepath.Join(dir, CAFile), CertPath: filepath.Join(dir, CertFile), KeyPath: filepath.Join(dir, KeyFile)}
	ca, caKey, newCA, err := loadOrCreateCA(dir, names, ips, now)
	if err != nil {
		return nil, err
	}
	f.NewCA = newCA
	// The public copy of the CA is rewritten when it differs: every
	// process writes the same bytes.
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	if old, err := os.ReadFile(f.CAPath); err != nil || !slices.Equal(old, caPEM) {
		if err := writeFileAtomic(f.CAPath, caPEM, 0o644); err != nil {
			return nil, err
		}
	}
	if c, err := tls.LoadX509KeyPair(f.CertPath, f.KeyPath); err == nil && leafFits(c, ca, names, ips, now) {
		f.Certificate = c
		return f, nil
	}
	certPEM, keyPEM, err := issueServerCert(ca, caKey, names, ips, now)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(f.KeyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(f.CertPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	if f.Certificate, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("httpgw: generated certificate: %w", err)
	}
	return f, nil
}

// loadOrCreateCA returns the CA kept in dir if it is valid long enough
// and its name constraints permit every host; otherwise it creates one.
// A new CA is linked into place only if none appeared meanwhile (another
// process sharing dir); one that no longer fits is replaced.
func loadOrCreateCA(dir string, names []string, ips []net.IP, now time.Time) (*x509.Certificate, crypto.Signer, bool, error) {
	path := filepath.Join(dir, caKeyFile)
	for range 3 {
		ca, key, err := readCA(path)
		if err == nil && caFits(ca, names, ips, now) {
			return ca, key, false, nil
		}
		// Missing, or damaged, expiring or too narrow: a new one.
		missing := errors.Is(err, os.ErrNotExist)
		pemBytes, err := newCA(names, ips, now)
		if err != nil {
			return nil, nil, false, err
		}
		if !missing {
			if err := writeFileAtomic(path, pemBytes, 0o600); err != nil {
				return nil, nil, false, err
			}
		} else if err := linkNewFile(path, pemBytes, 0o600); errors.Is(err, os.ErrExist) {
			continue // another process made one first: use it
		} else if err != nil {
			return nil, nil, false, err
		}
		ca, key, err = parseCA(pemBytes)
		return ca, key, true, err
	}
	return nil, nil, false, fmt.Errorf("httpgw: %s keeps changing under us", path)
}

// readCA reads the CA's certificate and key from path.
func readCA(path string) (*x509.Certificate, crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return parseCA(b)
}

// parseCA decodes a CA key file: a PKCS #8 key and a certificate, PEM.
func parseCA(b []byte) (*x509.Certificate, crypto.Signer, error) {
	var cert *x509.Certificate
	var key crypto.Signer
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, nil, fmt.Errorf("httpgw: CA certificate: %w", err)
			}
			cert = c
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, nil, fmt.Errorf("httpgw: CA key: %w", err)
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, nil, errors.New("httpgw: CA key cannot sign")
			}
			key = s
		}
	}
	if cert == nil || key == nil {
		return nil, nil, errors.New("httpgw: CA key file lacks its key or certificate")
	}
	return cert, key, nil
}

// certSubjects splits the always-included and extra hosts into DNS names
// and IP addresses, without duplicates. *.localhost is always there: a
// namespace is reached as <namespace>.localhost (core/namespace), over
// TLS too.
func certSubjects(hosts []string) ([]string, []net.IP) {
	names := []string{"localhost", "*.localhost"}
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

// caFits reports whether ca is a CA valid at now for longer than
// renewBefore whose name constraints permit every name and IP.
func caFits(ca *x509.Certificate, names []string, ips []net.IP, now time.Time) bool {
	if !ca.IsCA || now.Before(ca.NotBefore) || now.Add(renewBefore).After(ca.NotAfter) {
		return false
	}
	for _, n := range names {
		if !slices.ContainsFunc(ca.PermittedDNSDomains, func(d string) bool { return dnsWithin(n, d) }) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(ca.PermittedIPRanges, func(r *net.IPNet) bool { return r.Contains(ip) }) {
			return false
		}
	}
	return true
}

// dnsWithin reports whether name is domain or one of its subdomains, as
// a DNS name constraint reads (RFC 5280 §4.2.1.10).
func dnsWithin(name, domain string) bool {
	if len(name) < len(domain) {
		return false
	}
	if !strings.EqualFold(name[len(name)-len(domain):], domain) {
		return false
	}
	return len(name) == len(domain) || name[len(name)-len(domain)-1] == '.'
}

// leafFits reports whether c was issued by ca, is valid at now for longer
// than renewBefore and names every host.
func leafFits(c tls.Certificate, ca *x509.Certificate, names []string, ips []net.IP, now time.Time) bool {
	if len(c.Certificate) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil || leaf.CheckSignatureFrom(ca) != nil ||
		now.Before(leaf.NotBefore) || now.Add(renewBefore).After(leaf.NotAfter) {
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

// newCA creates a CA certificate and key, returned together as PEM (key
// first). Its name constraints permit loopback and the given hosts.
func newCA(names []string, ips []net.IP, now time.Time) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	permittedIPs := []*net.IPNet{
		{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)},
		{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)},
	}
	for _, ip := range ips {
		if slices.ContainsFunc(permittedIPs, func(r *net.IPNet) bool { return r.Contains(ip) }) {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			permittedIPs = append(permittedIPs, &net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)})
		} else {
			permittedIPs = append(permittedIPs, &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)})
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: "omnibus local CA", Organization: []string{"omnibus"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caLifetime),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         slices.Clone(names),
		PermittedIPRanges:           permittedIPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...), nil
}

// issueServerCert creates a server certificate for names and ips signed
// by ca, PEM encoded: the certificate followed by the CA's, and its key.
func issueServerCert(ca *x509.Certificate, caKey crypto.Signer, names []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(certLifetime)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "omnibus broker", Organization: []string{"omnibus"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})...)
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so a crash never leaves half a key.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("httpgw: write %s: %w", path, err)
	}
	return nil
}

// linkNewFile writes data to path only if path does not exist, in one
// step (a hard link of a complete temporary file); it returns an error
// matching os.ErrExist when it does.
func linkNewFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return err
		}
		return fmt.Errorf("httpgw: write %s: %w", path, err)
	}
	return nil
}

// writeTemp writes data to a new temporary file beside path and returns
// its name.
func writeTemp(path string, data []byte, perm os.FileMode) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return "", fmt.Errorf("httpgw: write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), perm)); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("httpgw: write %s: %w", path, err)
	}
	return tmp.Name(), nil
}
