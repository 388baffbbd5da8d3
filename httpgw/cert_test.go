package httpgw

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// verifyWithCA checks the certificate chain of f against its CA file
// alone, as a client that trusts only that file does.
func verifyWithCA(t *testing.T, f *CertificateFiles, host string) error {
	t.Helper()
	caPEM, err := os.ReadFile(f.CAPath)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", f.CAPath)
	}
	leaf, err := x509.ParseCertificate(f.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host})
	return err
}

func TestLoadOrCreateCertificates(t *testing.T) {
	dir := t.TempDir()
	f, err := LoadOrCreateCertificates(dir, []string{"broker.local", "10.1.2.3", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if !f.NewCA || f.CAPath != filepath.Join(dir, CAFile) || f.CertPath != filepath.Join(dir, CertFile) {
		t.Errorf("files %+v", f)
	}
	leaf, err := x509.ParseCertificate(f.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.IsCA || leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("server certificate: CA %v, key algorithm %v", leaf.IsCA, leaf.PublicKeyAlgorithm)
	}
	if !slices.Equal(leaf.DNSNames, []string{"localhost", "*.localhost", "broker.local"}) {
		t.Errorf("DNS names %v", leaf.DNSNames)
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.1.2.3"} {
		if !slices.ContainsFunc(leaf.IPAddresses, net.ParseIP(ip).Equal) {
			t.Errorf("missing IP SAN %s in %v", ip, leaf.IPAddresses)
		}
	}
	if len(f.Certificate.Certificate) != 2 {
		t.Errorf("chain of %d certificates, want the server's and the CA's", len(f.Certificate.Certificate))
	}
	for _, key := range []string{KeyFile, caKeyFile} {
		if st, err := os.Stat(filepath.Join(dir, key)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("key file %s: %v %v", key, st, err)
		}
	}
	for _, host := range []string{"localhost", "sales.localhost", "broker.local", "127.0.0.1", "10.1.2.3"} {
		if err := verifyWithCA(t, f, host); err != nil {
			t.Errorf("verify for %s against the CA file: %v", host, err)
		}
	}
	if err := verifyWithCA(t, f, "example.com"); err == nil {
		t.Errorf("the certificate verifies for example.com")
	}
}

// TestLocalCAIsNameConstrained: a certificate the CA's key signs for a
// host it was not made for is refused by a client trusting the CA, so a
// stolen key cannot impersonate other sites.
func TestLocalCAIsNameConstrained(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateCertificates(dir, []string{"broker.local"}); err != nil {
		t.Fatal(err)
	}
	ca, caKey, err := readCA(filepath.Join(dir, caKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	forge := func(name string, ip net.IP) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		serial, err := randomSerial()
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "forged"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		host := name
		if ip != nil {
			tmpl.IPAddresses, host = []net.IP{ip}, ip.String()
		} else {
			tmpl.DNSNames = []string{name}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host})
		return err
	}
	for _, ok := range []string{"localhost", "a.localhost", "broker.local"} {
		if err := forge(ok, nil); err != nil {
			t.Errorf("%s: %v, want it permitted", ok, err)
		}
	}
	if err := forge("", net.ParseIP("127.45.6.7")); err != nil {
		t.Errorf("127.45.6.7: %v, want it permitted", err)
	}
	for _, bad := range []string{"example.com", "login.microsoftonline.com", "notlocalhost"} {
		if err := forge(bad, nil); err == nil {
			t.Errorf("a certificate for %s verifies against the local CA", bad)
		}
	}
	if err := forge("", net.ParseIP("10.9.9.9")); err == nil {
		t.Errorf("a certificate for 10.9.9.9 verifies against the local CA")
	}
}

func TestCertificatesReusedRenewedAndReissued(t *testing.T) {
	dir := t.TempDir()
	f1, err := LoadOrCreateCertificates(dir, []string{"broker.local"})
	if err != nil {
		t.Fatal(err)
	}
	caPEM1, _ := os.ReadFile(f1.CAPath)

	// Reused as they are.
	f2, err := LoadOrCreateCertificates(dir, []string{"broker.local"})
	if err != nil || f2.NewCA || !bytes.Equal(f2.Certificate.Certificate[0], f1.Certificate.Certificate[0]) {
		t.Fatalf("second load did not reuse the certificate: %v (new CA %v)", err, f2 != nil && f2.NewCA)
	}

	// A loopback address the CA permits: a new server certificate, the
	// same CA (nothing to trust again).
	f3, err := LoadOrCreateCertificates(dir, []string{"broker.local", "127.9.8.7"})
	if err != nil || f3.NewCA || bytes.Equal(f3.Certificate.Certificate[0], f1.Certificate.Certificate[0]) {
		t.Fatalf("a new loopback host: err %v, new CA %v, same certificate %v", err, f3 != nil && f3.NewCA,
			f3 != nil && bytes.Equal(f3.Certificate.Certificate[0], f1.Certificate.Certificate[0]))
	}
	if caPEM3, _ := os.ReadFile(f3.CAPath); !bytes.Equal(caPEM3, caPEM1) {
		t.Errorf("the CA file changed for a host it permits")
	}
	if err := verifyWithCA(t, f3, "127.9.8.7"); err != nil {
		t.Errorf("reissued certificate: %v", err)
	}

	// A server certificate about to expire is renewed by the same CA.
	ca, caKey, err := readCA(filepath.Join(dir, caKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	names, ips := certSubjects([]string{"broker.local"})
	certPEM, keyPEM, err := issueServerCert(ca, caKey, names, ips, time.Now().Add(-350*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(f1.CertPath, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(f1.KeyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	f4, err := LoadOrCreateCertificates(dir, []string{"broker.local"})
	if err != nil || f4.NewCA {
		t.Fatalf("renewal: %v (new CA %v)", err, f4 != nil && f4.NewCA)
	}
	leaf, _ := x509.ParseCertificate(f4.Certificate.Certificate[0])
	if time.Until(leaf.NotAfter) < 300*24*time.Hour {
		t.Errorf("renewed certificate ends %v", leaf.NotAfter)
	}

	// A host outside the CA's constraints needs a new CA.
	f5, err := LoadOrCreateCertificates(dir, []string{"other.host"})
	if err != nil || !f5.NewCA {
		t.Fatalf("a host outside the constraints: %v (new CA %v)", err, f5 != nil && f5.NewCA)
	}
	if err := verifyWithCA(t, f5, "other.host"); err != nil {
		t.Errorf("certificate of the new CA: %v", err)
	}
}

// TestCertificatesSharedDirectory: processes starting together on one
// directory (--memory runs share one) end up trusting the same CA.
func TestCertificatesSharedDirectory(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	files := make([]*CertificateFiles, 8)
	errs := make([]error, 8)
	for i := range files {
		wg.Go(func() { files[i], errs[i] = LoadOrCreateCertificates(dir, nil) })
	}
	wg.Wait()
	newCAs := 0
	for i, f := range files {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if f.NewCA {
			newCAs++
		}
		if err := verifyWithCA(t, f, "localhost"); err != nil {
			t.Errorf("caller %d's certificate does not verify against the CA file: %v", i, err)
		}
	}
	if newCAs != 1 {
		t.Errorf("%d callers created a CA, want 1", newCAs)
	}
}
