package httpgw

import (
	"net/http"
	"strings"
)

// webSocketPath is where Service Bus serves AMQP over WebSockets
// (amqpserver.WebSocketPath; httpgw does not import amqpserver).
const webSocketPath = "/$servicebus/websocket"

// webSocket is the handler of webSocketPath: Config.WebSocket, or a 404
// when there is none.
func (g *Gateway) webSocket() http.Handler {
	if g.cfg.WebSocket != nil {
		return g.cfg.WebSocket
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.writeError(w, r, http.StatusNotFound, "AMQP over WebSockets is not served here.")
	})
}

// webSocketElsewhere answers 404 to a WebSocket upgrade of any path but
// webSocketPath, naming the path that takes one: it is a client pointed
// at the wrong place, not an entity request.
func (g *Gateway) webSocketElsewhere(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != webSocketPath && strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "websocket") {
			g.writeError(w, r, http.StatusNotFound, "No WebSocket endpoint at "+r.URL.Path+": AMQP over WebSockets is at "+webSocketPath+".")
			return
		}
		next.ServeHTTP(w, r)
	})
}
