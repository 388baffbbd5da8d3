package app

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Browsers are kept out unless invited. A browser on this machine is a
// loopback peer, so protected mode admits it; a page elsewhere can make
// it send requests here, and read the answers when its own name resolves
// to 127.0.0.1 (DNS rebinding): the browser then sends the page's name in
// Host (and Origin), which match each other. Two checks close that:
//
//   - hostPolicy: an HTTP, HTTPS or WebSocket request whose Host is none
//     of omnibus's names (a loopback name, an IP literal, this machine's
//     names, --tls-hosts, the cluster's peers, --allowed-hosts) gets 421
//     Misdirected Request. A rebound page's name is none of them.
//   - originPolicy: a WebSocket upgrade with an Origin (a browser's) from
//     a page not listed in --allowed-origins gets 403. This also covers
//     a page that opens ws://127.0.0.1:5300/… directly: WebSockets are not
//     subject to CORS, so without it any page could.
//
// Both are on while the key is the publicly known one (whatever
// --allow-remote says: a developer's container with the emulator's key is
// as reachable from their browser as a bare process). With a key of one's
// own they are off unless the flags are given: a page cannot know that
// key, and the names clients use (a container's service name, a proxy's)
// are the operator's business; the console's login is throttled either
// way. "*" in either list turns that check off.

// hostPolicy decides which Host names the HTTP listeners answer to.
type hostPolicy struct {
	names     map[string]bool // exact names: lower case, no trailing dot
	suffixes  []string        // ".example.com" from "*.example.com"
	publicKey bool            // on because of the publicly known key
	refusals  *refusalLog
	// namespace reports whether a label names a namespace: a name
	// omnibus answers to with a namespace's name in front
	// (sales.myhost when myhost passes) passes too.
	namespace func(label string) bool
}

// newHostPolicy returns o's host policy, nil when every Host is served.
func newHostPolicy(o Options) (*hostPolicy, error) {
	p := &hostPolicy{names: map[string]bool{}, publicKey: o.Key == DefaultKey,
		refusals: newRefusalLog(o.Logger, "refused an HTTP request naming a host omnibus does not answer to (DNS rebinding?); "+
			"add the name to --allowed-hosts if it is yours")}
	for _, h := range o.AllowedHosts {
		name, err := normalizeAllowedHost(h)
		if err != nil {
			return nil, fmt.Errorf("--allowed-hosts: %w", err)
		}
		switch {
		case name == "*":
			return nil, nil
		case strings.HasPrefix(name, "*."):
			p.suffixes = append(p.suffixes, name[1:])
		default:
			p.names[name] = true
		}
	}
	if !p.publicKey && len(o.AllowedHosts) == 0 {
		return nil, nil
	}
	for _, h := range slices.Concat(o.TLSHosts, o.knownHosts, machineNames()) {
		if name, err := normalizeAllowedHost(h); err == nil && !strings.HasPrefix(name, "*") {
			p.names[name] = true
		}
	}
	return p, nil
}

// normalizeAllowedHost checks a name given in a flag and returns it in
// lower case without a trailing dot.
func normalizeAllowedHost(h string) (string, error) {
	name := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	if name == "*" {
		return name, nil
	}
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return strings.Trim(name, "[]"), nil
	}
	rest := strings.TrimPrefix(name, "*.")
	ok := rest != "" && !strings.HasPrefix(rest, ".") && !strings.Contains(rest, "..")
	for _, c := range rest {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_')
	}
	if !ok {
		return "", fmt.Errorf("%q is not a host name: give names without scheme or port, *.example.com for every name under example.com, or * for any", h)
	}
	return name, nil
}

// check returns nil when omnibus answers to hostport, a request's Host
// header (port optional); otherwise the refusal, whose text says how to
// add the name.
func (p *hostPolicy) check(hostport string) error {
	if p == nil || p.allowed(hostport) {
		return nil
	}
	host := hostName(hostport)
	p.refusals.note(zap.String("host", host))
	why := "it answers only to"
	if p.publicKey {
		why = "while it runs with the publicly known emulator key, it answers only to"
	}
	return fmt.Errorf("omnibus does not answer to the host name %q: %s localhost, IP addresses, this machine's names "+
		"and the names given with --allowed-hosts (OMNIBUS_ALLOWED_HOSTS) or --tls-hosts, so that a web page whose name "+
		"was pointed at this machine (DNS rebinding) cannot use it. To reach omnibus by this name, add it: --allowed-hosts %s",
		host, why, host)
}

// allowed reports whether hostport names omnibus.
func (p *hostPolicy) allowed(hostport string) bool {
	host := hostName(hostport)
	if host == "" { // HTTP/1.0 without Host: no browser sends that
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || p.names[host] {
		return true
	}
	if label, rest, ok := strings.Cut(host, "."); ok && p.namespace != nil && p.namespace(label) && !isIP(rest) && p.allowed(rest) {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func isIP(s string) bool { _, err := netip.ParseAddr(s); return err == nil }

// hostName is the name in a Host header: lower case, without port,
// brackets or trailing dot.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// describe is the start-up line of the host policy.
func (p *hostPolicy) describe() string {
	names := slices.Sorted(maps.Keys(p.names))
	for _, s := range p.suffixes {
		names = append(names, "*"+s)
	}
	return "HTTP, HTTPS and WebSocket requests must name omnibus by localhost, an IP address or one of " +
		strings.Join(names, ", ") + " (DNS rebinding protection; more with --allowed-hosts)"
}

// machineNames are this machine's names: its host name and, when the
// resolver knows one within a second, its canonical (fully qualified)
// name. Looked up once per process.
var machineNames = sync.OnceValue(func() []string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return nil
	}
	names := []string{host}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if cname, err := net.DefaultResolver.LookupCNAME(ctx, host); err == nil && cname != "" {
		names = append(names, strings.TrimSuffix(cname, "."))
	}
	return names
})

// originPolicy decides which web pages may open AMQP over WebSockets: a
// browser's upgrade carries the page's origin.
type originPolicy struct {
	origins   map[string]bool // normalized (normalizeOrigin)
	publicKey bool
	refusals  *refusalLog
}

// newOriginPolicy returns o's origin policy, nil when every origin is
// accepted (a key of one's own and no --allowed-origins, as Service Bus).
func newOriginPolicy(o Options) (*originPolicy, error) {
	p := &originPolicy{origins: map[string]bool{}, publicKey: o.Key == DefaultKey,
		refusals: newRefusalLog(o.Logger, "refused a WebSocket upgrade from a web page not listed in --allowed-origins")}
	for _, s := range o.AllowedOrigins {
		if strings.TrimSpace(s) == "*" {
			return nil, nil
		}
		origin, err := normalizeOrigin(s)
		if err != nil {
			return nil, fmt.Errorf("--allowed-origins: %w", err)
		}
		p.origins[origin] = true
	}
	if !p.publicKey && len(p.origins) == 0 {
		return nil, nil
	}
	return p, nil
}

// normalizeOrigin returns an origin as browsers compare it: scheme and
// host in lower case, without the scheme's default port.
func normalizeOrigin(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an origin: give scheme, host and port as a browser sends them, e.g. http://localhost:8080, or * for any", s)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

// check returns nil for an origin whose pages may use omnibus.
func (p *originPolicy) check(origin string) error {
	if p == nil {
		return nil
	}
	if o, err := normalizeOrigin(origin); err == nil && p.origins[o] {
		return nil
	}
	p.refusals.note(zap.String("origin", origin))
	why := "only pages whose origin is listed with --allowed-origins (OMNIBUS_ALLOWED_ORIGINS) may use it"
	if p.publicKey {
		why = "while it runs with the publicly known emulator key, any page could use that key, so " + why
	}
	return fmt.Errorf("omnibus refuses AMQP over WebSockets from pages of %s: %s. To let them in: --allowed-origins %s",
		origin, why, origin)
}
