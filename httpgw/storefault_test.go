package httpgw

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// Over a real socket, a full disk answers a send and a completion with
// 503 and SubCode=50004 (server busy); nothing is stored or removed, the
// lock holds, and both succeed once space returns.
func TestRESTOnAFullDisk(t *testing.T) {
	env, fs := coretest.NewFault(t)
	gw, err := New(Config{Broker: env.Broker, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{Env: env, gw: gw}
	e.mustQueue(t, "q")
	srv := newE2EServer(t, e)
	client := srv.Client()
	do := func(method, path string, want int) *http.Response {
		t.Helper()
		resp, err := client.Do(signedRequest(t, method, srv.URL+path, "payload"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %s %s, want %d", method, path, resp.Status, b, want)
		}
		if want == http.StatusServiceUnavailable && !strings.Contains(string(b), "SubCode=50004") {
			t.Fatalf("%s %s: body %s, want SubCode=50004", method, path, b)
		}
		return resp
	}
	do("POST", "/q/messages", http.StatusCreated)
	lockURL := do("POST", "/q/messages/head?timeout=1", http.StatusCreated).Header.Get("Location")
	if lockURL == "" {
		t.Fatal("peek-lock gave no Location")
	}
	lockPath := strings.TrimPrefix(lockURL, "http://localhost")
	if i := strings.Index(lockPath, "/q/"); i >= 0 {
		lockPath = lockPath[i:]
	}

	fs.FailApplies(0, -1, fmt.Errorf("test disk: %w", storage.ErrNoSpace))
	do("POST", "/q/messages", http.StatusServiceUnavailable)
	do("DELETE", lockPath, http.StatusServiceUnavailable)
	if c := env.MustCounts(t, "q"); c.Total != 1 || c.Active != 1 {
		t.Fatalf("counts %+v on a full disk", c)
	}
	fs.Heal()
	do("DELETE", lockPath, http.StatusOK)
	do("POST", "/q/messages", http.StatusCreated)
	if c := env.MustCounts(t, "q"); c.Total != 1 {
		t.Fatalf("counts %+v once space returned", c)
	}
	if err := env.Broker.Check(); err != nil {
		t.Fatal(err)
	}
}
