package httpgw

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/omnibusmq/omnibus/httpgw/console"
)

// Stats are what the gateway has counted since it started, for metrics:
// its connections (HTTP and HTTPS together) and the Service Bus requests
// it answered, by outcome as Azure Monitor classifies them. GET /health,
// the WebSocket upgrade (whose AMQP requests the AMQP server counts) and
// the web console's requests are not counted as requests.
type Stats struct {
	ConnectionsOpened, ConnectionsClosed, ActiveConnections int64
	// Successful requests were answered below 400; UserErrors with 400 to
	// 499 (a missing or bad token included); Throttled with 503 (server
	// busy); ServerErrors with any other 5xx.
	Successful, UserErrors, ServerErrors, Throttled int64
}

// isConsoleRequest reports whether r is for the web console: its page
// (a browser's GET of /console) or anything under /console/$assets/ and
// /console/$api/, which no entity path can be (names hold no '$').
func isConsoleRequest(r *http.Request) bool {
	p := r.URL.Path
	return console.IsPageRequest(r) || strings.HasPrefix(p, console.AssetsPath) || strings.HasPrefix(p, console.APIPath)
}

type gatewayStats struct {
	opened, closed                                  atomic.Int64
	successful, userErrors, serverErrors, throttled atomic.Int64
}

// Stats returns what the gateway has counted so far.
func (g *Gateway) Stats() Stats {
	st := &g.stats
	opened, closed := st.opened.Load(), st.closed.Load()
	return Stats{ConnectionsOpened: opened, ConnectionsClosed: closed, ActiveConnections: max(opened-closed, 0),
		Successful: st.successful.Load(), UserErrors: st.userErrors.Load(),
		ServerErrors: st.serverErrors.Load(), Throttled: st.throttled.Load()}
}

// connState counts connections, then lets the connection cap see the
// change ([http.Server.ConnState]). A connection hijacked for AMQP over
// WebSockets leaves the gateway's count: the AMQP server counts it.
func (g *Gateway) connState(nc net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		g.stats.opened.Add(1)
	case http.StateClosed, http.StateHijacked:
		g.stats.closed.Add(1)
	}
	g.conns.connState(nc, state)
}

// countRequest counts a request the gateway answered with status.
func (g *Gateway) countRequest(r *http.Request, status int) {
	if p := r.URL.Path; p == "/health" || strings.EqualFold(p, webSocketPath) || isConsoleRequest(r) {
		return
	}
	st := &g.stats
	switch {
	case status < 400:
		st.successful.Add(1)
	case status == http.StatusServiceUnavailable:
		st.throttled.Add(1)
	case status >= 500:
		st.serverErrors.Add(1)
	default:
		st.userErrors.Add(1)
	}
}
