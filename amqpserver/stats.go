package amqpserver

import (
	"errors"
	"sync/atomic"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Stats are what the server has counted since it started, for metrics:
// connections and requests, the way Azure Monitor counts them for a
// Service Bus namespace. A request is a send (one transfer, a batch
// included), a settlement, a $management request or a $cbs put-token.
type Stats struct {
	// ConnectionsOpened counts connections that got past the AMQP open
	// handshake, ConnectionsClosed those of them that ended;
	// ActiveConnections is how many are open now.
	ConnectionsOpened, ConnectionsClosed, ActiveConnections int64
	Requests                                                RequestStats
}

// RequestStats classify requests by their outcome.
type RequestStats struct {
	Successful int64
	// UserErrors are requests refused for what the client asked (not
	// found, lock lost, unauthorized, bad request, quota): Service Bus's
	// user errors.
	UserErrors int64
	// ServerErrors are requests that failed inside the broker.
	ServerErrors int64
	// Throttled are requests refused as server busy (a full disk, a store
	// that refuses writes), which clients retry.
	Throttled int64
}

// serverStats is the live form of Stats, beside Server.mu's open count.
type serverStats struct {
	opened, closed                                  atomic.Int64
	successful, userErrors, serverErrors, throttled atomic.Int64
}

// Stats returns what the server has counted so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	open := s.mu.open
	s.mu.Unlock()
	st := &s.stats
	return Stats{
		ConnectionsOpened: st.opened.Load(), ConnectionsClosed: st.closed.Load(), ActiveConnections: int64(open),
		Requests: RequestStats{Successful: st.successful.Load(), UserErrors: st.userErrors.Load(),
			ServerErrors: st.serverErrors.Load(), Throttled: st.throttled.Load()},
	}
}

// request counts n requests that ended with err (nil: success).
func (st *serverStats) request(err error, n int) {
	if n <= 0 {
		return
	}
	switch {
	case err == nil:
		st.successful.Add(int64(n))
	case isSASError(err):
		st.userErrors.Add(int64(n))
	case core.CodeOf(err) == core.CodeServerBusy:
		st.throttled.Add(int64(n))
	case core.CodeOf(err) == core.CodeInternal:
		st.serverErrors.Add(int64(n))
	default:
		st.userErrors.Add(int64(n))
	}
}

// requests counts one request per entry of errs, each ended with its
// error (nil: success); the successes with one addition.
func (st *serverStats) requests(errs []error) {
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			st.request(err, 1)
		}
	}
	st.request(nil, ok)
}

// status counts a request answered with a $management or $cbs status code.
func (st *serverStats) status(code int32) {
	switch {
	case code < 400:
		st.successful.Add(1)
	case code == 503:
		st.throttled.Add(1)
	case code >= 500:
		st.serverErrors.Add(1)
	default:
		st.userErrors.Add(1)
	}
}

// isSASError reports whether err is a [sas.Error]. errors.AsType keeps
// request free of the allocation errors.As's target cost on every call.
func isSASError(err error) bool {
	_, ok := errors.AsType[*sas.Error](err)
	return ok
}
