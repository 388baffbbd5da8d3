package httpgw

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core/sas"
)

// End to end over a real socket with net/http, the way the REST SDKs talk
// to the service: tokens minted with sas.Sign over the request URL.

func newE2EServer(t testing.TB, e *testEnv) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(e.gw.Handler())
	srv.Config = e.gw.Server("")
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func signedRequest(t testing.TB, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", sas.Sign(strings.ToLower(url), DefaultKeyName, DefaultKey, time.Now().Add(time.Hour)))
	return req
}

func TestEndToEndOverSocket(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "jobs")
	srv := newE2EServer(t, e)
	client := srv.Client()

	req := signedRequest(t, "POST", srv.URL+"/jobs/messages?timeout=60", "payload")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("BrokerProperties", `{'Label': 'py', 'ForcePersistence': False}`) // legacy Python form
	req.Header.Set("Priority", `"High"`)
	req.Header.Set("Attempt", "2")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("send: %s", resp.Status)
	}

	resp, err = client.Do(signedRequest(t, "POST", srv.URL+"/jobs/messages/head?timeout=5", ""))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || string(b) != "payload" {
		t.Fatalf("peek-lock: %s %q", resp.Status, b)
	}
	var bp struct {
		Label     string
		LockToken string
	}
	if err := json.Unmarshal([]byte(resp.Header.Get("BrokerProperties")), &bp); err != nil || bp.Label != "py" || bp.LockToken == "" {
		t.Fatalf("BrokerProperties %q: %v", resp.Header.Get("BrokerProperties"), err)
	}
	if resp.Header.Get("Priority") != `"High"` || resp.Header.Get("Attempt") != "2" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", resp.Header)
	}
	if resp.Header.Get("Date") == "" {
		t.Error("no Date header")
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, srv.URL+"/jobs/messages/1/") {
		t.Fatalf("Location %q", loc)
	}

	// Replay Location verbatim to complete, as Node, Java and PHP do.
	resp, err = client.Do(signedRequest(t, "DELETE", loc, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("complete: %s", resp.Status)
	}

	resp, err = client.Do(signedRequest(t, "DELETE", srv.URL+"/jobs/messages/head?timeout=0", ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("empty receive: %s", resp.Status)
	}

	resp, err = http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %s", resp.Status)
	}
}
