package peertls

import (
	"bytes"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func mustCA(t testing.TB) *CA {
	t.Helper()
	ca, err := NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustNode(t testing.TB, ca *CA, id uint64) *Creds {
	t.Helper()
	c, err := ca.NewNode(id, []*x509.Certificate{ca.Cert}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVerify(t *testing.T) {
	ca, other := mustCA(t), mustCA(t)
	n1, n2, stranger := mustNode(t, ca, 1), mustNode(t, ca, 2), mustNode(t, other, 2)
	if id, err := n1.Verify([]*x509.Certificate{n2.Cert.Leaf}, x509.ExtKeyUsageClientAuth); err != nil || id != 2 {
		t.Fatalf("a member's certificate: id %d, %v; want 2, nil", id, err)
	}
	if _, err := n1.Verify([]*x509.Certificate{stranger.Cert.Leaf}, x509.ExtKeyUsageClientAuth); !errors.Is(err, ErrUntrusted) {
		t.Errorf("another cluster's certificate: %v, want ErrUntrusted", err)
	}
	if _, err := n1.Verify(nil, x509.ExtKeyUsageClientAuth); !errors.Is(err, ErrNoCertificate) {
		t.Errorf("no certificate: %v, want ErrNoCertificate", err)
	}
	later := mustNode(t, ca, 3)
	later.SetClock(func() time.Time { return time.Now().Add(NodeLifetime + 48*time.Hour) })
	if _, err := later.Verify([]*x509.Certificate{n2.Cert.Leaf}, x509.ExtKeyUsageClientAuth); !errors.Is(err, ErrExpired) {
		t.Errorf("an expired certificate: %v, want ErrExpired", err)
	}
	// The CA's own certificate names no node.
	if _, err := n1.Verify([]*x509.Certificate{ca.Cert}, x509.ExtKeyUsageClientAuth); err == nil {
		t.Errorf("the CA certificate as a node's: accepted")
	}
}

func TestIssueForARequestNamesTheCallersID(t *testing.T) {
	ca := mustCA(t)
	n1 := mustNode(t, ca, 1)
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewRequest(key, 7) // the request says 7; the token says 4
	if err != nil {
		t.Fatal(err)
	}
	pub, err := RequestKey(csr)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := n1.IssueChain(pub, 4, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(chain[0])
	if err != nil {
		t.Fatal(err)
	}
	if id, err := NodeID(cert); err != nil || id != 4 {
		t.Errorf("issued for node %d (%v), want 4", id, err)
	}
	csr[len(csr)-3] ^= 0xff // break the signature
	if _, err := RequestKey(csr); err == nil {
		t.Errorf("a request with a broken signature was accepted")
	}
}

func TestSaveLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	c, err := Init(dir, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Init(dir, 1, time.Now()); err == nil {
		t.Errorf("Init over an existing directory succeeded")
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != 1 || got.CA == nil || !got.CA.Cert.Equal(c.CA.Cert) || !bytes.Equal(got.Cert.Certificate[0], c.Cert.Certificate[0]) {
		t.Errorf("loaded %+v, want what was saved", got)
	}
	for _, f := range []string{KeyFile, CAKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of an empty directory: %v, want ErrNotExist", err)
	}
}

func TestTokenRoundTrip(t *testing.T) {
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	tok := Token{Addr: "10.0.0.1:7000", Issuer: 1, Node: 4, CA: Fingerprint(mustCA(t).Cert), Secret: s,
		Expires: time.Unix(1700000000, 0)}
	got, err := ParseToken(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	if got.Addr != tok.Addr || got.Node != 4 || got.Issuer != 1 || got.CA != tok.CA || !bytes.Equal(got.Secret, s) || !got.Expires.Equal(tok.Expires) {
		t.Errorf("got %+v, want %+v", got, tok)
	}
	str := tok.String()
	if _, err := ParseToken(str[:len(str)-10]); err == nil {
		t.Errorf("a truncated token parsed")
	}
}
