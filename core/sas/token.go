package sas

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// tokenPrefix starts every SAS token.
const tokenPrefix = "SharedAccessSignature"

// Token is a parsed SAS token. It holds the fields as needed for checking
// the signature; it does not say whether the token is valid.
type Token struct {
	// Resource is the sr field exactly as received, still URL-encoded: the
	// signature is computed over this text.
	Resource string
	// Signature is the sig field after URL-decoding (base64 text).
	Signature string
	// RawSignature is the sig field as received. Some clients do not
	// URL-encode the signature; decoding would then turn '+' into ' '.
	RawSignature string
	// Expiry is the se field as received (decimal Unix seconds); it is part
	// of the signed text.
	Expiry string
	// KeyName is the skn field after URL-decoding.
	KeyName string
}

// ExpiresAt returns the expiry as a time. Parse has checked that Expiry is
// an integer.
func (t *Token) ExpiresAt() time.Time {
	se, _ := strconv.ParseInt(t.Expiry, 10, 64)
	return time.Unix(se, 0).UTC()
}

// Host returns the host (and port) of the token's resource, lower case,
// the segment [Token.Audience] drops: "sales.localhost" for
// sb://sales.localhost/q. It is "" when the resource cannot be decoded.
func (t *Token) Host() string {
	dec, err := url.QueryUnescape(t.Resource)
	if err != nil {
		return ""
	}
	if i := strings.Index(dec, "://"); i >= 0 {
		dec = dec[i+len("://"):]
	}
	host, _, _ := strings.Cut(dec, "/")
	if i := strings.IndexAny(host, "?#"); i >= 0 {
		host = host[:i]
	}
	return strings.ToLower(host)
}

// Audience returns the resource decoded and reduced to its normalised path
// (see [NormalizePath]): scheme, host, port and query removed, lower-cased,
// without leading or trailing slashes. "" means the whole namespace.
func (t *Token) Audience() (string, error) {
	return resourcePath(t.Resource)
}

// Parse parses a SAS token: the "SharedAccessSignature" prefix
// (case-insensitive), then '&'-separated key=value pairs in any order. Keys
// are matched case-insensitively and values are trimmed; sr, sig, se and skn
// must each appear exactly once, unknown keys are ignored. An empty token
// gives [ErrMissingToken]; anything else that does not fit gives
// [ErrMalformedToken]. Both come wrapped in an [*Error].
func Parse(token string) (*Token, error) {
	s := strings.TrimSpace(token)
	if s == "" {
		return nil, refuse(ErrMissingToken, "The request does not carry a token.")
	}
	if len(s) < len(tokenPrefix) || !strings.EqualFold(s[:len(tokenPrefix)], tokenPrefix) {
		return nil, refuse(ErrMalformedToken, "The token does not start with 'SharedAccessSignature'.")
	}
	rest := s[len(tokenPrefix):]
	body := strings.TrimLeft(rest, " \t")
	if body == "" || len(body) == len(rest) {
		return nil, refuse(ErrMalformedToken, "The token has no fields after 'SharedAccessSignature'.")
	}

	var t Token
	var seen [4]bool // sr, sig, se, skn
	for pair := range strings.SplitSeq(body, "&") {
		key, value, ok := strings.Cut(pair, "=")
		if !ok {
			if strings.TrimSpace(pair) == "" {
				continue // tolerate "&&" and a trailing '&'
			}
			return nil, refuse(ErrMalformedToken, "The token has a field without '='.")
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		var idx int
		switch {
		case strings.EqualFold(key, "sr"):
			idx = 0
			t.Resource = value
		case strings.EqualFold(key, "sig"):
			idx = 1
			t.RawSignature = value
			dec, err := url.QueryUnescape(value)
			if err != nil {
				return nil, refuse(ErrMalformedToken, "The token signature is not URL-encoded correctly.")
			}
			t.Signature = dec
		case strings.EqualFold(key, "se"):
			idx = 2
			if _, err := strconv.ParseInt(value, 10, 64); err != nil {
				return nil, refuse(ErrMalformedToken, "The token expiry is not an integer number of seconds.")
			}
			t.Expiry = value
		case strings.EqualFold(key, "skn"):
			idx = 3
			dec, err := url.QueryUnescape(value)
			if err != nil {
				return nil, refuse(ErrMalformedToken, "The token key name is not URL-encoded correctly.")
			}
			t.KeyName = dec
		default:
			continue
		}
		if seen[idx] {
			return nil, refuse(ErrMalformedToken, "The token repeats the field '"+strings.ToLower(key)+"'.")
		}
		seen[idx] = true
	}
	for i, name := range [...]string{"sr", "sig", "se", "skn"} {
		if !seen[i] {
			return nil, refuse(ErrMalformedToken, "The token has no '"+name+"' field.")
		}
	}
	if t.Resource == "" || t.Signature == "" || t.KeyName == "" {
		return nil, refuse(ErrMalformedToken, "The token has an empty field.")
	}
	return &t, nil
}
