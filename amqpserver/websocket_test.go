package amqpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	coderws "github.com/coder/websocket"
	"github.com/gorilla/websocket"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/amqpserver/wsconn"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// wsURL serves ts's WebSocket handler at WebSocketPath on a loopback HTTP
// server and returns the ws:// URL of the path.
func (ts *testServer) wsURL(t testing.TB) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(WebSocketPath, ts.srv.WebSocketHandler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return "ws" + strings.TrimPrefix(hs.URL, "http") + WebSocketPath
}

// dialGorilla opens a WebSocket offering subprotocols with gorilla's
// client and returns it as a stream.
func dialGorilla(t testing.TB, url string, subprotocols ...string) *wsconn.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: subprotocols, HandshakeTimeout: 5 * time.Second}
	ws, resp, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("WebSocket dial %s %v: %v (response %v)", url, subprotocols, err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	return wsconn.New(ws)
}

// dialCoder opens a WebSocket the way the Azure Go SDK's documentation
// does (github.com/coder/websocket, subprotocol "amqp").
func dialCoder(t testing.TB, url string) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ws, _, err := coderws.Dial(ctx, url, &coderws.DialOptions{Subprotocols: []string{"amqp"}})
	if err != nil {
		t.Fatalf("WebSocket dial %s: %v", url, err)
	}
	if ws.Subprotocol() != "amqp" {
		t.Errorf("subprotocol %q, want amqp", ws.Subprotocol())
	}
	nc := coderws.NetConn(context.Background(), ws, coderws.MessageBinary)
	t.Cleanup(func() { nc.Close() })
	return nc
}

// amqpOver starts go-amqp on nc with SASL PLAIN and the root key.
func amqpOver(t testing.TB, nc net.Conn) *amqp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := amqp.NewConn(ctx, nc, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey), HostName: "localhost"})
	if err != nil {
		t.Fatalf("AMQP over WebSocket: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends body to q and receives and accepts it.
func roundTrip(t testing.TB, c *amqp.Conn, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := mustSession(t, c)
	defer s.Close(ctx)
	snd, err := s.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(ctx)
	if err := snd.Send(ctx, amqp.NewMessage([]byte(body)), nil); err != nil {
		t.Fatalf("send: %v", err)
	}
	rcv, err := s.NewReceiver(ctx, "q", &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close(ctx)
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if got := string(m.GetData()); got != body {
		t.Errorf("received %q, want %q", got, body)
	}
	if err := rcv.AcceptMessage(ctx, m); err != nil {
		t.Fatalf("accept: %v", err)
	}
}

// TestWebSocketBothSubprotocols: go-amqp over a WebSocket with "amqp"
// (what .NET and Go send; coder/websocket, as the Go SDK's docs do) and
// with "AMQPWSB10" (Java, JavaScript, Python; gorilla's client).
func TestWebSocketBothSubprotocols(t *testing.T) {
	ts := newTestServer(t, nil)
	url := ts.wsURL(t)
	roundTrip(t, amqpOver(t, dialCoder(t, url)), "over amqp")
	nc := dialGorilla(t, url, "AMQPWSB10")
	if nc.Subprotocol() != "AMQPWSB10" {
		t.Errorf("subprotocol %q, want AMQPWSB10", nc.Subprotocol())
	}
	roundTrip(t, amqpOver(t, nc), "over AMQPWSB10")
}

// chunkedConn splits every write into WebSocket messages of 1 to 7
// bytes, so AMQP frames (and the protocol headers) arrive cut at every
// kind of boundary.
type chunkedConn struct {
	*wsconn.Conn
	mu   sync.Mutex
	next int
}

func (c *chunkedConn) Write(p []byte) (int, error) {
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

// TestWebSocketFramesSplitAndJoined: the server reads the AMQP stream
// whatever the message boundaries: frames split over many messages (a
// go-amqp client whose every write is cut into 1-7 byte messages), empty
// messages, and a whole handshake and more in a single message.
func TestWebSocketFramesSplitAndJoined(t *testing.T) {
	ts := newTestServer(t, nil)
	url := ts.wsURL(t)
	roundTrip(t, amqpOver(t, &chunkedConn{Conn: dialGorilla(t, url, "AMQPWSB10")}), "in pieces")

	nc := dialGorilla(t, url, "amqp")
	p := &rawPeer{t: t, nc: nc, rd: frames.NewReader(nc, 1<<20)}
	var b buffer.Buffer
	sasl, amqpHdr := frames.SASLHeader.Bytes(), frames.AMQPHeader.Bytes()
	b.Append(sasl[:])
	mustWrite := func(body frames.Body) {
		if err := frames.Write(&b, frames.Frame{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(&frames.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00" + testKeyName + "\x00" + testKey)})
	b.Append(amqpHdr[:])
	mustWrite(&frames.Open{ContainerID: "joined", MaxFrameSize: 65536, ChannelMax: 10})
	mustWrite(beginFrame())
	mustWrite(senderAttach("q"))
	if _, err := nc.Write(nil); err != nil { // an empty message: nothing to read
		t.Fatal(err)
	}
	p.writeBytes(b.Bytes()) // one message
	if h := p.readHeader(); h != frames.SASLHeader {
		t.Fatalf("got %v, want the SASL header", h)
	}
	p.readFrame() // mechanisms
	if o, ok := p.readFrame().(*frames.SASLOutcome); !ok || o.Code != frames.SASLOK {
		t.Fatalf("SASL outcome %+v", o)
	}
	if h := p.readHeader(); h != frames.AMQPHeader {
		t.Fatalf("got %v, want the AMQP header", h)
	}
	for _, want := range []string{"*frames.Open", "*frames.Begin", "*frames.Attach"} {
		got := p.readFrame()
		if name := fmt.Sprintf("%T", got); name != want {
			t.Fatalf("got %s, want %s", name, want)
		}
		if a, ok := got.(*frames.Attach); ok && (a.Target == nil || a.Target.Address != "q") {
			t.Fatalf("attach answered %+v", a)
		}
	}
}

// TestWebSocketBadUpgrades: requests that are not a usable AMQP WebSocket
// upgrade get the HTTP status that says why, and leave nothing behind.
func TestWebSocketBadUpgrades(t *testing.T) {
	ts := newTestServer(t, nil)
	url := "http" + strings.TrimPrefix(ts.wsURL(t), "ws")
	baseline := coretest.Goroutines()
	upgrade := func(method, version string, protocols ...string) *http.Request {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", version)
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if len(protocols) > 0 {
			req.Header.Set("Sec-WebSocket-Protocol", strings.Join(protocols, ", "))
		}
		return req
	}
	plain, _ := http.NewRequest(http.MethodGet, url, nil)
	for _, c := range []struct {
		name   string
		req    *http.Request
		status int
		header string // a response header that must be set
	}{
		{"no upgrade", plain, http.StatusUpgradeRequired, "Upgrade"},
		{"no subprotocol", upgrade(http.MethodGet, "13"), http.StatusBadRequest, ""},
		{"another subprotocol", upgrade(http.MethodGet, "13", "mqtt", "wamp"), http.StatusBadRequest, ""},
		{"version 8", upgrade(http.MethodGet, "8", "amqp"), http.StatusUpgradeRequired, "Sec-WebSocket-Version"},
		{"POST", upgrade(http.MethodPost, "13", "amqp"), http.StatusMethodNotAllowed, "Allow"},
	} {
		resp, err := http.DefaultClient.Do(c.req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || (c.header != "" && resp.Header.Get(c.header) == "") {
			t.Errorf("%s: %d (headers %v) %q, want %d with %s", c.name, resp.StatusCode, resp.Header, body, c.status, c.header)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	coretest.WaitGoroutines(t, baseline)
}

// TestWebSocketTextMessage: a text message on an open connection closes
// it with amqp:decode-error, and the WebSocket with 1003 (unsupported
// data); other connections go on.
func TestWebSocketTextMessage(t *testing.T) {
	ts := newTestServer(t, nil)
	url := ts.wsURL(t)
	other := amqpOver(t, dialCoder(t, url))
	// The server answers the open before it starts the connection's
	// reader and writer: a message through it proves they run, so the
	// baseline counts them.
	roundTrip(t, other, "before")
	baseline := coretest.Goroutines()

	ws, _, err := (&websocket.Dialer{Subprotocols: []string{"AMQPWSB10"}}).Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	nc := wsconn.New(ws)
	p := &rawPeer{t: t, nc: nc, rd: frames.NewReader(nc, 1<<20)}
	p.nc.SetDeadline(time.Now().Add(10 * time.Second))
	p.open()
	if err := ws.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if e := p.expectClose(); e == nil || e.Condition != frames.CondDecodeError {
		t.Fatalf("close %+v, want amqp:decode-error", e)
	}
	for {
		if _, _, err = ws.NextReader(); err != nil {
			break
		}
	}
	if !websocket.IsCloseError(err, websocket.CloseUnsupportedData) {
		t.Errorf("WebSocket ended with %v, want close 1003", err)
	}
	ws.Close()
	roundTrip(t, other, "the other connection")
	coretest.WaitGoroutines(t, baseline)
}

// TestWebSocketLimits: a WebSocket connection counts toward
// MaxConnections, must finish the AMQP handshake within the
// authentication timeout, and is closed when idle, like a TCP one.
func TestWebSocketLimits(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		c.MaxConnections = 1
		c.AuthTimeout = 300 * time.Millisecond
		c.IdleTimeout = time.Second
	})
	url := ts.wsURL(t)
	baseline := coretest.Goroutines()

	// Upgraded, then silent: dropped at the handshake deadline.
	silent := dialGorilla(t, url, "amqp")
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, silent); err != nil {
		t.Fatalf("silent WebSocket: %v, want it closed", err)
	}

	// One TCP connection takes the only place; a WebSocket one is refused.
	tcp := ts.rawDial(t)
	tcp.open()
	ws := dialGorilla(t, url, "AMQPWSB10")
	p := &rawPeer{t: t, nc: ws, rd: frames.NewReader(ws, 1<<20)}
	p.nc.SetDeadline(time.Now().Add(10 * time.Second))
	p.open()
	if e := p.expectClose(); e == nil || e.Condition != frames.CondResourceLimitExceeded {
		t.Fatalf("WebSocket over the connection cap: close %+v, want amqp:resource-limit-exceeded", e)
	}
	ws.Close()
	tcp.nc.Close()
	waitNoConns(t, ts.srv)

	// Open, then idle: closed after IdleTimeout with the reason.
	idle := dialGorilla(t, url, "amqp")
	q := &rawPeer{t: t, nc: idle, rd: frames.NewReader(idle, 1<<20)}
	q.nc.SetDeadline(time.Now().Add(10 * time.Second))
	q.open()
	if e := q.expectClose(); e == nil || e.Condition != frames.CondResourceLimitExceeded || !strings.Contains(e.Description, "idle") {
		t.Fatalf("idle WebSocket: close %+v, want amqp:resource-limit-exceeded for idleness", e)
	}
	idle.Close()
	coretest.WaitGoroutines(t, baseline)
}

// waitNoConns waits until the server holds no connection, open or in
// the handshake, nor any refusal being answered.
func waitNoConns(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.mu.conns) + len(s.mu.refusing)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still holds %d connections", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWebSocketShutdown: Shutdown drains WebSocket connections like the
// others: the client hears amqp:connection:forced.
func TestWebSocketShutdown(t *testing.T) {
	ts := newTestServer(t, nil)
	nc := dialGorilla(t, ts.wsURL(t), "amqp")
	p := &rawPeer{t: t, nc: nc, rd: frames.NewReader(nc, 1<<20)}
	p.nc.SetDeadline(time.Now().Add(10 * time.Second))
	p.open()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- ts.srv.Shutdown(ctx)
	}()
	if e := p.expectClose(); e == nil || e.Condition != frames.CondConnectionForced {
		t.Fatalf("close %+v, want amqp:connection:forced", e)
	}
	p.writeFrame(0, &frames.Close{})
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := ts.srv.ServeConn(nc); !errors.Is(err, ErrServerClosed) {
		t.Errorf("ServeConn after Shutdown: %v, want ErrServerClosed", err)
	}
}

// wsPeer opens a WebSocket offering subprotocol and returns a raw AMQP
// peer on it, with a 10 s deadline on every read and write.
func wsPeer(t *testing.T, url, subprotocol string) *rawPeer {
	t.Helper()
	nc := dialGorilla(t, url, subprotocol)
	p := &rawPeer{t: t, nc: nc, rd: frames.NewReader(nc, 1<<20)}
	p.nc.SetDeadline(time.Now().Add(10 * time.Second))
	return p
}

// TestWebSocketPreAuthLimits: before a credential, a WebSocket connection
// has the limits of a TCP one: small frames only, PreAuthMaxLinks
// sessions, and the authentication deadline, after which it is closed
// with amqp:unauthorized-access. Nothing is left behind.
func TestWebSocketPreAuthLimits(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		c.PreAuthMaxFrameSize = 4096
		c.PreAuthMaxLinks = 2
		c.AuthTimeout = 2 * time.Second
	})
	url := ts.wsURL(t)
	baseline := coretest.Goroutines()

	big := wsPeer(t, url, "AMQPWSB10")
	big.anonymousOpen()
	big.writeFrame(0, beginFrame())
	big.readFrame()
	big.writeFrame(0, &frames.Transfer{Handle: 0, Payload: make([]byte, 5000)})
	if e := big.expectClose(); e == nil || e.Condition != frames.CondFrameSizeTooSmall {
		t.Fatalf("a 5000-byte frame before a credential: close %+v, want amqp:frame-size-too-small", e)
	}
	big.nc.Close()

	sessions := wsPeer(t, url, "amqp")
	sessions.anonymousOpen()
	for ch := range uint16(2) {
		sessions.writeFrame(ch, beginFrame())
		if _, ok := sessions.readFrame().(*frames.Begin); !ok {
			t.Fatalf("session %d not begun", ch)
		}
	}
	sessions.writeFrame(2, beginFrame())
	if e := sessions.expectClose(); e == nil || e.Condition != frames.CondResourceLimitExceeded {
		t.Fatalf("a third session before a credential: close %+v, want amqp:resource-limit-exceeded", e)
	}
	sessions.nc.Close()

	noToken := wsPeer(t, url, "AMQPWSB10")
	noToken.anonymousOpen()
	if e := noToken.expectClose(); e == nil || e.Condition != frames.CondUnauthorizedAccess {
		t.Fatalf("no credential by the deadline: close %+v, want amqp:unauthorized-access", e)
	}
	noToken.expectEOF()
	noToken.nc.Close()

	waitNoConns(t, ts.srv)
	coretest.WaitGoroutines(t, baseline)
}
