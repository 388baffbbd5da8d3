package raftstore

import (
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// Join tokens (DESIGN.md, "Peer authentication"). A member makes one on
// an admin request (`omnibus cluster token`, POST /raft/tokens: its
// certificate and the Manage key) and keeps only its secret's hash, in
// memory, with the node id it is for and when it expires. The new node
// presents it at POST /join over TLS, having checked that the member's
// certificate comes from the CA the token names, with a certificate
// request; the member takes the token (once: it is marked used before
// anything is signed) and answers with the node's certificate, the
// trusted CAs and the CA's key, so that the new node can admit others in
// turn. No other member knows the token, so it is single-use across the
// cluster; it dies with the member's process (make a new one).

// Bounds of join tokens.
const (
	DefaultJoinTokenTTL = time.Hour
	MaxJoinTokenTTL     = 7 * 24 * time.Hour
	maxJoinTokens       = 64       // outstanding (or used, until they expire) per member
	maxJoinBody         = 64 << 10 // a join or token request
)

// Why a join token is refused.
var (
	errTokenUnknown = errors.New("raftstore: join token unknown to this member (made by another, or before it restarted: make a new one)")
	errTokenUsed    = errors.New("raftstore: join token already used (each is good for one node, once)")
	errTokenExpired = errors.New("raftstore: join token expired (make a new one)")
)

// tokenBook holds the join tokens a member made.
type tokenBook struct {
	mu     sync.Mutex // guards tokens
	tokens map[[sha256.Size]byte]*joinToken
}

type joinToken struct {
	node    uint64
	expires time.Time
	used    bool
}

func newTokenBook() *tokenBook {
	return &tokenBook{tokens: map[[sha256.Size]byte]*joinToken{}}
}

// add records a new token, forgetting expired ones first.
func (b *tokenBook) add(secret []byte, node uint64, expires, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, t := range b.tokens {
		if !now.Before(t.expires) {
			delete(b.tokens, k)
		}
	}
	if len(b.tokens) >= maxJoinTokens {
		return fmt.Errorf("raftstore: already %d join tokens outstanding on this member; wait for some to expire", maxJoinTokens)
	}
	b.tokens[sha256.Sum256(secret)] = &joinToken{node: node, expires: expires}
	return nil
}

// take uses the token whose secret is given, for node.
func (b *tokenBook) take(secret []byte, node uint64, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.tokens[sha256.Sum256(secret)]
	switch {
	case !ok:
		return errTokenUnknown
	case t.used:
		return errTokenUsed
	case !now.Before(t.expires):
		return errTokenExpired
	case t.node != node:
		return fmt.Errorf("raftstore: the join token is for node %d, not %d", t.node, node)
	}
	t.used = true
	return nil
}

// tokenRequest asks a member for a join token.
type tokenRequest struct {
	Node uint64 `json:"node"`
	// TTLSeconds: 0 means DefaultJoinTokenTTL.
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
}

type tokenAnswer struct {
	Token string `json:"token"`
}

// serveTokens makes a join token (an admin request).
func (t *httpTransport) serveTokens(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxJoinBody)).Decode(&req); err != nil || req.Node == 0 {
		t.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("want {\"node\": id > 0, \"ttlSeconds\": n}: %v", err))
		return
	}
	ttl := time.Duration(req.TTLSeconds) * time.Second
	if ttl == 0 {
		ttl = DefaultJoinTokenTTL
	}
	if ttl < 0 || ttl > MaxJoinTokenTTL {
		t.refuse(w, r, http.StatusBadRequest, fmt.Sprintf("a join token lives at most %s", MaxJoinTokenTTL))
		return
	}
	creds := t.sec.creds
	if creds == nil || creds.CA == nil {
		t.refuse(w, r, http.StatusConflict, "this member holds no CA key: it cannot admit nodes (ask another)")
		return
	}
	secret, err := peertls.NewSecret()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	now := t.now()
	tok := peertls.Token{Addr: t.advertisedAddr(r), Issuer: t.id, Node: req.Node, CA: peertls.Fingerprint(creds.CA.Cert),
		Secret: secret, Expires: now.Add(ttl)}
	if err := t.tokens.add(secret, req.Node, tok.Expires, now); err != nil {
		t.refuse(w, r, http.StatusTooManyRequests, err.Error())
		return
	}
	t.log.Info("made a join token", zap.Uint64("node", req.Node), zap.Time("expires", tok.Expires), zap.String("by", r.RemoteAddr))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(tokenAnswer{Token: tok.String()})
}

// advertisedAddr is the peer address a joiner is to reach this member at:
// its own in the membership (what its peers dial), else the one the
// request came to.
func (t *httpTransport) advertisedAddr(r *http.Request) string {
	st, _ := t.h.status(0)
	for _, m := range st.Members {
		if m.ID == t.id && m.Addr != "" {
			return m.Addr
		}
	}
	return r.Host
}

// joinRequest is a new node's half of the join exchange.
type joinRequest struct {
	Token string `json:"token"`
	Node  uint64 `json:"node"`
	CSR   []byte `json:"csr"` // DER
}

// joinAnswer is the member's half: PEM.
type joinAnswer struct {
	Chain   []byte `json:"chain"`   // the node's certificate, then its issuer's
	Trusted []byte `json:"trusted"` // the CAs members trust
	CA      []byte `json:"ca"`      // the signing CA's key and certificate
}

// serveJoin takes a join token and signs the new node's certificate.
func (t *httpTransport) serveJoin(w http.ResponseWriter, r *http.Request) {
	creds := t.sec.creds
	if creds == nil || creds.CA == nil {
		t.refuse(w, r, http.StatusConflict, "this member takes no join tokens (no CA key, or the peer port runs without TLS)")
		return
	}
	var req joinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxJoinBody)).Decode(&req); err != nil {
		t.refuse(w, r, http.StatusBadRequest, "join: "+err.Error())
		return
	}
	tok, err := peertls.ParseToken(req.Token)
	if err != nil {
		t.refuse(w, r, http.StatusBadRequest, "join: "+err.Error())
		return
	}
	if tok.CA != peertls.Fingerprint(creds.CA.Cert) {
		t.refuse(w, r, http.StatusForbidden, "join: the token names another CA (another cluster's, or one rotated away)")
		return
	}
	now := t.now()
	if err := t.tokens.take(tok.Secret, req.Node, now); err != nil {
		t.refuse(w, r, http.StatusForbidden, "join: "+err.Error())
		return
	}
	if !t.answerCertificate(w, r, creds, req.CSR, req.Node, now) {
		return
	}
	t.log.Info("admitted a node: signed its certificate", zap.Uint64("node", req.Node), zap.String("remote", r.RemoteAddr))
}

// answerCertificate signs node's certificate for the key of csr and
// answers with it, the trusted CAs and the CA's key; false if it refused.
func (t *httpTransport) answerCertificate(w http.ResponseWriter, r *http.Request, creds *peertls.Creds, csr []byte, node uint64, now time.Time) bool {
	pub, err := peertls.RequestKey(csr)
	if err != nil {
		t.refuse(w, r, http.StatusBadRequest, err.Error())
		return false
	}
	chain, err := creds.IssueChain(pub, node, now)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return false
	}
	caPEM, err := peertls.EncodeCA(creds.CA)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return false
	}
	var chainPEM []byte
	for _, der := range chain {
		chainPEM = append(chainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(joinAnswer{Chain: chainPEM, Trusted: peertls.EncodeCerts(creds.Trusted), CA: caPEM})
	return true
}

// renewRequest asks a member for a new certificate of the CA it signs
// with, for the node the client's certificate names.
type renewRequest struct {
	CSR []byte `json:"csr"` // DER
}

// serveRenew renews the client's certificate (an admin request: it also
// hands out the CA key, which a removed member must not get once the CA
// is rotated).
func (t *httpTransport) serveRenew(w http.ResponseWriter, r *http.Request) {
	creds := t.sec.creds
	id, ok := r.Context().Value(peerIDKey{}).(uint64)
	if creds == nil || creds.CA == nil || !ok {
		t.refuse(w, r, http.StatusConflict, "this member renews no certificates (no CA key, or no TLS)")
		return
	}
	var req renewRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxJoinBody)).Decode(&req); err != nil {
		t.refuse(w, r, http.StatusBadRequest, "renew: "+err.Error())
		return
	}
	if t.answerCertificate(w, r, creds, req.CSR, id, t.now()) {
		t.log.Info("renewed a node's certificate", zap.Uint64("node", id), zap.String("ca", peertls.Fingerprint(creds.CA.Cert)))
	}
}
