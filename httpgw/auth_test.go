package httpgw

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
)

func TestAuthFailures(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.mustQueue(t, "other")
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{
		{KeyName: DefaultKeyName, Key: DefaultKey, Rights: sas.Manage},
		{KeyName: "sender", Key: "sendkey", Rights: sas.Send},
		{KeyName: "listener", Key: "listenkey", Rights: sas.Listen, Scope: "q"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if e.gw, err = New(Config{Broker: e.Broker, Auth: v}); err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(time.Hour)
	sign := func(res, key, secret string, exp time.Time) string { return sas.Sign(res, key, secret, exp) }
	cases := []struct {
		name   string
		req    request
		status int
		detail string
	}{
		{"missing", request{method: "POST", target: "/q/messages", noAuth: true}, 401, "MissingToken:"},
		{"bearer", request{method: "POST", target: "/q/messages", header: map[string]string{"Authorization": "Bearer abc"}}, 401, "MalformedToken:"},
		{"expired", request{method: "POST", target: "/q/messages", header: map[string]string{"Authorization": sign("sb://localhost/q", DefaultKeyName, DefaultKey, time.Now().Add(-time.Hour))}}, 401, "ExpiredToken: The token is expired"},
		{"wrong key", request{method: "POST", target: "/q/messages", header: map[string]string{"Authorization": sign("sb://localhost/q", DefaultKeyName, "nope", hour)}}, 401, "InvalidSignature:"},
		{"unknown key name", request{method: "POST", target: "/q/messages", header: map[string]string{"Authorization": sign("sb://localhost/q", "who", "x", hour)}}, 401, "InvalidSignature:"},
		{"other audience", request{method: "POST", target: "/q/messages", header: map[string]string{"Authorization": sign("sb://localhost/other", DefaultKeyName, DefaultKey, hour)}}, 401, "InvalidAudience:"},
		{"send cannot listen", request{method: "POST", target: "/q/messages/head?timeout=0", header: map[string]string{"Authorization": sign("sb://localhost/q", "sender", "sendkey", hour)}}, 401, "'Listen' claim(s) are required"},
		{"listen cannot send", request{method: "POST", target: "/q/messages", header: map[string]string{"Authorization": sign("sb://localhost/q", "listener", "listenkey", hour)}}, 401, "'Send' claim(s) are required"},
		{"entity rule elsewhere", request{method: "POST", target: "/other/messages/head?timeout=0", header: map[string]string{"Authorization": sign("sb://localhost/other", "listener", "listenkey", hour)}}, 401, "InvalidSignature:"},
		{"send ok", request{method: "POST", target: "/q/messages", header: map[string]string{"Authorization": sign("sb://localhost/q", "sender", "sendkey", hour)}}, 201, ""},
		{"listen ok", request{method: "POST", target: "/q/messages/head?timeout=0", header: map[string]string{"Authorization": sign("https://localhost/q/messages/head", "listener", "listenkey", hour)}}, 201, ""},
		{"ServiceBusAuthorization header", request{method: "POST", target: "/q/messages", noAuth: true, header: map[string]string{"ServiceBusAuthorization": sign("sb://localhost/", "sender", "sendkey", hour)}}, 201, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := e.do(t, c.req)
			got := body(t, w)
			if w.Code != c.status || !strings.Contains(got, c.detail) {
				t.Fatalf("got %d %q, want %d containing %q", w.Code, got, c.status, c.detail)
			}
			if c.status == 401 {
				if ct := w.Header().Get("Content-Type"); ct != "application/xml; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
				if !strings.HasPrefix(got, "<Error><Code>401</Code><Detail>") || !strings.Contains(got, "TrackingId:") {
					t.Errorf("body %q", got)
				}
			}
		})
	}
}

func TestAuthUsesDefaultCredentials(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	tok := sas.Sign("sb://127.0.0.1/q", DefaultKeyName, DefaultKey, coretest.Epoch.Add(24*365*time.Hour*100))
	w := e.do(t, request{method: "POST", target: "/q/messages", header: map[string]string{"Authorization": tok}})
	if w.Code != http.StatusCreated {
		t.Fatalf("default credentials: %d %s", w.Code, w.Body.String())
	}
}
