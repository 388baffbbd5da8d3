package httpgw

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/omnibusmq/omnibus/core"
)

// unlock handles PUT {path}/messages/{seq|messageId}/{lockToken}: abandon
// the message, so it is delivered again with its delivery count raised
// (rest.md §1.7).
func (g *Gateway) unlock(w http.ResponseWriter, r *http.Request) {
	g.settle(w, r, core.Outcome{Kind: core.Abandon})
}

// complete handles DELETE {path}/messages/{seq|messageId}/{lockToken}.
func (g *Gateway) complete(w http.ResponseWriter, r *http.Request) {
	g.settle(w, r, core.Outcome{Kind: core.Complete})
}

func (g *Gateway) settle(w http.ResponseWriter, r *http.Request, o core.Outcome) {
	path, tok, ok := g.lockTarget(w, r)
	if !ok {
		return
	}
	if err := g.broker(r).Settle(r.Context(), path, tok, o); err != nil {
		g.writeCoreError(w, r, runtimeAPI, err)
		return
	}
	writeEmptyOK(w)
}

// renew handles POST {path}/messages/{seq|messageId}/{lockToken}. The
// service's answer carries nothing; this one adds a BrokerProperties with
// the new LockedUntilUtc, which clients ignore (rest.md §1.7 REC).
func (g *Gateway) renew(w http.ResponseWriter, r *http.Request) {
	path, tok, ok := g.lockTarget(w, r)
	if !ok {
		return
	}
	until, err := g.broker(r).RenewLock(r.Context(), path, tok)
	if err != nil {
		g.writeCoreError(w, r, runtimeAPI, err)
		return
	}
	w.Header()[headerBrokerProperties] = []string{`{"LockedUntilUtc":"` + formatHTTPDate(until) + `"}`}
	writeEmptyOK(w)
}

// lockTarget reads the entity path and lock token of a settle URL. The
// {seq|messageId} segment is accepted in either form (rest.md §1.7) but
// not checked: the lock token alone names the locked message.
func (g *Gateway) lockTarget(w http.ResponseWriter, r *http.Request) (string, core.LockToken, bool) {
	v := mux.Vars(r)
	tok, err := core.ParseUUID(v["lock"])
	if err != nil {
		g.badRequest(w, r, "The lock token '%s' is not a valid GUID", v["lock"])
		return "", tok, false
	}
	return v["entity"], tok, true
}

// writeEmptyOK answers 200 with the empty body and content type the
// service records (rest.md §1.7).
func writeEmptyOK(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}
