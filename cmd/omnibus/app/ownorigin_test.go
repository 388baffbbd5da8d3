package app

import (
	"net"
	"net/http"
	"testing"
)

// TestWebSocketOwnOrigin: with the publicly known key, a WebSocket
// upgrade whose Origin is the URL it was sent to (what the Python SDK's
// sync WebSocket transport sends) is served, while a rebound page, whose
// Host and Origin both name itself, still gets 421 from the host check.
func TestWebSocketOwnOrigin(t *testing.T) {
	a := startWebApp(t, Options{Key: DefaultKey})
	addr := a.HTTPAddr().String()
	_, port, _ := net.SplitHostPort(addr)
	upgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "AMQPWSB10"}
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{addr, "http://" + addr, http.StatusSwitchingProtocols},
		{addr, "http://localhost:" + port, http.StatusForbidden},
		{rebound + ":" + port, "http://" + rebound + ":" + port, http.StatusMisdirectedRequest},
	} {
		if status, body := webRequest(t, http.MethodGet, a.HTTPAddr(), "/$servicebus/websocket", c.host, c.origin, upgrade, ""); status != c.want {
			t.Errorf("Host %s, Origin %s: %d %.200s, want %d", c.host, c.origin, status, body, c.want)
		}
	}
}
