package amqpserver

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/amqpserver/wsconn"
)

// AMQP over WebSockets (amqp-wsb-v1.0, and what Service Bus serves at
// wss://<namespace>/$servicebus/websocket): an HTTP server upgrades the
// request, and the WebSocket's binary messages carry the AMQP stream,
// split and joined at any boundary (package wsconn). From then on the
// connection is served like a socket from a listener (ServeConn): the
// same admission, caps, pre-authentication limits and timeouts.

// WebSocketPath is where Service Bus, and so every SDK, opens AMQP over
// WebSockets.
const WebSocketPath = "/$servicebus/websocket"

// WebSocket subprotocols of AMQP: the binding's name, which Java,
// JavaScript and Python send, and "amqp", which .NET and Go send. One of
// them must be offered.
var wsSubprotocols = []string{"AMQPWSB10", "amqp"}

// ServeConn serves nc, a connection accepted elsewhere (a WebSocket an
// HTTP server upgraded), exactly like a socket accepted from a listener:
// it is admitted or refused by the same rules (Config.Admit,
// MaxConnections, MaxPendingConnections) and then has the same handshake
// deadline, pre-authentication limits, authentication timeout and idle
// timeout. It returns at once; the connection is closed when it ends, and
// [Server.Shutdown] drains it with the others. After Shutdown it closes
// nc and returns [ErrServerClosed].
func (s *Server) ServeConn(nc net.Conn) error {
	if s.shuttingDown() || !s.admit(nc) {
		nc.Close()
		return ErrServerClosed
	}
	return nil
}

// WebSocketHandler returns the HTTP handler of AMQP over WebSockets, for
// an HTTP server to route [WebSocketPath] to. It answers 426 Upgrade
// Required to a request that is not a WebSocket upgrade (or asks for a
// version other than 13), 405 to one that is not a GET, 400 to one that
// offers neither AMQP subprotocol, 403 to one whose Origin (other than
// the request's own) [Config.CheckOrigin] refuses, and 503 once the
// server is shutting down; otherwise it upgrades and serves the
// connection ([Server.ServeConn]). Without CheckOrigin any origin is
// accepted, as Service Bus does: clients authenticate with tokens, never
// with cookies, so only a page holding a credential can use it.
func (s *Server) WebSocketHandler() http.Handler {
	up := &websocket.Upgrader{
		Subprotocols:    wsSubprotocols,
		CheckOrigin:     func(*http.Request) bool { return true }, // checkUpgrade has judged it
		ReadBufferSize:  32 << 10,
		WriteBufferSize: 32 << 10,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status, why := s.checkUpgrade(w, r); status != 0 {
			s.log.Debug("WebSocket upgrade refused", zap.String("remote", r.RemoteAddr), zap.Int("status", status), zap.String("reason", why))
			http.Error(w, why, status)
			return
		}
		ws, err := up.Upgrade(hijacker{w}, r, nil)
		if err != nil {
			s.log.Debug("WebSocket upgrade failed", zap.String("remote", r.RemoteAddr), zap.Error(err))
			return
		}
		s.log.Debug("AMQP over WebSocket", zap.String("remote", r.RemoteAddr), zap.String("subprotocol", ws.Subprotocol()))
		_ = s.ServeConn(hostConn{wsconn.New(ws), r.Host})
	})
}

// hostConn is a WebSocket's connection with the Host its upgrade named,
// which may name the connection's namespace (namespace.go).
type hostConn struct {
	*wsconn.Conn
	host string
}

// Host returns the Host header of the upgrade.
func (c hostConn) Host() string { return c.host }

// checkUpgrade returns the status and reason to refuse r with, or 0.
func (s *Server) checkUpgrade(w http.ResponseWriter, r *http.Request) (int, string) {
	switch {
	case !headerHas(r.Header, "Connection", "upgrade") || !headerHas(r.Header, "Upgrade", "websocket"):
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Sec-WebSocket-Version", "13")
		return http.StatusUpgradeRequired, "AMQP over WebSockets: this path takes a WebSocket upgrade (Connection: Upgrade, Upgrade: websocket)."
	case r.Method != http.MethodGet:
		w.Header().Set("Allow", http.MethodGet)
		return http.StatusMethodNotAllowed, "AMQP over WebSockets: a WebSocket upgrade is a GET."
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Sec-WebSocket-Version", "13")
		return http.StatusUpgradeRequired, "AMQP over WebSockets: only WebSocket version 13 is served."
	case !slices.ContainsFunc(websocket.Subprotocols(r), func(p string) bool { return slices.Contains(wsSubprotocols, p) }):
		return http.StatusBadRequest, "AMQP over WebSockets: offer the WebSocket subprotocol AMQPWSB10 or amqp (Sec-WebSocket-Protocol)."
	}
	if origin := r.Header.Get("Origin"); origin != "" && s.cfg.CheckOrigin != nil && !sameOrigin(r, origin) {
		if err := s.cfg.CheckOrigin(origin); err != nil {
			return http.StatusForbidden, err.Error()
		}
	}
	if s.shuttingDown() {
		return http.StatusServiceUnavailable, "The server is shutting down."
	}
	return 0, ""
}

// sameOrigin reports whether origin is r's own: the scheme r came in on
// and the host and port it names. Such an upgrade is not a foreign page's:
// the Python SDK's WebSocket client (websocket-client) sends the URL it
// dials as its Origin, and a page of the server's own origin is its own.
// A page whose name was made to resolve here (DNS rebinding) names itself
// in Host as well, which the HTTP server's host check refuses first.
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if !strings.EqualFold(u.Scheme, scheme) {
		return false
	}
	return strings.EqualFold(hostPort(u.Host, scheme), hostPort(r.Host, scheme))
}

// hostPort returns host (host or host:port) with the scheme's default
// port made explicit.
func hostPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(host, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}

// headerHas reports whether a comma-separated header of h lists token,
// ignoring case.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// hijacker lets the upgrade take the connection through response writers
// that wrap the server's (an HTTP gateway's middleware) and expose it
// only to http.ResponseController, by an Unwrap method.
type hijacker struct{ http.ResponseWriter }

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}
