package httpgw

import (
	"bytes"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLoadOrCreateCertificate(t *testing.T) {
	dir := t.TempDir()
	c1, path, err := LoadOrCreateCertificate(dir, []string{"broker.local", "10.1.2.3", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, certFile) {
		t.Errorf("path %q", path)
	}
	leaf, err := x509.ParseCertificate(c1.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v", leaf.PublicKeyAlgorithm)
	}
	if !slices.Equal(leaf.DNSNames, []string{"localhost", "broker.local"}) {
		t.Errorf("DNS names %v", leaf.DNSNames)
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.1.2.3"} {
		if !slices.ContainsFunc(leaf.IPAddresses, net.ParseIP(ip).Equal) {
			t.Errorf("missing IP SAN %s in %v", ip, leaf.IPAddresses)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, keyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", st, err)
	}
	// The certificate verifies as its own root for each name.
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	for _, name := range []string{"localhost", "broker.local", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}

	// Reused when it covers the hosts, replaced when a new host appears.
	c2, _, err := LoadOrCreateCertificate(dir, []string{"broker.local"})
	if err != nil || !bytes.Equal(c2.Certificate[0], c1.Certificate[0]) {
		t.Fatalf("second load did not reuse the certificate: %v", err)
	}
	c3, _, err := LoadOrCreateCertificate(dir, []string{"other.host"})
	if err != nil || bytes.Equal(c3.Certificate[0], c1.Certificate[0]) {
		t.Fatalf("new host did not regenerate: %v", err)
	}
}
