package httpgw

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/membudget"
	"github.com/omnibusmq/omnibus/core/membudget/membudgettest"
)

// Over a real socket: sends whose bodies do not fit the memory budget,
// with a Content-Length or chunked, and receives while it is used up, are
// answered 503 with Retry-After and SubCode=50004 (server busy); nothing
// is stored or taken; with room they succeed and give back what they
// took.
func TestRESTPastTheMemoryBudget(t *testing.T) {
	const limit = 1 << 20
	env := coretest.New(t)
	mem := membudget.New(limit)
	gw, err := New(Config{Broker: env.Broker, Logger: zaptest.NewLogger(t), Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{Env: env, gw: gw}
	e.mustQueue(t, "q")
	srv := newE2EServer(t, e)
	do := func(req *http.Request, want int) {
		t.Helper()
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %s %.300s, want %d", req.Method, req.URL.Path, resp.Status, b, want)
		}
		if want == http.StatusServiceUnavailable && (resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "SubCode=50004")) {
			t.Fatalf("%s %s: Retry-After %q, body %.300s; want Retry-After and SubCode=50004", req.Method, req.URL.Path, resp.Header.Get("Retry-After"), b)
		}
	}
	body := strings.Repeat("x", 200<<10)
	chunked := func() *http.Request {
		req := signedRequest(t, "POST", srv.URL+"/q/messages", "")
		req.Body = io.NopCloser(bytes.NewReader([]byte(body))) // no Content-Length: chunked
		req.ContentLength = -1
		return req
	}
	mem.Acquire(limit - 100<<10) // others hold all but 100 KiB
	do(signedRequest(t, "POST", srv.URL+"/q/messages", body), http.StatusServiceUnavailable)
	do(chunked(), http.StatusServiceUnavailable)
	if c := e.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("refused sends stored %d messages", c.Total)
	}
	if got := mem.Used(); got != limit-100<<10 {
		t.Fatalf("after the refusals the budget holds %d, want %d", got, limit-100<<10)
	}
	mem.Release(limit - 100<<10)
	do(signedRequest(t, "POST", srv.URL+"/q/messages", body), http.StatusCreated)
	do(chunked(), http.StatusCreated)

	mem.Acquire(limit) // used up: a receive is refused before it takes anything
	do(signedRequest(t, "DELETE", srv.URL+"/q/messages/head?timeout=1", ""), http.StatusServiceUnavailable)
	mem.Release(limit)
	do(signedRequest(t, "DELETE", srv.URL+"/q/messages/head?timeout=1", ""), http.StatusOK)
	if c := e.MustCounts(t, "q"); c.Total != 1 {
		t.Fatalf("%d messages left, want 1", c.Total)
	}
	membudgettest.WaitUsed(t, mem, 0)
	if r := mem.Refused(); r["http-request"] != 2 || r["http-answer"] != 1 {
		t.Fatalf("refusals %v, want 2 http-request and 1 http-answer", r)
	}
}
