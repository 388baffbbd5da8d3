package amqpserver

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestWebSocketOwnOrigin: an upgrade whose Origin is the URL it was sent
// to (the Python SDK's sync WebSocket transport sends that) is served
// without asking CheckOrigin; any other origin (another port, another
// host, the other scheme) is still asked, and refused here with 403.
func TestWebSocketOwnOrigin(t *testing.T) {
	// asked is written by the server's handler and read here: the
	// response crossing a socket is no synchronisation the race detector
	// sees, so a mutex guards it.
	var (
		mu    sync.Mutex
		asked []string
	)
	ts := newTestServer(t, func(c *Config) {
		c.CheckOrigin = func(origin string) error {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, origin)
			return errors.New("not invited")
		}
	})
	url := ts.wsURL(t)
	host := strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), WebSocketPath)
	for _, c := range []struct {
		origin string
		served bool
	}{
		{"http://" + host, true},
		{"HTTP://" + strings.ToUpper(host) + "/", true},
		{"", true},
		{"https://" + host, false},
		{"http://" + strings.Replace(host, "127.0.0.1", "localhost", 1), false},
		{"http://127.0.0.1:1", false},
		{"http://" + host + "/page", false},
		{"null", false},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		status := upgradeWithOrigin(t, http.DefaultClient, "http"+strings.TrimPrefix(url, "ws"), c.origin)
		if served := status == http.StatusSwitchingProtocols; served != c.served || (!served && status != http.StatusForbidden) {
			t.Errorf("Origin %q: %d, want served=%v (else 403)", c.origin, status, c.served)
		}
		mu.Lock()
		got := append([]string(nil), asked...)
		mu.Unlock()
		if wantAsked := !c.served; (len(got) == 1) != wantAsked {
			t.Errorf("Origin %q: CheckOrigin asked about %q, want asked=%v", c.origin, got, wantAsked)
		}
	}
}

// TestWebSocketOwnOriginTLS: over TLS the own origin is https://host:port.
func TestWebSocketOwnOriginTLS(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		c.CheckOrigin = func(string) error { return errors.New("not invited") }
	})
	mux := http.NewServeMux()
	mux.Handle(WebSocketPath, ts.srv.WebSocketHandler())
	hs := httptest.NewTLSServer(mux)
	t.Cleanup(hs.Close)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	host := strings.TrimPrefix(hs.URL, "https://")
	if status := upgradeWithOrigin(t, client, hs.URL+WebSocketPath, "https://"+host); status != http.StatusSwitchingProtocols {
		t.Errorf("own https origin: %d, want 101", status)
	}
	if status := upgradeWithOrigin(t, client, hs.URL+WebSocketPath, "http://"+host); status != http.StatusForbidden {
		t.Errorf("http origin on the TLS port: %d, want 403", status)
	}
}

// upgradeWithOrigin sends an AMQP WebSocket upgrade to url with origin
// in Origin (none when empty) and returns the status.
func upgradeWithOrigin(t *testing.T, c *http.Client, url, origin string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Protocol", "AMQPWSB10")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("upgrade with Origin %q: %v", origin, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
