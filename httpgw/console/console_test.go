package console_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw"
)

// env is a broker behind the real gateway on a loopback socket, with
// three keys: one per right.
type env struct {
	*coretest.Env
	url string
}

const (
	rootKey = "root-key"
	sendKey = "send-key"
)

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with set applied to the gateway's Config (unless
// nil) before the gateway is made.
func newEnvWith(t *testing.T, set func(*httpgw.Config)) *env {
	t.Helper()
	ce := coretest.New(t)
	v, err := sas.NewValidator(sas.Config{Rules: []sas.Rule{
		{KeyName: "root", Key: rootKey, Rights: sas.Manage},
		{KeyName: "sender", Key: sendKey, Rights: sas.Send},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := httpgw.Config{Broker: ce.Broker, Auth: v, Logger: zaptest.NewLogger(t)}
	if set != nil {
		set(&cfg)
	}
	gw, err := httpgw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gw.Handler())
	srv.Config = gw.Server("")
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{Env: ce, url: srv.URL}
}

func rootToken() string {
	return sas.Sign("http://localhost/", "root", rootKey, time.Now().Add(time.Hour))
}

// call makes one request and returns its status and body.
func (e *env) call(t *testing.T, method, path, token, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// apiCall calls the API with the root token and decodes a 200 answer.
func (e *env) apiCall(t *testing.T, method, path, body string, out any) {
	t.Helper()
	status, got := e.call(t, method, "/console/$api/"+path, rootToken(), body, nil)
	if status != http.StatusOK {
		t.Fatalf("%s %s: status %d: %s", method, path, status, got)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(got), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, got)
		}
	}
}

// apiCalls lists every API call but login, with a body that would be
// valid, so that only the credentials decide.
var apiCalls = []struct{ method, path, body string }{
	{"GET", "entities?kind=queues", ""},
	{"GET", "entity?path=q", ""},
	{"GET", "messages?path=q", ""},
	{"POST", "settle", `{"path":"q","lockToken":"00000000-0000-0000-0000-000000000001","outcome":"complete"}`},
	{"POST", "resubmit", `{"path":"q","all":true}`},
	{"POST", "purge", `{"path":"q"}`},
	{"GET", "sessions?path=sq", ""},
	{"POST", "filter", `{"filter":"a = 1"}`},
}

// TestAPIRefusesWithoutValidToken: every call answers 401 without a
// token, with a token signed by a wrong key, with an expired token, and
// with a Send-only token (every call needs Listen or Manage).
func TestAPIRefusesWithoutValidToken(t *testing.T) {
	e := newEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	bad := map[string]string{
		"no token":    "",
		"wrong key":   sas.Sign("http://localhost/", "root", "not-the-key", time.Now().Add(time.Hour)),
		"expired":     sas.Sign("http://localhost/", "root", rootKey, time.Now().Add(-time.Hour)),
		"send rights": sas.Sign("http://localhost/", "sender", sendKey, time.Now().Add(time.Hour)),
		"malformed":   "Bearer abc",
	}
	for _, c := range apiCalls {
		for name, tok := range bad {
			status, body := e.call(t, c.method, "/console/$api/"+c.path, tok, c.body, nil)
			if status != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: status %d, want 401 (%s)", c.method, c.path, name, status, body)
			}
		}
		// The same call with a good token is not refused: the 401 was
		// about the credentials.
		status, body := e.call(t, c.method, "/console/$api/"+c.path, rootToken(), c.body, nil)
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			t.Errorf("%s %s with the root token: status %d (%s)", c.method, c.path, status, body)
		}
	}
	if c := e.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("refused calls changed the queue: %+v", c)
	}
}

// TestAPIRefusesCrossOrigin: a page of another origin cannot use the API
// even when the browser holds a token (it does not: the token is in
// sessionStorage, sent only by the console's own script), and an HTML
// form, which cannot send JSON, cannot reach the POST calls.
func TestAPIRefusesCrossOrigin(t *testing.T) {
	e := newEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	e.MustSend(t, "q", &core.Message{Body: []byte("keep me")})
	for _, c := range apiCalls {
		status, _ := e.call(t, c.method, "/console/$api/"+c.path, rootToken(), c.body, map[string]string{"Origin": "https://evil.example"})
		if status != http.StatusForbidden {
			t.Errorf("%s %s from another Origin: status %d, want 403", c.method, c.path, status)
		}
		status, _ = e.call(t, c.method, "/console/$api/"+c.path, rootToken(), c.body, map[string]string{"Sec-Fetch-Site": "cross-site"})
		if status != http.StatusForbidden {
			t.Errorf("%s %s with Sec-Fetch-Site cross-site: status %d, want 403", c.method, c.path, status)
		}
	}
	// A form post (text/plain, as a cross-site form can send) to purge.
	status, _ := e.call(t, "POST", "/console/$api/purge", rootToken(), "", map[string]string{"Content-Type": "text/plain"})
	if status != http.StatusUnsupportedMediaType {
		t.Errorf("purge as a form post: status %d, want 415", status)
	}
	// Login from another origin is refused too (no login CSRF).
	status, _ = e.call(t, "POST", "/console/$api/login", "", `{"keyName":"root","key":"`+rootKey+`"}`, map[string]string{"Origin": "http://evil.example"})
	if status != http.StatusForbidden {
		t.Errorf("login from another Origin: status %d, want 403", status)
	}
	if c := e.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("a refused cross-origin purge deleted messages: %+v", c)
	}
	// The console's own origin is served.
	var out struct{ Deleted int }
	status, body := e.call(t, "POST", "/console/$api/purge", rootToken(), `{"path":"q"}`, map[string]string{"Origin": e.url, "Sec-Fetch-Site": "same-origin"})
	if status != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || out.Deleted != 1 {
		t.Fatalf("same-origin purge: status %d, body %s", status, body)
	}
}

// TestLogin: a good key gets a token that works on the gateway's REST
// and ATOM endpoints too; a wrong key or unknown name gets 401; a pasted
// token is checked.
func TestLogin(t *testing.T) {
	e := newEnv(t)
	var s struct {
		Token, KeyName, Rights string
		ExpiresAt              time.Time
	}
	status, body := e.call(t, "POST", "/console/$api/login", "", `{"keyName":"root","key":"`+rootKey+`"}`, nil)
	if status != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("login: status %d, %s", status, body)
	}
	if s.KeyName != "root" || !strings.Contains(s.Rights, "Manage") || time.Until(s.ExpiresAt) < 50*time.Minute {
		t.Fatalf("login answered %+v", s)
	}
	if strings.Contains(body, rootKey) {
		t.Fatal("the login answer holds the key itself")
	}
	if status, body := e.call(t, "PUT", "/fromlogin", s.Token, `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`, map[string]string{"Content-Type": "application/atom+xml"}); status != http.StatusCreated {
		t.Fatalf("ATOM create with the login's token: status %d, %s", status, body)
	}
	for _, bad := range []string{`{"keyName":"root","key":"nope"}`, `{"keyName":"nobody","key":"x"}`,
		`{"token":"SharedAccessSignature sr=x&sig=y&se=1&skn=root"}`} {
		if status, body := e.call(t, "POST", "/console/$api/login", "", bad, nil); status != http.StatusUnauthorized {
			t.Errorf("login with %s: status %d, want 401 (%s)", bad, status, body)
		}
	}
	if status, body := e.call(t, "POST", "/console/$api/login", "", `{"keyName":"root"}`, nil); status != http.StatusBadRequest {
		t.Errorf("login without a key: status %d, want 400 (%s)", status, body)
	}
	status, body = e.call(t, "POST", "/console/$api/login", "", `{"token":"`+rootToken()+`"}`, nil)
	if status != http.StatusOK {
		t.Fatalf("login with a pasted token: status %d, %s", status, body)
	}
}

// TestPageAndEntityNamedConsole: a browser's GET of /console is the page,
// with a policy that runs only the console's own scripts; a client's
// request with a token for /console still manages a queue named console.
func TestPageAndEntityNamedConsole(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get(e.url + "/console")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "app.js") ||
		!strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
		resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("GET /console: status %d, CSP %q, headers %v", resp.StatusCode, csp, resp.Header)
	}
	for _, asset := range []string{"app.js", "api.js", "ui.js", "console.css"} {
		status, body := e.call(t, "GET", "/console/$assets/"+asset, "", "", nil)
		if status != http.StatusOK || len(body) < 100 {
			t.Errorf("asset %s: status %d, %d bytes", asset, status, len(body))
		}
	}
	tok := rootToken()
	atom := map[string]string{"Content-Type": "application/atom+xml"}
	if status, body := e.call(t, "PUT", "/console", tok, `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`, atom); status != http.StatusCreated {
		t.Fatalf("PUT /console (a queue named console): status %d, %s", status, body)
	}
	if status, body := e.call(t, "GET", "/console", tok, "", nil); status != http.StatusOK || !strings.Contains(body, "QueueDescription") {
		t.Fatalf("GET /console with a token: status %d, %s", status, body)
	}
}

// TestMessageContentIsData: a body and a property holding markup come out
// of the API as JSON strings (never as HTML, with '<' escaped), and the
// page's scripts never parse data as HTML: no innerHTML, outerHTML,
// insertAdjacentHTML or document.write anywhere in them.
func TestMessageContentIsData(t *testing.T) {
	e := newEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	evil := `<script>alert(1)</script>`
	e.MustSend(t, "q", &core.Message{Body: []byte(evil), Subject: evil, ApplicationProperties: map[string]any{evil: evil}})
	status, body := e.call(t, "GET", "/console/$api/messages?path=q", rootToken(), "", nil)
	if status != http.StatusOK || strings.Contains(body, "<script>") {
		t.Fatalf("peek: status %d, raw markup in the answer: %s", status, body)
	}
	var res struct {
		Messages []struct {
			Subject    string
			Properties []struct{ Name, Type, Value string }
		}
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || len(res.Messages) != 1 ||
		res.Messages[0].Subject != evil || res.Messages[0].Properties[0].Value != evil {
		t.Fatalf("peek answered %s", body)
	}
	for _, asset := range []string{"app.js", "api.js", "ui.js", "entity.js", "messages.js", "forms.js", "history.js"} {
		_, src := e.call(t, "GET", "/console/$assets/"+asset, "", "", nil)
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			if strings.Contains(src, sink) {
				t.Errorf("%s uses %s: data must go in as text", asset, sink)
			}
		}
	}
}

// TestProtectedModeAppliesToConsole: the gateway's Admit (protected
// mode) refuses a peer before the console sees it, page and API alike.
func TestProtectedModeAppliesToConsole(t *testing.T) {
	ce := coretest.New(t)
	gw, err := httpgw.New(httpgw.Config{Broker: ce.Broker, Logger: zaptest.NewLogger(t),
		Admit: func(net.Addr) error { return errors.New("protected mode: only this machine is served") }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	e := &env{Env: ce, url: srv.URL}
	for _, path := range []string{"/console", "/console/$assets/app.js", "/console/$api/entities"} {
		if status, body := e.call(t, "GET", path, "", "", nil); status != http.StatusForbidden || !strings.Contains(body, "protected mode") {
			t.Errorf("GET %s from a refused peer: status %d, %s", path, status, body)
		}
	}
	if status, _ := e.call(t, "POST", "/console/$api/login", "", `{"keyName":"RootManageSharedAccessKey","key":"SAS_KEY_VALUE"}`, nil); status != http.StatusForbidden {
		t.Errorf("login from a refused peer: status %d, want 403", status)
	}
}

// TestLargeNamespace: thousands of queues list a page at a time with
// counts, filtered by name; the time one page takes is logged, not
// asserted. (2,000 rather than 10,000 keeps it short under -race on a
// loaded machine; the listing's cost is linear in the entities.)
func TestLargeNamespace(t *testing.T) {
	e := newEnv(t)
	for i := range 2000 {
		e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: fmt.Sprintf("q%05d", i)})
	}
	var page struct {
		Total int
		Items []struct{ Path string }
	}
	start := time.Now()
	e.apiCall(t, "GET", "entities?kind=queues&skip=1950&top=50", "", &page)
	t.Logf("the last page of 2,000 queues took %v", time.Since(start))
	if page.Total != 2000 || len(page.Items) != 50 || page.Items[49].Path != "q01999" {
		t.Fatalf("last page: total %d, %d items", page.Total, len(page.Items))
	}
	e.apiCall(t, "GET", "entities?kind=queues&skip=9223372036854775807&top=500", "", &page)
	if page.Total != 2000 || len(page.Items) != 0 {
		t.Fatalf("a page past the end: total %d, %d items", page.Total, len(page.Items))
	}
	e.apiCall(t, "GET", "entities?kind=queues&q=q0199", "", &page)
	if page.Total != 10 || len(page.Items) != 10 || page.Items[0].Path != "q01990" {
		t.Fatalf("filtered: total %d, %+v", page.Total, page.Items)
	}
}
