package httpgw

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// noToken marks a route that needs no token at all.
const noToken sas.Rights = 0

// serviceBusRights is the right each route needs, after Service Bus's
// table (rest.md §3.2): sending needs Send; receiving and settling
// Listen; reading rules, one or all, Listen (the service lets Listen
// enumerate them); everything else of management Manage. Keys are
// "METHOD path-template" as the router holds them. A route the gateway
// serves without an entry here fails TestEveryRouteNeedsItsRight.
var serviceBusRights = map[string]sas.Rights{
	"GET /health":                      noToken,
	"GET /$servicebus/websocket":       noToken, // AMQP authenticates
	"GET /{_ns:(?i:\\$namespaceinfo)}": sas.Manage,

	// The namespaces API (namespaces.go): Manage on the root key.
	"GET /{_nss:(?i:\\$namespaces)}":                               sas.Manage,
	"GET /{_nss:(?i:\\$namespaces)}/{ns}":                          sas.Manage,
	"PUT /{_nss:(?i:\\$namespaces)}/{ns}":                          sas.Manage,
	"DELETE /{_nss:(?i:\\$namespaces)}/{ns}":                       sas.Manage,
	"POST /{_nss:(?i:\\$namespaces)}/{ns}/{_clock:(?i:clock)}":     sas.Manage,
	"POST /{_nss:(?i:\\$namespaces)}/{ns}/{_deliver:(?i:deliver)}": sas.Manage,

	"POST /{entity:.+}/{_messages:(?i:messages)}/{_head:(?i:head)}":   sas.Listen,
	"DELETE /{entity:.+}/{_messages:(?i:messages)}/{_head:(?i:head)}": sas.Listen,
	"PUT /{entity:.+}/{_messages:(?i:messages)}/{id}/{lock}":          sas.Listen,
	"DELETE /{entity:.+}/{_messages:(?i:messages)}/{id}/{lock}":       sas.Listen,
	"POST /{entity:.+}/{_messages:(?i:messages)}/{id}/{lock}":         sas.Listen,
	"POST /{entity:.+}/{_messages:(?i:messages)}":                     sas.Send,

	"GET /{_res:(?i:\\$resources)}/{kind:(?i:queues|topics)}": sas.Manage,

	"GET /{topic:.+}/{_subs:(?i:subscriptions)}/{sub}/{_rules:(?i:rules)}/{rule}":    sas.Listen,
	"PUT /{topic:.+}/{_subs:(?i:subscriptions)}/{sub}/{_rules:(?i:rules)}/{rule}":    sas.Manage,
	"DELETE /{topic:.+}/{_subs:(?i:subscriptions)}/{sub}/{_rules:(?i:rules)}/{rule}": sas.Manage,
	"GET /{topic:.+}/{_subs:(?i:subscriptions)}/{sub}/{_rules:(?i:rules)}":           sas.Listen,

	"GET /{topic:.+}/{_subs:(?i:subscriptions)}/{sub}":    sas.Manage,
	"PUT /{topic:.+}/{_subs:(?i:subscriptions)}/{sub}":    sas.Manage,
	"DELETE /{topic:.+}/{_subs:(?i:subscriptions)}/{sub}": sas.Manage,
	"GET /{topic:.+}/{_subs:(?i:subscriptions)}":          sas.Manage,

	"GET /{entity:.+}":    sas.Manage,
	"PUT /{entity:.+}":    sas.Manage,
	"DELETE /{entity:.+}": sas.Manage,
}

// routeVarSamples fills each route variable to build a concrete path.
var routeVarSamples = map[string]string{
	"entity": "q", "topic": "t", "sub": "s", "rule": "r", "id": "1",
	"lock": "00000000-0000-0000-0000-000000000001", "kind": "queues",
	"_messages": "messages", "_head": "head", "_subs": "subscriptions", "_rules": "rules",
	"_res": "$Resources", "_ns": "$namespaceinfo",
	"_nss": "$namespaces", "ns": "other", "_clock": "clock", "_deliver": "deliver",
}

// TestEveryRouteNeedsItsRight walks the router's table: every route must
// have an entry in serviceBusRights, and a real request with a token of
// each right must be refused (401) exactly when that right does not
// cover the route's.
func TestEveryRouteNeedsItsRight(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	e.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{
		{KeyName: "sender", Key: "k1", Rights: sas.Send},
		{KeyName: "listener", Key: "k2", Rights: sas.Listen},
		{KeyName: "manager", Key: "k3", Rights: sas.Manage},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if e.gw, err = New(Config{Broker: e.Broker, Auth: v}); err != nil {
		t.Fatal(err)
	}
	srv := newE2EServer(t, e)
	router := e.gw.routes().(*mux.Router)
	tokens := []struct {
		name   string
		rights sas.Rights
		token  string
	}{
		{"no token", noToken, ""},
		{"Send", sas.Send, sas.Sign("sb://localhost/", "sender", "k1", time.Now().Add(time.Hour))},
		{"Listen", sas.Listen, sas.Sign("sb://localhost/", "listener", "k2", time.Now().Add(time.Hour))},
		{"Manage", sas.Manage, sas.Sign("sb://localhost/", "manager", "k3", time.Now().Add(time.Hour))},
	}

	seen := map[string]bool{}
	err = router.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			t.Errorf("route without a path: %v", err)
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil {
			t.Errorf("route %s serves every method; give it methods and a rights entry", tpl)
			return nil
		}
		names, _ := route.GetVarNames()
		var pairs []string
		for _, n := range names {
			s, ok := routeVarSamples[n]
			if !ok {
				t.Fatalf("route %s: no sample value for variable %q", tpl, n)
			}
			pairs = append(pairs, n, s)
		}
		u, err := route.URLPath(pairs...)
		if err != nil {
			t.Fatalf("route %s: %v", tpl, err)
		}
		for _, m := range methods {
			key := m + " " + tpl
			need, ok := serviceBusRights[key]
			if !ok {
				t.Errorf("route %q has no entry in serviceBusRights: add the right Service Bus requires", key)
				continue
			}
			seen[key] = true
			// The concrete request must reach this very route.
			req, _ := http.NewRequest(m, "http://localhost"+u.Path, nil)
			var match mux.RouteMatch
			if !router.Match(req, &match) || match.Route != route {
				t.Errorf("%s %s does not reach route %q", m, u.Path, key)
				continue
			}
			for _, tok := range tokens {
				status := doWithToken(t, m, srv.URL+u.Path+"?timeout=0", tok.token)
				allowed := need == noToken || (tok.rights != noToken && tok.rights.Has(need))
				if allowed == (status == http.StatusUnauthorized) {
					t.Errorf("%s (needs %v) with %s token: status %d", key, need, tok.name, status)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range serviceBusRights {
		if !seen[key] {
			t.Errorf("serviceBusRights lists %q, which the router does not serve", key)
		}
	}
}

// doWithToken sends an empty-bodied request and returns its status.
func doWithToken(t *testing.T, method, url, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
