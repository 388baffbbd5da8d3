package httpgw

import (
	"errors"
	"net/http"
	"strings"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Headers a SAS token may arrive in. The SDKs use Authorization; some
// send ServiceBusAuthorization (rest.md §3).
const (
	headerAuthorization   = "Authorization"
	headerSBAuthorization = "ServiceBusAuthorization"
)

// send, listen and manage wrap a handler with the SAS check for the right
// the operation needs (rest.md §3.2).
func (g *Gateway) send(h http.HandlerFunc) http.Handler   { return g.authorize(sas.Send, h) }
func (g *Gateway) listen(h http.HandlerFunc) http.Handler { return g.authorize(sas.Listen, h) }
func (g *Gateway) manage(h http.HandlerFunc) http.Handler { return g.authorize(sas.Manage, h) }

// authorize finds the request's namespace (nsroute.go) and checks the
// request's token against the request path and the namespace's rules
// before calling h with the namespace in the request's context. The whole
// path is the resource: a token scoped to a queue covers its
// …/messages/head and …/$DeadLetterQueue paths, one scoped to a topic
// covers its subscriptions, and the Go admin client's tokens, signed over
// the full request URL, cover exactly what they were made for.
func (g *Gateway) authorize(need sas.Rights, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := requestToken(r)
		ns, err := g.requestNamespace(r, token)
		if err == nil {
			_, err = ns.Validate(token, r.URL.Path, need)
		}
		if err != nil {
			g.unauthorized(w, r, err)
			return
		}
		h(w, withNamespace(r, ns))
	})
}

// requestToken returns the token the request carries, from Authorization
// or else ServiceBusAuthorization.
func requestToken(r *http.Request) string {
	if t := r.Header.Get(headerAuthorization); strings.TrimSpace(t) != "" {
		return t
	}
	return r.Header.Get(headerSBAuthorization)
}

// unauthorized writes the 401 body Service Bus sends (rest.md §3.3):
// "{Reason}: {detail}", e.g. "ExpiredToken: The token is expired. …".
// A token that could not be checked now (a cluster's group or meta group
// holding the rules has no reachable leader: core.ErrServerBusy) gets
// 503 instead, which the SDKs retry; a 401 they take as final.
func (g *Gateway) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, core.ErrServerBusy) {
		g.writeCoreError(w, r, runtimeAPI, err)
		return
	}
	var se *sas.Error
	if !errors.As(err, &se) {
		g.writeError(w, r, http.StatusUnauthorized, "Unauthorized: "+err.Error())
		return
	}
	detail := se.Detail
	if !errors.Is(se, sas.ErrInsufficientRights) {
		detail = se.Reason() + ": " + detail
	}
	g.writeError(w, r, http.StatusUnauthorized, detail)
}
