package httpgw

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
)

// Tests of the gateway's resource bounds over real sockets: timeouts,
// body limits, the connection cap, admission and the health report.

// patience is how long a test waits for something that must happen
// much sooner (a timeout of a second or less, an answer): reaching it is
// a failure, never a measurement.
const patience = 20 * time.Second

// limitEnv is a gateway with cfg's limits served on a real listener.
type limitEnv struct {
	*testEnv
	addr string
	srv  *http.Server
}

func newLimitEnv(t *testing.T, cfg Config, tlsConf *tls.Config) *limitEnv {
	t.Helper()
	e := newTestEnv(t)
	cfg.Broker = e.Broker
	cfg.Logger = zaptest.NewLogger(t)
	var err error
	if e.gw, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.gw.Server("")
	go srv.Serve(e.gw.Listener(l, tlsConf))
	t.Cleanup(func() { srv.Close() })
	return &limitEnv{testEnv: e, addr: l.Addr().String(), srv: srv}
}

// dial opens a raw connection to the gateway; every read and write on it
// gives up after patience.
func (e *limitEnv) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(patience))
	return c
}

// roundTrip writes a raw request on c and reads the response.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	return readResponse(t, br)
}

func readResponse(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return resp, string(b)
}

// expectClosed reads from c until the server closes it; reaching the
// deadline fails the test.
func expectClosed(t *testing.T, br io.Reader, what string) {
	t.Helper()
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open for %v", what, patience)
	}
}

// trickle writes one byte of body every interval until stop is closed
// or a write fails.
func trickle(c net.Conn, interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}
}

func sendHead(path, token string, contentLength int) string {
	auth := ""
	if token != "" {
		auth = "Authorization: " + token + "\r\n"
	}
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: localhost\r\n%sContent-Length: %d\r\n\r\n", path, auth, contentLength)
}

// TestTrickledBodyIsCutByReadTimeout: a body sent a byte at a time is
// answered and its connection closed once the read timeout passes,
// although bytes keep coming.
func TestTrickledBodyIsCutByReadTimeout(t *testing.T) {
	e := newLimitEnv(t, Config{ReadTimeout: 500 * time.Millisecond}, nil)
	e.mustQueue(t, "q")
	c := e.dial(t)
	if _, err := io.WriteString(c, sendHead("/q/messages", testToken(), 100000)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go trickle(c, 20*time.Millisecond, stop)
	br := bufio.NewReader(c)
	resp, body := readResponse(t, br)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "timeout") {
		t.Fatalf("trickled body: %d %s", resp.StatusCode, body)
	}
	expectClosed(t, br, "trickled body")
}

// TestUnauthorizedBodyIsNotDrained: a request without a token is answered
// 401 at once and its connection closed, without waiting for the body the
// peer trickles (the server would otherwise read it to its end first).
func TestUnauthorizedBodyIsNotDrained(t *testing.T) {
	e := newLimitEnv(t, Config{}, nil) // default read timeout: a minute
	e.mustQueue(t, "q")
	for _, length := range []string{"Content-Length: 1000\r\n", "Transfer-Encoding: chunked\r\n"} {
		c := e.dial(t)
		head := "POST /q/messages HTTP/1.1\r\nHost: localhost\r\n" + length + "\r\n"
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(length, "chunked") {
			_, _ = io.WriteString(c, "3e8\r\n")
		}
		stop := make(chan struct{})
		go trickle(c, 20*time.Millisecond, stop)
		br := bufio.NewReader(c)
		resp, body := readResponse(t, br)
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Errorf("%s: %d close=%v %s", length, resp.StatusCode, resp.Close, body)
		}
		expectClosed(t, br, "401 with a trickled body")
		close(stop)
	}
}

// TestIdleKeepAliveIsClosed: a keep-alive connection that sends nothing
// after its request is closed after the idle timeout.
func TestIdleKeepAliveIsClosed(t *testing.T) {
	e := newLimitEnv(t, Config{IdleTimeout: 200 * time.Millisecond}, nil)
	c := e.dial(t)
	br := bufio.NewReader(c)
	resp, _ := roundTrip(t, c, br, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("health: %d close=%v", resp.StatusCode, resp.Close)
	}
	expectClosed(t, br, "idle keep-alive")
}

// TestLongPollOutlivesWriteTimeout: a receive that waits longer than the
// write timeout still gets its answer. The write timeout is what any
// answer must be written within, so it is kept well above what a loaded
// machine delays a goroutine by (with 50 ms, 82 of 300 runs failed under
// load: the answer after the wait, or the next one, came too late); the
// wait is twice as long, which still fails without the extension.
func TestLongPollOutlivesWriteTimeout(t *testing.T) {
	e := newLimitEnv(t, Config{WriteTimeout: 2 * time.Second}, nil)
	e.mustQueue(t, "q")
	c := e.dial(t)
	br := bufio.NewReader(c)
	resp, body := roundTrip(t, c, br, sendHead("/q/messages/head?timeout=4", testToken(), 0))
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("long poll: %d %s", resp.StatusCode, body)
	}
	// The connection is still good for the next request.
	resp, body = roundTrip(t, c, br, sendHead("/q/messages", testToken(), 2)+"hi")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("send after the long poll: %d %s", resp.StatusCode, body)
	}
}

// TestOversizedBodyRefusedBeforeReading: a Content-Length above the
// entity's limit is refused with 403 before any body byte is read, and a
// chunked body as soon as it passes the limit; both close the connection.
func TestOversizedBodyRefusedBeforeReading(t *testing.T) {
	e := newLimitEnv(t, Config{}, nil)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "small", MaxMessageSizeInKilobytes: core.DefaultMaxMessageSizeKB})
	c := e.dial(t)
	br := bufio.NewReader(c)
	// Announce 10 MB and send none of it: the answer must not wait for it.
	resp, body := roundTrip(t, c, br, sendHead("/small/messages", testToken(), 10<<20))
	if resp.StatusCode != http.StatusForbidden || !resp.Close || !strings.Contains(body, "exceeds the limit (262144 bytes)") {
		t.Fatalf("announced 10 MB: %d close=%v %s", resp.StatusCode, resp.Close, body)
	}
	expectClosed(t, br, "oversized Content-Length")

	c = e.dial(t)
	br = bufio.NewReader(c)
	head := "POST /small/messages HTTP/1.1\r\nHost: localhost\r\nAuthorization: " + testToken() + "\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunk := fmt.Sprintf("%x\r\n%s\r\n", 300<<10, strings.Repeat("a", 300<<10))
	if _, err := io.WriteString(c, head+chunk); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{}) // the rest of the body never ends
	defer close(stop)
	go trickle(c, 20*time.Millisecond, stop)
	resp, body = readResponse(t, br)
	if resp.StatusCode != http.StatusForbidden || !resp.Close {
		t.Fatalf("chunked 300+ KiB: %d close=%v %s", resp.StatusCode, resp.Close, body)
	}
	expectClosed(t, br, "oversized chunked body")
	if c, err := e.Broker.Counts("small"); err != nil || c.Total != 0 {
		t.Errorf("counts %+v, %v: nothing should be stored", c, err)
	}
}

// TestManagementBodyCap: an ATOM body above the management cap is refused
// with 400 before it is read.
func TestManagementBodyCap(t *testing.T) {
	e := newLimitEnv(t, Config{}, nil)
	c := e.dial(t)
	br := bufio.NewReader(c)
	raw := fmt.Sprintf("PUT /big HTTP/1.1\r\nHost: localhost\r\nAuthorization: %s\r\nContent-Type: application/atom+xml\r\nContent-Length: %d\r\n\r\n", testToken(), maxManagementBody+1)
	resp, body := roundTrip(t, c, br, raw)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "limit of a management request") {
		t.Fatalf("big management body: %d %s", resp.StatusCode, body)
	}
}

// TestConnectionCapEvictsLongestIdle: at the cap, a new connection is
// served and the keep-alive idle the longest is closed.
func TestConnectionCapEvictsLongestIdle(t *testing.T) {
	const max = 4
	e := newLimitEnv(t, Config{MaxConnections: max}, nil)
	var conns []net.Conn
	var readers []*bufio.Reader
	for range max {
		c := e.dial(t)
		br := bufio.NewReader(c)
		if resp, _ := roundTrip(t, c, br, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); resp.StatusCode != http.StatusOK {
			t.Fatalf("health: %d", resp.StatusCode)
		}
		conns, readers = append(conns, c), append(readers, br)
		e.waitConns(t, len(conns), len(conns)) // idle in this order
	}
	// Make the first the most recently idle: the second has waited longest.
	if resp, _ := roundTrip(t, conns[0], readers[0], "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); resp.StatusCode != http.StatusOK {
		t.Fatalf("health again: %d", resp.StatusCode)
	}
	e.waitConns(t, max, max)
	c := e.dial(t)
	br := bufio.NewReader(c)
	if resp, body := roundTrip(t, c, br, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); resp.StatusCode != http.StatusOK {
		t.Fatalf("health over the cap: %d %s", resp.StatusCode, body)
	}
	expectClosed(t, readers[1], "the longest idle connection")
	if n := e.gw.conns.openConns(); n != max {
		t.Errorf("%d connections counted, want %d", n, max)
	}
	// The others still serve.
	for _, i := range []int{0, 2, 3} {
		if resp, _ := roundTrip(t, conns[i], readers[i], "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: %d", i, resp.StatusCode)
		}
	}
}

// TestConnectionCapRefusesWhenAllBusy: with every connection inside a
// request, a new one gets 503 ServerBusy; once they finish, it is served.
func TestConnectionCapRefusesWhenAllBusy(t *testing.T) {
	const max = 2
	e := newLimitEnv(t, Config{MaxConnections: max}, nil)
	e.mustQueue(t, "q")
	for range max {
		c := e.dial(t)
		if _, err := io.WriteString(c, sendHead("/q/messages/head?timeout=60", testToken(), 0)); err != nil {
			t.Fatal(err)
		}
	}
	e.waitConns(t, 0, max) // both polls in progress
	c := e.dial(t)
	br := bufio.NewReader(c)
	resp, body := roundTrip(t, c, br, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "SubCode=50004") {
		t.Fatalf("over the cap: %d %s", resp.StatusCode, body)
	}
	expectClosed(t, br, "refused connection")
	// A message ends one poll; its connection goes idle and makes room.
	e.do(t, request{method: "POST", target: "/q/messages", body: "m"})
	e.waitConns(t, 1, max) // the poll that got it is idle now
	c = e.dial(t)
	br = bufio.NewReader(c)
	if resp, body := roundTrip(t, c, br, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after a poll ended: %d %s", resp.StatusCode, body)
	}
}

// waitConns waits until the limiter counts open connections, waiting of
// them with no request in progress.
func (e *limitEnv) waitConns(t *testing.T, waiting, open int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		e.gw.conns.mu.Lock()
		w, o := e.gw.conns.mu.waiting.Len(), e.gw.conns.mu.open
		e.gw.conns.mu.Unlock()
		if w == waiting && o == open {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections: %d waiting, %d open; want %d, %d", w, o, waiting, open)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConnectionCapOverTLS: the cap sees through TLS; at the cap the
// longest idle TLS connection makes room.
func TestConnectionCapOverTLS(t *testing.T) {
	cert, _, err := LoadOrCreateCertificate(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newLimitEnv(t, Config{MaxConnections: 1}, &tls.Config{Certificates: []tls.Certificate{cert}})
	roots := x509.NewCertPool()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots.AddCert(leaf)
	get := func() (*tls.Conn, *bufio.Reader) {
		c, err := tls.Dial("tcp", e.addr, &tls.Config{RootCAs: roots, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(patience))
		br := bufio.NewReader(c)
		if resp, body := roundTrip(t, c, br, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"); resp.StatusCode != http.StatusOK {
			t.Fatalf("health over TLS: %d %s", resp.StatusCode, body)
		}
		return c, br
	}
	_, first := get()
	e.waitConns(t, 1, 1) // idle: it can make room
	get()
	expectClosed(t, first, "the idle TLS connection")
}

// TestAdmitRefusesWith403: a peer Config.Admit refuses gets 403 with the
// reason, and its connection is closed.
func TestAdmitRefusesWith403(t *testing.T) {
	var peer net.Addr
	admit := func(a net.Addr) error { peer = a; return errors.New("protected mode: go away") }
	e := newLimitEnv(t, Config{Admit: admit}, nil)
	c := e.dial(t)
	br := bufio.NewReader(c)
	resp, body := roundTrip(t, c, br, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if resp.StatusCode != http.StatusForbidden || !resp.Close || !strings.Contains(body, "protected mode: go away") {
		t.Fatalf("refused peer: %d close=%v %s", resp.StatusCode, resp.Close, body)
	}
	if peer == nil || peer.String() != c.LocalAddr().String() {
		t.Errorf("Admit saw %v, the peer is %v", peer, c.LocalAddr())
	}
	expectClosed(t, br, "refused peer")
}

// TestHealthReportsComponents: 200 while every component serves, 503
// "degraded" with the failing component's reason otherwise.
func TestHealthReportsComponents(t *testing.T) {
	var storeErr error
	comps := []Component{
		{Name: "amqp", Health: func() error { return nil }},
		{Name: "store", Health: func() error { return storeErr }},
	}
	e := newLimitEnv(t, Config{Components: comps}, nil)
	w := e.do(t, request{method: "GET", target: "/health", noAuth: true})
	want := `{"status":"healthy","components":[{"name":"amqp","status":"healthy"},{"name":"store","status":"healthy"}]}`
	if got := strings.TrimSpace(body(t, w)); w.Code != http.StatusOK || got != want {
		t.Fatalf("healthy: %d %s", w.Code, got)
	}
	storeErr = errors.New("storage: no space left")
	w = e.do(t, request{method: "GET", target: "/health", noAuth: true})
	want = `{"status":"degraded","components":[{"name":"amqp","status":"healthy"},{"name":"store","status":"degraded","reason":"storage: no space left"}]}`
	if got := strings.TrimSpace(body(t, w)); w.Code != http.StatusServiceUnavailable || got != want {
		t.Fatalf("degraded: %d %s", w.Code, got)
	}
}

// TestShutdownEndsLongPolls: a server's Shutdown answers a waiting long
// poll with 204 at once rather than waiting out its minute.
func TestShutdownEndsLongPolls(t *testing.T) {
	e := newLimitEnv(t, Config{MaxConnections: 10}, nil)
	e.mustQueue(t, "q")
	c := e.dial(t)
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, sendHead("/q/messages/head?timeout=60", testToken(), 0)); err != nil {
		t.Fatal(err)
	}
	e.waitConns(t, 0, 1) // the poll is in progress
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.srv.Shutdown(ctx) }()
	resp, body := readResponse(t, br)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("long poll at shutdown: %d %s", resp.StatusCode, body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
