package conformance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/gorilla/websocket"

	"github.com/omnibusmq/omnibus/amqpserver/wsconn"
)

// The transports besides plain AMQP: AMQP over TLS (5671) and AMQP over
// WebSockets (wss://host/$servicebus/websocket), as the SDKs reach a
// cloud namespace with an ordinary connection string.

// openTransports fills in the AMQPS and WebSocket endpoints an ordinary
// connection string implies, and the roots to trust.
func (tg *Target) openTransports() error {
	if !tg.cs.UseDevelopmentEmulator {
		host, port, err := net.SplitHostPort(tg.cs.Host)
		if err != nil {
			host, port = tg.cs.Host, ""
		}
		if tg.AMQPS == "" {
			tg.AMQPS = net.JoinHostPort(host, orDefault(&port, "5671"))
		}
		if tg.WebSocket == "" {
			tg.WebSocket = "wss://" + host + "/$servicebus/websocket"
		}
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if tg.CAFile != "" {
		pem, err := os.ReadFile(tg.CAFile)
		if err != nil {
			return fmt.Errorf("conformance: --ca-file: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("conformance: --ca-file %s holds no certificate", tg.CAFile)
		}
	}
	tg.roots = roots
	return nil
}

// tlsConfig is the client TLS configuration for host.
func (tg *Target) tlsConfig(host string) *tls.Config {
	return &tls.Config{RootCAs: tg.roots, ServerName: host, InsecureSkipVerify: tg.InsecureTLS, MinVersion: tls.VersionTLS12}
}

// keyPart is the connection string's key, for connection strings built
// for other endpoints.
func (tg *Target) keyPart() string {
	return ";SharedAccessKeyName=" + tg.cs.SharedAccessKeyName + ";SharedAccessKey=" + tg.cs.SharedAccessKey
}

// amqpsEndpoint returns the AMQPS host:port and its host, skipping the
// scenario when the endpoint has none.
func (t *T) amqpsEndpoint() (addr, host string) {
	t.live()
	addr = t.target.AMQPS
	if addr == "" {
		t.Skipf("no AMQPS endpoint (--amqps, or an ordinary connection string)")
	}
	host, _, err := net.SplitHostPort(addr)
	t.must(err, "AMQPS address %q", addr)
	return addr, host
}

// transportRetries are the transport scenarios' SDK retries: one covers a
// blip, and a transport that does not work (an untrusted certificate)
// fails the scenario in seconds rather than after the SDK's minute.
var transportRetries = azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 200 * time.Millisecond}

// TLSClient is an SDK client over AMQPS with an ordinary connection
// string, trusting the target's roots; closed when the scenario ends.
func (t *T) TLSClient() *azservicebus.Client {
	addr, host := t.amqpsEndpoint()
	c, err := azservicebus.NewClientFromConnectionString("Endpoint=sb://"+addr+"/"+t.target.keyPart(),
		// The Go SDK hands go-amqp host:port as the TLS server name on a
		// port other than 5671: name the host.
		&azservicebus.ClientOptions{TLSConfig: t.target.tlsConfig(host), RetryOptions: transportRetries})
	t.must(err, "SDK client over AMQPS")
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// webSocketEndpoint returns the WebSocket URL, skipping the scenario when
// the endpoint has none.
func (t *T) webSocketEndpoint() *url.URL {
	t.live()
	if t.target.WebSocket == "" {
		t.Skipf("no AMQP-over-WebSockets endpoint (--websocket, or an ordinary connection string)")
	}
	u, err := url.Parse(t.target.WebSocket)
	t.must(err, "WebSocket URL %q", t.target.WebSocket)
	return u
}

// DialWebSocket opens a WebSocket to the endpoint offering subprotocol,
// and returns the AMQP byte stream over it, closed when the scenario ends.
func (t *T) DialWebSocket(subprotocol string) *wsconn.Conn {
	u := t.webSocketEndpoint()
	d := websocket.Dialer{Subprotocols: []string{subprotocol}, HandshakeTimeout: 30 * time.Second,
		TLSClientConfig: t.target.tlsConfig(u.Hostname()), Proxy: http.ProxyFromEnvironment}
	ws, resp, err := d.DialContext(t.ctx, u.String(), nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	t.must(err, "opening a WebSocket to %s with subprotocol %s", u, subprotocol)
	nc := wsconn.New(ws)
	t.Cleanup(func() { nc.Close() })
	if nc.Subprotocol() != subprotocol {
		t.Fatalf("WebSocket subprotocol %q, want %q echoed", nc.Subprotocol(), subprotocol)
	}
	return nc
}

// WebSocketClient is an SDK client over AMQP over WebSockets (subprotocol
// "amqp", as the Go SDK's documentation dials it), closed when the
// scenario ends.
func (t *T) WebSocketClient() *azservicebus.Client {
	u := t.webSocketEndpoint()
	c, err := azservicebus.NewClientFromConnectionString("Endpoint=sb://"+u.Host+"/"+t.target.keyPart(),
		&azservicebus.ClientOptions{RetryOptions: transportRetries, NewWebSocketConn: func(ctx context.Context, _ azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
			d := websocket.Dialer{Subprotocols: []string{"amqp"}, TLSClientConfig: t.target.tlsConfig(u.Hostname()), Proxy: http.ProxyFromEnvironment}
			ws, resp, err := d.DialContext(ctx, u.String(), nil)
			if resp != nil && resp.Body != nil {
				resp.Body.Close()
			}
			if err != nil {
				return nil, err
			}
			return wsconn.New(ws), nil
		}})
	t.must(err, "SDK client over WebSockets")
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// AMQPOver starts go-amqp on nc with SASL PLAIN (the connection string's
// key), closed when the scenario ends.
func (t *T) AMQPOver(nc net.Conn, host string) *amqp.Conn {
	conn, err := amqp.NewConn(t.ctx, nc, &amqp.ConnOptions{
		SASLType: amqp.SASLTypePlain(t.target.cs.SharedAccessKeyName, t.target.cs.SharedAccessKey),
		HostName: host, IdleTimeout: 2 * time.Minute})
	t.must(err, "AMQP over %T", nc)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// chunkedStream cuts every write into messages of 1 to 7 bytes, so that
// AMQP frames and protocol headers arrive split at every kind of
// boundary.
type chunkedStream struct {
	*wsconn.Conn
	mu   sync.Mutex
	next int
}

func (c *chunkedStream) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for off := 0; off < len(p); {
		c.next = c.next%7 + 1
		end := min(off+c.next, len(p))
		if _, err := c.Conn.Write(p[off:end]); err != nil {
			return off, err
		}
		off = end
	}
	return len(p), nil
}

// sdkRoundTrip sends body to q with client, then receives and completes
// it with the same client.
func (t *T) sdkRoundTrip(client *azservicebus.Client, q, body string) {
	s, err := client.NewSender(q, nil)
	t.must(err, "sender for %s", q)
	defer s.Close(context.Background())
	t.must(s.SendMessage(t.ctx, Text(body), nil), "sending to %s", q)
	r, err := client.NewReceiverForQueue(q, nil)
	t.must(err, "receiver for %s", q)
	defer r.Close(context.Background())
	m := t.ReceiveN(r, 1, 15*time.Second)[0]
	if string(m.Body) != body {
		t.Fatalf("received %q, want %q", m.Body, body)
	}
	t.Complete(r, m)
}

// wireRoundTrip sends body to q on conn with go-amqp, then receives and
// accepts it (peek-lock).
func (t *T) wireRoundTrip(conn *amqp.Conn, q, body string) {
	s, err := conn.NewSession(t.ctx, nil)
	t.must(err, "session")
	snd := t.WireSender(s, q, false)
	t.must(snd.Send(t.ctx, wireMessage([]byte(body)), nil), "send")
	r := t.WireReceiver(s, q, false)
	t.must(r.IssueCredit(1), "credit")
	m := t.wireReceive(r, 15*time.Second)
	if got := bodyOf(m); got != body {
		t.Fatalf("received %q, want %q", got, body)
	}
	t.must(r.AcceptMessage(t.ctx, m), "accept")
}
