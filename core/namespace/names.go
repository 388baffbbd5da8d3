package namespace

import (
	"net"
	"net/netip"
	"strings"

	"github.com/omnibusmq/omnibus/core"
)

// MaxNameLength is the longest namespace name (Service Bus: 50).
const MaxNameLength = 50

// CheckName returns nil when name is a valid namespace name: 1 to 50
// letters, digits and hyphens, starting with a letter and ending with a
// letter or digit, as a DNS label must. Service Bus also asks for at
// least 6 characters; omnibus accepts shorter names ("sales") because
// its namespaces are local names, often made per test. Names compare
// without case. The error is a core.ErrBadRequest.
func CheckName(name string) error {
	bad := func(why string) error {
		return &core.Error{Code: core.CodeBadRequest, Msg: "The namespace name '" + name + "' is invalid: " + why + "."}
	}
	if name == "" || len(name) > MaxNameLength {
		return bad("a name has 1 to 50 characters")
	}
	for i, c := range strings.ToLower(name) {
		letter := c >= 'a' && c <= 'z'
		switch {
		case i == 0 && !letter:
			return bad("it must start with a letter")
		case !letter && !(c >= '0' && c <= '9') && c != '-':
			return bad("it may contain only letters, digits and hyphens")
		}
	}
	if name[len(name)-1] == '-' {
		return bad("it must end with a letter or a digit")
	}
	return nil
}

// hostLabel returns the namespace name a host names: the first DNS
// label of hostport, lower case, without port, brackets or trailing dot;
// "" for an IP address or an empty host.
func hostLabel(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return ""
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	label, _, _ := strings.Cut(host, ".")
	return label
}

// HostOf returns the host of an audience or resource URI ("sb://sales.localhost/q",
// "sales.localhost:5671/q", "amqps://h/q"), "" when it has none.
func HostOf(uri string) string {
	if i := strings.Index(uri, "://"); i >= 0 {
		uri = uri[i+len("://"):]
	}
	host, _, _ := strings.Cut(uri, "/")
	if i := strings.IndexAny(host, "?#"); i >= 0 {
		host = host[:i]
	}
	return host
}
