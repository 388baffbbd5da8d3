package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/coder/websocket"

	"github.com/omnibusmq/omnibus/core/coretest"
)

// newWebSocketConn is the Go SDK's NewWebSocketConn as its documentation
// writes it (github.com/coder/websocket, subprotocol "amqp"), with the
// client's trusted roots and, for the plain HTTP listener, ws:// instead
// of the wss:// the SDK asks for.
func newWebSocketConn(httpc *http.Client, plain bool) func(context.Context, azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
	return func(ctx context.Context, args azservicebus.NewWebSocketConnArgs) (net.Conn, error) {
		url := args.Host
		if plain {
			url = "ws://" + strings.TrimPrefix(url, "wss://")
		}
		ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"amqp"}, HTTPClient: httpc})
		if err != nil {
			return nil, err
		}
		return websocket.NetConn(context.Background(), ws, websocket.MessageBinary), nil
	}
}

// TestWebSocketGoSDK: the Go SDK, with an ordinary connection string
// naming the HTTPS (or HTTP) port and a WebSocket dialer, sends, receives
// and settles over AMQP over WebSockets.
func TestWebSocketGoSDK(t *testing.T) {
	a, roots, _ := startTLSApp(t, nil)
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	for _, c := range []struct {
		name  string
		addr  net.Addr
		plain bool
	}{{"https", a.HTTPSAddr(), false}, {"http", a.HTTPAddr(), true}} {
		t.Run(c.name, func(t *testing.T) {
			_, port, _ := net.SplitHostPort(c.addr.String())
			cs := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;"
			client, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
				NewWebSocketConn: newWebSocketConn(httpc, c.plain)})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close(context.Background())
			sdkRoundTrip(t, client, "over WebSockets ("+c.name+")")
		})
	}
}

// dialWebSocketAMQP opens go-amqp over a WebSocket to url (plain HTTP).
func dialWebSocketAMQP(t *testing.T, url string) *amqp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"AMQPWSB10"}})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	c, err := amqp.NewConn(ctx, nc, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(DefaultKeyName, DefaultKey), HostName: "localhost"})
	if err != nil {
		t.Fatalf("AMQP over %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sendOver sends one message to orders on c, on a new sender.
func sendOver(t *testing.T, c *amqp.Conn, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	defer s.Close(ctx)
	snd, err := s.NewSender(ctx, "orders", nil)
	if err != nil {
		t.Fatalf("sender: %v", err)
	}
	defer snd.Close(ctx)
	if err := snd.Send(ctx, amqp.NewMessage([]byte(body)), nil); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// TestWebSocketRoutesAndHTTPTimeouts: the gateway routes the WebSocket
// path with or without its trailing slash, answers 404 to an upgrade
// anywhere else and 400 to one without an AMQP subprotocol; an upgraded
// connection outlives the HTTP server's read, write and idle timeouts
// (it is the AMQP server's from then on); and a client that never
// finishes its upgrade request is dropped by them, leaving nothing.
func TestWebSocketRoutesAndHTTPTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	a, _, _ := startTLSApp(t, func(o *Options) {
		o.HTTPReadTimeout, o.HTTPWriteTimeout, o.HTTPIdleTimeout = timeout, timeout, timeout
	})
	base := "ws://" + a.HTTPAddr().String()
	baseline := coretest.Goroutines()

	c := dialWebSocketAMQP(t, base+"/$servicebus/websocket/")
	sendOver(t, c, "before")
	time.Sleep(4 * timeout) // every HTTP timeout has passed
	sendOver(t, c, "after the HTTP timeouts")

	for _, r := range []struct {
		path, protocol string
		status         int
	}{
		{"/orders", "amqp", http.StatusNotFound},
		{"/$servicebus/websocket", "mqtt", http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+a.HTTPAddr().String()+r.path, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Protocol", r.protocol)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != r.status {
			t.Errorf("upgrade to %s with %s: %d %s, want %d", r.path, r.protocol, resp.StatusCode, body, r.status)
		}
	}
	http.DefaultClient.CloseIdleConnections()

	// Half an upgrade request, then nothing: the HTTP server's header
	// timeout ends it.
	nc := dialRaw(t, a.HTTPAddr().String())
	if _, err := io.WriteString(nc, "GET /$servicebus/websocket HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, nc, "an upgrade request never finished")

	c.Close()
	coretest.WaitGoroutines(t, baseline)
}

// TestWebSocketCountsTowardMaxConnections: through the app's gateway, an
// AMQP connection over a WebSocket takes a place under --max-connections
// like one on 5672: with the only place held by a TCP connection, the
// Go SDK over wss:// is refused with amqp:resource-limit-exceeded, and
// once the TCP connection is gone it is served.
func TestWebSocketCountsTowardMaxConnections(t *testing.T) {
	a, roots, _ := startTLSApp(t, func(o *Options) { o.MaxConnections = 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tcp, err := amqp.Dial(ctx, "amqp://"+a.AMQPAddr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(DefaultKeyName, DefaultKey)})
	if err != nil {
		t.Fatal(err)
	}
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	_, port, _ := net.SplitHostPort(a.HTTPSAddr().String())
	cs := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;"
	client, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		NewWebSocketConn: newWebSocketConn(httpc, false), RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	s, err := client.NewSender("orders", nil)
	if err == nil {
		err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over the cap")}, nil)
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondResourceLimitExceeded {
		t.Fatalf("a WebSocket connection over the cap: %v, want amqp:resource-limit-exceeded", err)
	}
	tcp.Close()
	// The TCP connection's place is freed once the server has seen it go;
	// the SDK does not retry amqp:resource-limit-exceeded, so wait for that.
	waitForCond(t, "the TCP connection's place to be freed", func() error {
		if n := a.amqp.Stats().ActiveConnections; n != 0 {
			return fmt.Errorf("%d connections open", n)
		}
		return nil
	})

	served, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{NewWebSocketConn: newWebSocketConn(httpc, false)})
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close(context.Background())
	sdkRoundTrip(t, served, "under the cap")
}
