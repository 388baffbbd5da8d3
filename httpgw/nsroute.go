package httpgw

import (
	"context"
	"net/http"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Which namespace a request is for (core/namespace): its Host, when the
// first label names a namespace (sales.localhost:5300); else its token's
// key name ("rule@sales", "sales", a rule only sales has) or audience host;
// else the default namespace. When two of these name different namespaces
// the request is refused with 401, as a token for another namespace is on
// Service Bus.

type nsKey struct{}

// withNamespace returns r carrying ns.
func withNamespace(r *http.Request, ns *namespace.Namespace) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), nsKey{}, ns))
}

// nsOf returns the namespace of an authorized request, the default one
// for a request that was not authorized (health, a 404).
func (g *Gateway) nsOf(r *http.Request) *namespace.Namespace {
	if ns, ok := r.Context().Value(nsKey{}).(*namespace.Namespace); ok {
		return ns
	}
	return g.reg.Default()
}

// broker returns the broker of r's namespace.
func (g *Gateway) broker(r *http.Request) *core.Broker { return g.nsOf(r).Broker() }

// nsName returns the name of r's namespace, reported in management
// responses and error trackers.
func (g *Gateway) nsName(r *http.Request) string { return g.nsOf(r).Name() }

// requestNamespace returns the namespace r is for, given its token.
func (g *Gateway) requestNamespace(r *http.Request, token string) (*namespace.Namespace, error) {
	t, err := sas.Parse(token)
	if err != nil {
		ns, _ := g.reg.ForHost(r.Host) // the token check reports the token
		return ns, nil
	}
	ns, _, err := g.reg.Resolve(r.Host, t.KeyName, t.Host())
	return ns, err
}
