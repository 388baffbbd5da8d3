package raftstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// Enroll gets node's certificate with a join token (jointoken.go): it
// makes a key, reaches the member that made the token over TLS, accepting
// it only if its certificate comes from the CA the token names, and
// trades the token and a certificate request for the node's credentials,
// which the caller saves (peertls.Creds.Save) before it starts the node.
func Enroll(ctx context.Context, token string, node uint64) (*peertls.Creds, error) {
	tok, err := peertls.ParseToken(token)
	if err != nil {
		return nil, err
	}
	if tok.Node != node {
		return nil, fmt.Errorf("raftstore: the join token is for node %d, not %d", tok.Node, node)
	}
	key, err := peertls.NewKey()
	if err != nil {
		return nil, err
	}
	csr, err := peertls.NewRequest(key, node)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(joinRequest{Token: token, Node: node, CSR: csr})
	tr := &http.Transport{TLSClientConfig: joinTLS(tok), TLSHandshakeTimeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+tok.Addr+pathJoin, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("raftstore: join at %s: %w", tok.Addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("raftstore: join at %s: %w", tok.Addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("raftstore: join at %s: %s: %s", tok.Addr, resp.Status, strings.TrimSpace(string(raw)))
	}
	var a joinAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("raftstore: join answer: %w", err)
	}
	return joinedCreds(a, key, tok)
}

// joinTLS accepts only a member whose certificate chains to the CA the
// token names (the member sends that CA's certificate after its own).
func joinTLS(tok peertls.Token) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, // checked below, by fingerprint
		VerifyConnection: func(cs tls.ConnectionState) error {
			var ca *x509.Certificate
			for _, c := range cs.PeerCertificates {
				if c.IsCA && peertls.Fingerprint(c) == tok.CA {
					ca = c
				}
			}
			if ca == nil || len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("%w: the member at %s is not of the cluster the join token names", peertls.ErrUntrusted, tok.Addr)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			leaf := cs.PeerCertificates[0]
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return fmt.Errorf("%w: %v", peertls.ErrUntrusted, err)
			}
			if id, err := peertls.NodeID(leaf); err != nil || (tok.Issuer != 0 && id != tok.Issuer) {
				return fmt.Errorf("%w: the member at %s is not node %d, which made the token", peertls.ErrWrongNode, tok.Addr, tok.Issuer)
			}
			return nil
		}}
}

// joinedCreds checks the member's answer to a join and assembles the
// credentials.
func joinedCreds(a joinAnswer, key any, tok peertls.Token) (*peertls.Creds, error) {
	creds, err := answeredCreds(a, key, tok.Node)
	if err != nil {
		return nil, err
	}
	if peertls.Fingerprint(creds.CA.Cert) != tok.CA {
		return nil, errors.New("raftstore: join answer: a CA other than the token's")
	}
	return creds, nil
}

// answeredCreds assembles the credentials a member's answer (to a join
// or a renewal) gives node, with key.
func answeredCreds(a joinAnswer, key any, node uint64) (*peertls.Creds, error) {
	chain, err := peertls.ParseCerts(a.Chain)
	if err != nil {
		return nil, fmt.Errorf("raftstore: the member's answer: certificate: %w", err)
	}
	trusted, err := peertls.ParseCerts(a.Trusted)
	if err != nil {
		return nil, fmt.Errorf("raftstore: the member's answer: trusted CAs: %w", err)
	}
	ca, err := peertls.ParseCA(a.CA)
	if err != nil {
		return nil, fmt.Errorf("raftstore: the member's answer: CA: %w", err)
	}
	der := make([][]byte, len(chain))
	for i, c := range chain {
		der[i] = c.Raw
	}
	creds, err := peertls.NewCreds(tls.Certificate{Certificate: der, PrivateKey: key}, trusted, ca)
	if err != nil {
		return nil, fmt.Errorf("raftstore: the member's answer: %w", err)
	}
	if creds.ID != node {
		return nil, fmt.Errorf("raftstore: the member's answer: a certificate for node %d, not %d", creds.ID, node)
	}
	return creds, nil
}

// Renew asks the member at addr for a new certificate of the CA it signs
// with, for node (the client's certificate must name it), with the trusted
// CAs and the CA's key (a CA rotation's second step, peertls). The caller
// saves the credentials and restarts the node on them.
func (c *Client) Renew(ctx context.Context, addr string, node uint64) (*peertls.Creds, error) {
	key, err := peertls.NewKey()
	if err != nil {
		return nil, err
	}
	csr, err := peertls.NewRequest(key, node)
	if err != nil {
		return nil, err
	}
	var a joinAnswer
	if _, err := c.do(ctx, http.MethodPost, addr, pathRenew, renewRequest{CSR: csr}, &a, true); err != nil {
		return nil, fmt.Errorf("raftstore: renew: %w", err)
	}
	return answeredCreds(a, key, node)
}
