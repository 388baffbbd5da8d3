package httpgw

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
)

// testEnv is a gateway over a memstore broker with a fake clock, using the
// default (emulator) credentials.
type testEnv struct {
	*coretest.Env
	gw *Gateway
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	env := coretest.New(t)
	gw, err := New(Config{Broker: env.Broker, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &testEnv{Env: env, gw: gw}
}

// mustQueue creates a queue with defaults.
func (e *testEnv) mustQueue(t testing.TB, name string) {
	t.Helper()
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: name})
}

// testToken mints a namespace-wide token with the default key.
func testToken() string {
	return sas.Sign("https://localhost/", DefaultKeyName, DefaultKey, time.Now().Add(time.Hour))
}

// request describes one call to the handler.
type request struct {
	method, target, body string
	header               map[string]string
	noAuth               bool
}

// do serves req through the gateway's handler and returns the recorded
// response.
func (e *testEnv) do(t testing.TB, req request) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), req.method, "http://localhost"+req.target, strings.NewReader(req.body))
	if !req.noAuth {
		r.Header.Set("Authorization", testToken())
	}
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.gw.Handler().ServeHTTP(w, r)
	return w
}

func body(t testing.TB, w *httptest.ResponseRecorder) string {
	t.Helper()
	b, err := io.ReadAll(w.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewRequiresBroker(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a broker succeeded")
	}
}

func TestHealthNeedsNoToken(t *testing.T) {
	e := newTestEnv(t)
	w := e.do(t, request{method: http.MethodGet, target: "/health", noAuth: true})
	if w.Code != http.StatusOK || !strings.Contains(body(t, w), `"status":"healthy"`) {
		t.Fatalf("health: %d %q", w.Code, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
}

func TestRoutingCaseAndSlashes(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "Orders")
	cases := []struct {
		name   string
		req    request
		status int
	}{
		{"send lower", request{method: "POST", target: "/Orders/messages", body: "a"}, 201},
		{"send mixed case segment", request{method: "POST", target: "/orders/Messages", body: "b"}, 201},
		{"peek-lock Node spelling", request{method: "POST", target: "/orders/Messages/Head?timeout=0"}, 201},
		{"receive trailing slash", request{method: "DELETE", target: "/orders/messages/head/?timeout=0"}, 200},
		{"empty now", request{method: "DELETE", target: "/orders/messages/head?timeout=0"}, 204},
		{"unknown method on head", request{method: "PATCH", target: "/orders/messages/head"}, 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := e.do(t, c.req)
			if w.Code != c.status {
				t.Fatalf("%s %s: got %d, want %d: %s", c.req.method, c.req.target, w.Code, c.status, w.Body.String())
			}
		})
	}
}

// hget returns a response header matching name case-insensitively, so
// tests see headers the gateway writes with non-canonical spelling
// (BrokerProperties, custom properties) as a client on the wire would.
func hget(h http.Header, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}
