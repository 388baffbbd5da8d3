package sas

import (
	"net/url"
	"strings"
)

// NormalizePath reduces an entity path to the form scope checks compare:
// percent-escapes decoded when valid, lower-cased, empty segments dropped
// (so leading, trailing and doubled slashes do not matter). "" is the
// namespace root.
func NormalizePath(path string) string {
	if dec, err := url.PathUnescape(path); err == nil {
		path = dec
	}
	segs := strings.FieldsFunc(strings.ToLower(path), func(c rune) bool { return c == '/' })
	return strings.Join(segs, "/")
}

// resourcePath turns the raw sr of a token into a normalised path. The
// resource is URL-decoded once (how every SDK encodes it); a scheme
// ("sb://", "amqp://", "https://", ...) is removed if present, then the
// first segment, the host and port, is dropped whether or not there was a
// scheme, because the Go SDK and the docs also sign scheme-less
// "host[:port]/path" resources. The query and fragment are dropped. The rest
// is normalised by [NormalizePath].
func resourcePath(raw string) (string, error) {
	dec, err := url.QueryUnescape(raw)
	if err != nil {
		return "", refuse(ErrMalformedToken, "The token resource is not URL-encoded correctly.")
	}
	if i := strings.IndexAny(dec, "?#"); i >= 0 {
		dec = dec[:i]
	}
	if i := strings.Index(dec, "://"); i >= 0 {
		dec = dec[i+len("://"):]
	}
	_, path, _ := strings.Cut(dec, "/")
	return NormalizePath(path), nil
}

// covers reports whether the normalised path scope equals entity or is an
// ancestor of it on a segment boundary: "a/b" covers "a/b" and "a/b/c" but
// not "a/bc". The empty scope covers everything.
func covers(scope, entity string) bool {
	if scope == "" {
		return true
	}
	if !strings.HasPrefix(entity, scope) {
		return false
	}
	return len(entity) == len(scope) || entity[len(scope)] == '/'
}
