package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/coder/websocket"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// rebound is the name of a page whose DNS name was made to resolve to
// 127.0.0.1 (DNS rebinding): the browser connects to omnibus over
// loopback and sends this name in Host and Origin.
const rebound = "rebound.example"

// startWebApp starts an app on loopback with HTTP and metrics listeners,
// a queue "orders" holding one message, and o's key, lists and logger.
func startWebApp(t *testing.T, o Options) *App {
	t.Helper()
	o.Memory, o.AMQPAddr, o.AMQPSAddr, o.HTTPSAddr = true, "127.0.0.1:0", "-", "-"
	o.HTTPAddr, o.MetricsAddr = "127.0.0.1:0", "127.0.0.1:0"
	if o.Logger == nil {
		o.Logger = zaptest.NewLogger(t)
	}
	a, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	ctx := t.Context()
	if _, err := a.Broker.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Broker.Send(ctx, "orders", &core.Message{Body: []byte("secret")}); err != nil {
		t.Fatal(err)
	}
	return a
}

// webRequest makes one request on a new connection to addr, naming host
// in Host and, unless empty, origin in Origin; it returns the status and
// body.
func webRequest(t *testing.T, method string, addr net.Addr, path, host, origin string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr.String()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, "" // the body is the upgraded connection
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// attacks are what a rebound page does with the publicly known key, each
// with the status it gets when omnibus answers (Host naming omnibus).
type attack struct {
	name     string
	listener func(*App) net.Addr
	method   string
	path     string
	header   func(host string) map[string]string
	body     string
	served   int
}

func rebindingAttacks(key string) []attack {
	token := func(host string) map[string]string {
		return map[string]string{"Authorization": sas.Sign("http://"+host+"/orders", DefaultKeyName, key, time.Now().Add(time.Hour))}
	}
	json := func(string) map[string]string { return map[string]string{"Content-Type": "application/json"} }
	upgrade := func(string) map[string]string {
		return map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "AMQPWSB10"}
	}
	http_ := func(a *App) net.Addr { return a.HTTPAddr() }
	return []attack{
		{"REST receive-and-delete", http_, "DELETE", "/orders/messages/head", token, "", http.StatusOK},
		{"console login", http_, "POST", "/console/$api/login", json, `{"keyName":"` + DefaultKeyName + `","key":"` + key + `"}`, http.StatusOK},
		{"console page", http_, "GET", "/console", func(string) map[string]string { return nil }, "", http.StatusOK},
		{"WebSocket upgrade", http_, "GET", "/$servicebus/websocket", upgrade, "", http.StatusSwitchingProtocols},
		{"metrics", func(a *App) net.Addr { return a.MetricsAddr() }, "GET", "/metrics", func(string) map[string]string { return nil }, "", http.StatusOK},
	}
}

// TestDNSRebindingGetsNothing: with the publicly known key, a page whose
// name was rebound to 127.0.0.1 gets 421 from every HTTP listener — REST,
// the console, the WebSocket upgrade, metrics — and takes nothing from
// the queue; the same requests naming omnibus by an address, localhost,
// this machine's name or a listed name are served.
func TestDNSRebindingGetsNothing(t *testing.T) {
	a := startWebApp(t, Options{AllowedHosts: []string{"omnibus.test", "*.dev.test"}})
	port := func(addr net.Addr) string { _, p, _ := net.SplitHostPort(addr.String()); return p }
	for _, at := range rebindingAttacks(DefaultKey) {
		addr := at.listener(a)
		host := rebound + ":" + port(addr)
		status, body := webRequest(t, at.method, addr, at.path, host, "http://"+host, at.header(host), at.body)
		if status != http.StatusMisdirectedRequest || !strings.Contains(body, "--allowed-hosts "+rebound) || !strings.Contains(body, "DNS rebinding") {
			t.Errorf("%s from a rebound page: %d %.300s; want 421 naming --allowed-hosts", at.name, status, body)
		}
	}
	if n, err := a.Broker.Counts("orders"); err != nil || n.Total != 1 {
		t.Fatalf("the queue holds %d messages (%v) after the attacks, want its 1", n.Total, err)
	}
	if out := machineNames(); len(out) == 0 {
		t.Fatal("no machine name known")
	}
	for _, name := range []string{"127.0.0.1", "localhost", "app.localhost", machineNames()[0], "omnibus.test", "x.dev.test", "[::1]"} {
		for _, at := range rebindingAttacks(DefaultKey) {
			if at.name == "REST receive-and-delete" {
				continue // it would take the message; the console login stands for REST
			}
			addr := at.listener(a)
			host := name + ":" + port(addr)
			status, body := webRequest(t, at.method, addr, at.path, host, "", at.header(host), at.body)
			if status != at.served {
				t.Errorf("%s naming omnibus %s: %d %.300s; want %d", at.name, host, status, body, at.served)
			}
		}
	}
}

// TestHostCheckWithOwnKey: with a key of one's own a rebound page cannot
// authenticate, so every name is served (as behind a proxy or in a
// container network) unless --allowed-hosts is given.
func TestHostCheckWithOwnKey(t *testing.T) {
	const key = "a key of my own"
	for _, c := range []struct {
		hosts []string
		want  int
	}{{nil, http.StatusOK}, {[]string{"omnibus.test"}, http.StatusMisdirectedRequest}} {
		a := startWebApp(t, Options{Key: key, AllowedHosts: c.hosts})
		_, p, _ := net.SplitHostPort(a.HTTPAddr().String())
		host := rebound + ":" + p
		status, body := webRequest(t, "POST", a.HTTPAddr(), "/console/$api/login", host, "http://"+host,
			map[string]string{"Content-Type": "application/json"}, `{"keyName":"`+DefaultKeyName+`","key":"`+key+`"}`)
		if status != c.want {
			t.Errorf("--allowed-hosts %v: login naming %s: %d %.200s, want %d", c.hosts, host, status, body, c.want)
		}
	}
}

// TestWebSocketOriginChecked: a page of any origin can open
// ws://127.0.0.1:…/$servicebus/websocket (WebSockets know no CORS). With
// the publicly known key an origin not listed is refused with 403 before
// any AMQP is spoken; a listed one, and a client sending no Origin (no
// browser), log in with SASL PLAIN and receive. With a key of one's own
// any origin is accepted, as Service Bus does, unless the list is given.
func TestWebSocketOriginChecked(t *testing.T) {
	const listed = "http://localhost:8080"
	for _, c := range []struct {
		name    string
		key     string
		origins []string
		origin  string
		served  bool
	}{
		{"public key, foreign origin", DefaultKey, []string{listed}, "http://evil.example", false},
		{"public key, no list", DefaultKey, nil, listed, false},
		{"public key, listed origin", DefaultKey, []string{listed}, listed, true},
		{"public key, listed origin with default port", DefaultKey, []string{"http://localhost:80"}, "http://LOCALHOST", true},
		{"public key, no Origin", DefaultKey, nil, "", true},
		{"own key, foreign origin", "own key", nil, "http://evil.example", true},
		{"own key, listed origins only", "own key", []string{listed}, "http://evil.example", false},
		{"any origin", DefaultKey, []string{"*"}, "http://evil.example", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := startWebApp(t, Options{Key: c.key, AllowedOrigins: c.origins})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			h := http.Header{}
			if c.origin != "" {
				h.Set("Origin", c.origin)
			}
			ws, resp, err := websocket.Dial(ctx, "ws://"+a.HTTPAddr().String()+"/$servicebus/websocket",
				&websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}, HTTPHeader: h})
			if !c.served {
				if err == nil {
					ws.CloseNow()
					t.Fatalf("Origin %s: upgraded, want 403", c.origin)
				}
				var body []byte
				if resp != nil {
					body, _ = io.ReadAll(resp.Body)
				}
				if resp == nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "--allowed-origins "+c.origin) {
					t.Fatalf("Origin %s: %v %v %s, want 403 naming --allowed-origins", c.origin, err, resp, body)
				}
				return
			}
			if err != nil {
				t.Fatalf("Origin %q: %v", c.origin, err)
			}
			nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
			conn, err := amqp.NewConn(ctx, nc, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(DefaultKeyName, c.key), HostName: "localhost"})
			if err != nil {
				t.Fatalf("AMQP over the WebSocket: %v", err)
			}
			defer conn.Close()
			sess, err := conn.NewSession(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := sess.NewReceiver(ctx, "orders", nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := r.Receive(ctx, nil)
			if err != nil || string(m.GetData()) != "secret" {
				t.Fatalf("receive over the WebSocket: %v %v", m, err)
			}
		})
	}
}

// TestBadAllowLists: malformed entries stop the start with a message
// naming the flag.
func TestBadAllowLists(t *testing.T) {
	for _, o := range []Options{
		{AllowedHosts: []string{"http://omnibus.test"}},
		{AllowedHosts: []string{"omnibus.test:5300"}},
		{AllowedOrigins: []string{"localhost:8080"}},
		{AllowedOrigins: []string{"http://localhost:8080/page"}},
	} {
		o.Memory, o.AMQPAddr, o.AMQPSAddr, o.HTTPSAddr, o.HTTPAddr, o.MetricsAddr = true, "-", "-", "-", "127.0.0.1:0", "-"
		a, err := Start(o)
		if err == nil {
			a.Shutdown(context.Background())
			t.Errorf("%v %v: started", o.AllowedHosts, o.AllowedOrigins)
			continue
		}
		if !strings.Contains(err.Error(), "--allowed-") {
			t.Errorf("%v %v: %v, want the flag named", o.AllowedHosts, o.AllowedOrigins, err)
		}
	}
}

// consoleLogin posts a login from a new connection, its source address
// bound to from (nil: the system's choice); it returns the status and
// the Retry-After header.
func consoleLogin(t *testing.T, a *App, from net.IP, key string) (int, string) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	body := `{"keyName":"` + DefaultKeyName + `","key":"` + key + `"}`
	resp, err := c.Post("http://"+a.HTTPAddr().String()+"/console/$api/login", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestConsoleLoginThrottled: guessing the key through the console's
// login, as fast as one client can, gets only a handful of guesses heard
// (401) before every login from that address, the right key included, is
// refused with 429 and a Retry-After; another address is not held up.
func TestConsoleLoginThrottled(t *testing.T) {
	const key = "a key of my own"
	a := startWebApp(t, Options{Key: key})
	const tries = 200
	heard, refused := 0, 0
	start := time.Now()
	for i := range tries {
		status, retry := consoleLogin(t, a, net.IPv4(127, 0, 0, 1), "guess-"+string(rune('a'+i%26)))
		switch status {
		case http.StatusUnauthorized:
			heard++
		case http.StatusTooManyRequests:
			refused++
			if retry == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("wrong key: status %d", status)
		}
	}
	took := time.Since(start)
	t.Logf("%d wrong-key logins in %v: %d heard, %d refused", tries, took.Round(time.Millisecond), heard, refused)
	// Three free failures, then 1 s, 2 s, 4 s … after each: however slow
	// the loop, only a few more are heard.
	if maxHeard := 4 + int(took/time.Second); heard > maxHeard || refused == 0 {
		t.Errorf("%d of %d wrong keys heard in %v, want at most %d", heard, tries, took, maxHeard)
	}
	if status, retry := consoleLogin(t, a, net.IPv4(127, 0, 0, 1), key); status != http.StatusTooManyRequests || retry == "" {
		t.Errorf("the right key during the backoff: %d (Retry-After %q), want 429", status, retry)
	}
	if status, _ := consoleLogin(t, a, net.IPv4(127, 0, 0, 2), key); status != http.StatusOK {
		t.Errorf("the right key from another address: %d, want 200", status)
	}
}
