package httpgw

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/httpgw/internal/atom"
)

// Subscription management: /{topic}/Subscriptions/{sub} and the
// /{topic}/Subscriptions listing (rest.md §4.1). A missing subscription
// is a plain 404, not the empty feed.

func subscriptionPath(r *http.Request) (topic, sub, path string) {
	v := mux.Vars(r)
	return v["topic"], v["sub"], v["topic"] + "/Subscriptions/" + v["sub"]
}

// getSubscription answers GET /{topic}/Subscriptions/{sub}.
func (g *Gateway) getSubscription(w http.ResponseWriter, r *http.Request) {
	_, _, path := subscriptionPath(r)
	e, err := g.broker(r).GetEntity(path)
	if err == nil {
		var entry atom.Entry
		if entry, err = g.entityEntry(r, e); err == nil {
			g.writeEntry(w, r, http.StatusOK, entry)
			return
		}
	}
	g.writeCoreError(w, r, managementAPI, err)
}

// putSubscription creates (201) or, with If-Match, updates (200) a
// subscription. Its DefaultRuleDescription, if any, becomes its first
// rule instead of $Default.
func (g *Gateway) putSubscription(w http.ResponseWriter, r *http.Request) {
	topic, sub, _ := subscriptionPath(r)
	desc, ok := g.readDescription(w, r)
	if !ok {
		return
	}
	d, isSub := desc.(*atom.SubscriptionDescription)
	if !isSub {
		g.badRequest(w, r, "The request body holds a %T; a subscription path takes a SubscriptionDescription", desc)
		return
	}
	ent, err := subscriptionEntity(topic, sub, d)
	if err != nil {
		g.badRequest(w, r, "DefaultRuleDescription: %v", err)
		return
	}
	if isUpdate(r) {
		ent.Rules = nil // rules change through …/Rules, not here
	}
	got, err := g.saveEntity(r, ent)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	entry, err := g.entityEntry(r, got)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	g.writeEntry(w, r, createdOrOK(r), entry)
}

// deleteSubscription answers DELETE /{topic}/Subscriptions/{sub}.
func (g *Gateway) deleteSubscription(w http.ResponseWriter, r *http.Request) {
	_, _, path := subscriptionPath(r)
	if err := g.broker(r).DeleteEntity(r.Context(), path); err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	writeEmptyOK(w)
}

// listSubscriptions answers GET /{topic}/Subscriptions, paged; 404 when
// the topic does not exist.
func (g *Gateway) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	topic := mux.Vars(r)["topic"]
	p, err := readPage(r.URL.Query())
	if err != nil {
		g.badRequest(w, r, "%v", err)
		return
	}
	all, err := g.broker(r).ListEntities(core.KindSubscription, topic)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	lo, hi, more := p.window(len(all))
	path := topic + "/Subscriptions"
	f := atom.Feed{ID: entityURL(r, path), Title: "Subscriptions", Updated: g.now()}
	if more {
		f.Next = nextURL(r, path, p, hi)
	}
	for _, e := range all[lo:hi] {
		entry, err := g.entityEntry(r, e)
		if core.CodeOf(err) == core.CodeNotFound {
			continue
		}
		if err != nil {
			g.writeCoreError(w, r, managementAPI, err)
			return
		}
		f.Entries = append(f.Entries, entry)
	}
	g.writeFeed(w, r, f)
}
