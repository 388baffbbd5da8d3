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

// Covers reports whether the normalised path scope equals entity or is
// an ancestor of it on a segment boundary: "a/b" covers "a/b" and "a/b/c"
// but not "a/bc". The empty scope covers everything. A path with a "." or
// ".." segment ("a/../orders", or "a/%2e%2e/orders" before
// [NormalizePath]) is covered only by the empty scope and by itself (a
// token signed over that very path, as the Go admin client signs each
// request URL): no entity has such a name, and read as a URL it leaves
// the scope it starts in, so a token or key for "a" must not reach it.
func Covers(scope, entity string) bool {
	if scope == "" || scope == entity {
		return true
	}
	if !strings.HasPrefix(entity, scope) || hasDotSegment(entity) {
		return false
	}
	return len(entity) == len(scope) || entity[len(scope)] == '/'
}

// hasDotSegment reports whether the normalised path has a "." or ".."
// segment.
func hasDotSegment(path string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
