package peertls

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Token is a join token: what a new node needs to get its certificate
// from the member that made it. That member alone knows the token (it
// keeps only the secret's hash, in memory), takes it once, and refuses it
// after Expires; it proves itself to the joiner with a certificate from
// the CA whose fingerprint the token carries.
type Token struct {
	// Addr is the issuing member's peer address, and Issuer its id.
	Addr   string
	Issuer uint64
	// Node is the id the certificate will name.
	Node uint64
	// CA is the fingerprint ([Fingerprint]) of the CA that signs.
	CA string
	// Secret is what the joiner proves it holds the token with.
	Secret []byte
	// Expires is when the issuer stops taking it.
	Expires time.Time
}

const (
	tokenPrefix = "omnibus-join-1."
	secretBytes = 32
)

// tokenJSON is a Token on the wire, with short names.
type tokenJSON struct {
	Addr    string `json:"a"`
	Issuer  uint64 `json:"i"`
	Node    uint64 `json:"n"`
	CA      string `json:"f"`
	Secret  []byte `json:"s"`
	Expires int64  `json:"e"`
}

// NewSecret draws a token's secret.
func NewSecret() ([]byte, error) {
	s := make([]byte, secretBytes)
	_, err := rand.Read(s)
	return s, err
}

// String is the token as an operator passes it on (--join-token).
func (t Token) String() string {
	b, _ := json.Marshal(tokenJSON{Addr: t.Addr, Issuer: t.Issuer, Node: t.Node, CA: t.CA, Secret: t.Secret, Expires: t.Expires.Unix()})
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseToken reads what String wrote.
func ParseToken(s string) (Token, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), tokenPrefix)
	if !ok {
		return Token{}, errors.New("peertls: not a join token (want omnibus-join-1.…, from `omnibus cluster token`)")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return Token{}, fmt.Errorf("peertls: join token: %w", err)
	}
	var j tokenJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return Token{}, fmt.Errorf("peertls: join token: %w", err)
	}
	if _, _, err := net.SplitHostPort(j.Addr); err != nil || j.Node == 0 || len(j.CA) != 64 || len(j.Secret) != secretBytes {
		return Token{}, errors.New("peertls: join token: incomplete (copy it whole)")
	}
	return Token{Addr: j.Addr, Issuer: j.Issuer, Node: j.Node, CA: j.CA, Secret: j.Secret, Expires: time.Unix(j.Expires, 0)}, nil
}
