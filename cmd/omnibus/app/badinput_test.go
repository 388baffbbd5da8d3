package app

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/gorilla/websocket"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnibusmq/omnibus/amqpserver/wsconn"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestTransportBadInputCostsNothing sends every kind of bad input the
// TLS and WebSocket fronts can get, through the whole app: on the AMQPS
// port plain bytes, a client that does not trust the certificate and a
// silent socket; on the HTTPS port the same three; at the WebSocket path
// an upgrade without an AMQP subprotocol (400), an upgrade elsewhere
// (404), a text message on an open connection (AMQP close with
// amqp:decode-error, WebSocket close 1003), and upgrade requests never
// finished over HTTP and HTTPS. Each closes only its own connection, a
// client with a wrong SNI is served all the same, the Go SDK over wss://
// works throughout, nothing is logged above debug level, and afterwards
// the process holds no more goroutines or file descriptors than before.
func TestTransportBadInputCostsNothing(t *testing.T) {
	const timeout = 500 * time.Millisecond
	a, roots, logs := startTLSApp(t, func(o *Options) {
		o.AuthTimeout = badInputAuthTimeout
		o.HTTPReadTimeout, o.HTTPWriteTimeout, o.HTTPIdleTimeout = timeout, timeout, timeout
	})
	amqps, https, plainHTTP := a.AMQPSAddr().String(), a.HTTPSAddr().String(), a.HTTPAddr().String()
	trusting := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: trusting}}
	_, httpsPort, _ := net.SplitHostPort(https)
	sdk, err := azservicebus.NewClientFromConnectionString(
		"Endpoint=sb://localhost:"+httpsPort+"/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;",
		&azservicebus.ClientOptions{NewWebSocketConn: newWebSocketConn(httpc, false)})
	if err != nil {
		t.Fatal(err)
	}
	sdkRoundTrip(t, sdk, "before") // the SDK's connection is made before the baseline
	goroutines, fds := coretest.Goroutines(), openFDs(t)
	logged := logs.Len()

	// AMQPS. The silent socket is dialed first: AuthTimeout closes it
	// while the rest runs.
	silent := dialRaw(t, amqps)
	nc := dialRaw(t, amqps)
	if _, err := io.WriteString(nc, "AMQP\x03\x01\x00\x00"); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, nc, "plain AMQP on the AMQPS port")
	expectHandshakeFails(t, amqps, "an untrusting client on the AMQPS port")
	wrongSNI(t, amqps, roots)
	expectClosed(t, silent, "a silent socket on the AMQPS port")

	// HTTPS.
	nc = dialRaw(t, https)
	if _, err := io.WriteString(nc, "GET /$servicebus/websocket HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, nc, "plain HTTP on the HTTPS port")
	expectHandshakeFails(t, https, "an untrusting client on the HTTPS port")
	expectClosed(t, dialRaw(t, https), "a silent socket on the HTTPS port")

	// The WebSocket path, over HTTPS and HTTP.
	for _, r := range []struct {
		base, path, protocol string
		status               int
	}{
		{"https://" + https, "/$servicebus/websocket", "", http.StatusBadRequest},
		{"https://" + https, "/$servicebus/websocket/", "mqtt", http.StatusBadRequest},
		{"https://" + https, "/orders", "AMQPWSB10", http.StatusNotFound},
		{"http://" + plainHTTP, "/$servicebus/websocket", "", http.StatusBadRequest},
		{"http://" + plainHTTP, "/elsewhere/websocket", "amqp", http.StatusNotFound},
	} {
		if got := upgradeStatus(t, httpc, r.base+r.path, r.protocol); got != r.status {
			t.Errorf("upgrade to %s%s with subprotocol %q: %d, want %d", r.base, r.path, r.protocol, got, r.status)
		}
	}
	httpc.CloseIdleConnections()
	textMessage(t, "wss://"+https+"/$servicebus/websocket", trusting)
	half := "GET /$servicebus/websocket HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
	nc = dialRaw(t, plainHTTP)
	if _, err := io.WriteString(nc, half); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, nc, "an upgrade request never finished over HTTP")
	tc, err := tls.Dial("tcp", https, trusting)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tc, half); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, tc, "an upgrade request never finished over HTTPS")

	sdkRoundTrip(t, sdk, "after")
	coretest.WaitGoroutines(t, goroutines)
	waitFDs(t, fds)
	for _, e := range logs.All()[logged:] {
		if e.Level > zapcore.DebugLevel {
			t.Errorf("bad input logged at %s: %q %v", e.Level, e.Message, e.ContextMap())
		}
	}
	for _, want := range []struct {
		prefix string
		n      int
	}{
		{"handshake failed", 3},          // the AMQPS listener's
		{"http: TLS handshake error", 3}, // the HTTPS listener's
		{"WebSocket upgrade refused", 3},
	} {
		if n := countDebug(logs.All()[logged:], want.prefix); n < want.n {
			t.Errorf("%d debug entries %q, want %d", n, want.prefix, want.n)
		}
	}
	if err := sdk.Close(context.Background()); err != nil {
		t.Errorf("closing the SDK client: %v", err)
	}
}

// expectHandshakeFails runs a TLS handshake that trusts no root against
// addr: it must fail, and the server must close the socket.
func expectHandshakeFails(t *testing.T, addr, what string) {
	t.Helper()
	tc := tls.Client(dialRaw(t, addr), &tls.Config{ServerName: "localhost", RootCAs: x509.NewCertPool()})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err == nil {
		t.Fatalf("%s: the handshake succeeded", what)
	}
	tc.Close()
}

// wrongSNI: a client naming another host in its SNI (and checking the
// certificate against "localhost" itself) is served the one certificate
// and speaks AMQP.
func wrongSNI(t *testing.T, addr string, roots *x509.CertPool) {
	t.Helper()
	conf := &tls.Config{ServerName: "elsewhere.example", InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: "localhost", Roots: roots, Intermediates: inter})
			return err
		}}
	tc, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatalf("TLS with SNI elsewhere.example: %v", err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(tc, "AMQP\x03\x01\x00\x00"); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(tc, hdr); err != nil || string(hdr) != "AMQP\x03\x01\x00\x00" {
		t.Fatalf("with SNI elsewhere.example: read % x, %v; want the SASL header", hdr, err)
	}
}

// upgradeStatus sends a WebSocket upgrade request to url offering
// protocol (none if empty) and returns the response's status.
func upgradeStatus(t *testing.T, c *http.Client, url, protocol string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if protocol != "" {
		req.Header.Set("Sec-WebSocket-Protocol", protocol)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("upgrade to %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// textMessage opens AMQP over a WebSocket to url (go-amqp, SASL PLAIN),
// then sends a text message, and expects an AMQP close with
// amqp:decode-error and the WebSocket's close with 1003.
func textMessage(t *testing.T, url string, conf *tls.Config) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"AMQPWSB10"}, TLSClientConfig: conf, HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("WebSocket to %s: %v", url, err)
	}
	defer ws.Close()
	nc := &textableConn{Conn: wsconn.New(ws)}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := amqp.NewConn(ctx, nc, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(DefaultKeyName, DefaultKey), HostName: "localhost"})
	if err != nil {
		t.Fatalf("AMQP over %s: %v", url, err)
	}
	defer c.Close()
	nc.mu.Lock()
	err = ws.WriteMessage(websocket.TextMessage, []byte("hello"))
	nc.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the connection is still open 10 s after a text message")
	}
	var ce *amqp.ConnError
	if err := c.Err(); !errors.As(err, &ce) || ce.RemoteErr == nil || ce.RemoteErr.Condition != amqp.ErrCondDecodeError {
		t.Errorf("after a text message the connection ended with %v, want a close with amqp:decode-error", err)
	}
	// go-amqp has stopped reading (Done is closed after its reader
	// exits) and left the WebSocket open: the server closes it.
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err = ws.NextReader(); err != nil {
			break
		}
	}
	if !websocket.IsCloseError(err, websocket.CloseUnsupportedData) {
		t.Errorf("the WebSocket ended with %v, want close 1003", err)
	}
}

// textableConn lets a test write a message of its own between go-amqp's
// writes. Its Close leaves the WebSocket open, for the test to see how
// the server ends it.
type textableConn struct {
	*wsconn.Conn
	mu sync.Mutex // serializes the WebSocket's writers
}

func (c *textableConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *textableConn) Close() error { return nil }

// countDebug counts the debug-level entries of es whose message starts
// with prefix.
func countDebug(es []observer.LoggedEntry, prefix string) int {
	n := 0
	for _, e := range es {
		if e.Level == zapcore.DebugLevel && strings.HasPrefix(e.Message, prefix) {
			n++
		}
	}
	return n
}

// openFDs counts the process's open file descriptors (-1 where the
// system has no /proc/self/fd to count them in).
func openFDs(t *testing.T) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		return -1
	}
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// waitFDs waits, up to 10 s, until the process holds at most baseline
// file descriptors (a connection's socket is one).
func waitFDs(t *testing.T, baseline int) {
	t.Helper()
	if baseline < 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := openFDs(t)
		if n <= baseline {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d file descriptors open, %d before:\n%s", n, baseline, fdList())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fdList describes the open descriptors, for a failure message.
func fdList() string {
	es, _ := os.ReadDir("/proc/self/fd")
	var b strings.Builder
	w := bufio.NewWriter(&b)
	for _, e := range es {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		w.WriteString(e.Name() + " -> " + target + "\n")
	}
	w.Flush()
	return b.String()
}
