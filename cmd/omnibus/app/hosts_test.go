package app

import (
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestHostPolicy: with the publicly known key, Host must name omnibus by
// a loopback name, an IP address, this machine's names, --tls-hosts, a
// cluster peer or --allowed-hosts; "*" lets every name in; with a key of
// one's own every name is served unless --allowed-hosts is given.
func TestHostPolicy(t *testing.T) {
	log := zaptest.NewLogger(t)
	p, err := newHostPolicy(Options{Key: DefaultKey, Logger: log, AllowedHosts: []string{"Omnibus.Test.", "*.dev.test"},
		TLSHosts: []string{"tls.test", "192.0.2.9"}, knownHosts: []string{"peer.test"}})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:5300": true, "localhost.:5300": true, "app.localhost:5300": true,
		"127.0.0.1:5300": true, "10.1.2.3": true, "[::1]:5300": true, "[fe80::1]": true, "": true,
		machineNames()[0] + ":5300": true, "omnibus.test:5300": true, "a.b.dev.test": true, "tls.test": true, "peer.test:5300": true,
		"rebound.example:5300": false, "localhost.rebound.example": false, "dev.test": false, "xdev.test": false,
		"omnibus.test.rebound.example": false, "127.0.0.1.nip.io": false, "evil-localhost": false,
	} {
		err := p.check(host)
		if (err == nil) != want {
			t.Errorf("Host %q: %v, want allowed=%v", host, err, want)
		}
		if err != nil && (!strings.Contains(err.Error(), "--allowed-hosts") || !strings.Contains(err.Error(), "publicly known")) {
			t.Errorf("Host %q: refusal does not say why and how: %v", host, err)
		}
	}
	for _, o := range []Options{
		{Key: "own key"},
		{Key: DefaultKey, AllowedHosts: []string{"*"}},
		{Key: "own key", AllowedHosts: []string{"x.test", "*"}},
	} {
		o.Logger = log
		if p, err := newHostPolicy(o); p != nil || err != nil {
			t.Errorf("%+v: host policy on (%v), want off", o, err)
		}
	}
	p, err = newHostPolicy(Options{Key: "own key", AllowedHosts: []string{"x.test"}, Logger: log})
	if err != nil || p == nil || p.check("x.test") != nil || p.check("localhost") != nil || p.check("y.test") == nil {
		t.Errorf("own key with --allowed-hosts x.test: %v, %v", p, err)
	}
	if err := p.check("y.test"); err == nil || strings.Contains(err.Error(), "publicly known") {
		t.Errorf("own key: the refusal blames the public key: %v", err)
	}

	// A namespace's name in front of a name omnibus answers to passes;
	// in front of any other name, or an unknown label, it does not.
	p, _ = newHostPolicy(Options{Key: DefaultKey, Logger: log, TLSHosts: []string{"tls.test"}})
	p.namespace = func(label string) bool { return label == "sales" }
	for host, want := range map[string]bool{
		"sales.tls.test:5300": true, "sales.localhost": true, "sales.127.0.0.1": false,
		"sales.rebound.example": false, "billing.tls.test": false, "sales.sales.tls.test": true,
	} {
		if err := p.check(host); (err == nil) != want {
			t.Errorf("Host %q with namespace sales: %v, want allowed=%v", host, err, want)
		}
	}
}

// TestOriginPolicy: origins compare as browsers send them (scheme, host,
// port; default ports and case do not matter).
func TestOriginPolicy(t *testing.T) {
	log := zaptest.NewLogger(t)
	p, err := newOriginPolicy(Options{Key: DefaultKey, Logger: log,
		AllowedOrigins: []string{"http://localhost:8080", "https://App.Example:443/", "http://[::1]:3000"}})
	if err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]bool{
		"http://localhost:8080": true, "HTTP://LOCALHOST:8080": true, "https://app.example": true, "http://[::1]:3000": true,
		"http://localhost:8081": false, "https://localhost:8080": false, "http://app.example": false, "null": false,
		"http://localhost:8080.evil.example": false, "http://evil.example": false,
	} {
		if err := p.check(origin); (err == nil) != want {
			t.Errorf("Origin %q: %v, want allowed=%v", origin, err, want)
		}
	}
	none, err := newOriginPolicy(Options{Key: DefaultKey, Logger: log})
	if err != nil || none.check("http://localhost:8080") == nil {
		t.Errorf("public key, no list: an origin was let in (%v)", err)
	}
	for _, o := range []Options{{Key: "own key"}, {Key: DefaultKey, AllowedOrigins: []string{"*"}}} {
		o.Logger = log
		if p, err := newOriginPolicy(o); p != nil || err != nil {
			t.Errorf("%+v: origin policy on (%v), want off", o, err)
		}
	}
}
