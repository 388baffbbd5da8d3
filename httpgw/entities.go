package httpgw

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/httpgw/internal/atom"
)

// Queue and topic management: GET, PUT (create, or update with
// If-Match), DELETE on /{path}, and the $Resources listings (rest.md §4.1).

// getEntity answers GET /{path}: the queue or topic entry with its runtime
// counts, or the empty "Publicly Listed Services" feed when nothing is
// there.
func (g *Gateway) getEntity(w http.ResponseWriter, r *http.Request) {
	path := mux.Vars(r)["entity"]
	e, err := g.broker(r).GetEntity(path)
	if core.CodeOf(err) == core.CodeNotFound || (err == nil && e.Kind == core.KindSubscription) {
		g.writeNotFoundFeed(w, r)
		return
	}
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	entry, err := g.entityEntry(r, e)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	g.writeEntry(w, r, http.StatusOK, entry)
}

// putEntity answers PUT /{path} with a QueueDescription or
// TopicDescription: create (201, 409 if taken) or, with If-Match, update
// (200, 404 if missing).
func (g *Gateway) putEntity(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(mux.Vars(r)["entity"], "/")
	desc, ok := g.readDescription(w, r)
	if !ok {
		return
	}
	var ent core.Entity
	var rules []atom.AuthorizationRule
	switch d := desc.(type) {
	case *atom.QueueDescription:
		ent, rules = queueEntity(path, d), d.AuthorizationRules
	case *atom.TopicDescription:
		ent, rules = topicEntity(path, d), d.AuthorizationRules
	default:
		g.badRequest(w, r, "The request body holds a %T; a queue or topic path takes a QueueDescription or TopicDescription", desc)
		return
	}
	var err error
	if ent.AuthorizationRules, err = coreAuthorizationRules(rules); err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
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

// saveEntity creates ent or, with If-Match, updates it, once it passes
// Service Bus's rules with every property the ATOM description carries
// counted as given (see atomGiven).
func (g *Gateway) saveEntity(r *http.Request, ent core.Entity) (*core.Entity, error) {
	check := ent
	if err := check.ValidateGiven(atomGiven[ent.Kind]...); err != nil {
		return nil, err
	}
	if isUpdate(r) {
		return g.broker(r).UpdateEntity(r.Context(), ent)
	}
	return g.broker(r).CreateEntity(r.Context(), ent)
}

// deleteEntity answers DELETE /{path}: 200, or 404 when nothing is there.
func (g *Gateway) deleteEntity(w http.ResponseWriter, r *http.Request) {
	path := mux.Vars(r)["entity"]
	if err := g.broker(r).DeleteEntity(r.Context(), path); err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	writeEmptyOK(w)
}

// listEntities answers GET /$Resources/Queues and /$Resources/Topics,
// paged by $skip and $top.
func (g *Gateway) listEntities(w http.ResponseWriter, r *http.Request) {
	kind, title := core.KindQueue, "Queues"
	if strings.EqualFold(mux.Vars(r)["kind"], "topics") {
		kind, title = core.KindTopic, "Topics"
	}
	p, err := readPage(r.URL.Query())
	if err != nil {
		g.badRequest(w, r, "%v", err)
		return
	}
	all, err := g.broker(r).ListEntities(kind, "")
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	lo, hi, more := p.window(len(all))
	path := "$Resources/" + title
	f := atom.Feed{ID: entityURL(r, path), Title: title, Updated: g.now()}
	if more {
		f.Next = nextURL(r, path, p, hi)
	}
	for _, e := range all[lo:hi] {
		entry, err := g.entityEntry(r, e)
		if core.CodeOf(err) == core.CodeNotFound {
			continue // deleted while listing
		}
		if err != nil {
			g.writeCoreError(w, r, managementAPI, err)
			return
		}
		f.Entries = append(f.Entries, entry)
	}
	g.writeFeed(w, r, f)
}

// entityEntry builds the entry of a queue, topic or subscription with its
// current counts.
func (g *Gateway) entityEntry(r *http.Request, e *core.Entity) (atom.Entry, error) {
	c, err := g.broker(r).Counts(e.Path())
	if err != nil {
		return atom.Entry{}, err
	}
	entry := atom.Entry{ID: entityURL(r, e.Path()), Title: e.Name, Published: e.CreatedAt, Updated: e.UpdatedAt}
	switch e.Kind {
	case core.KindQueue:
		entry.Author = g.nsName(r)
		entry.Content = queueDescription(e, c)
	case core.KindTopic:
		entry.Author = g.nsName(r)
		sqlN, corrN := g.filterCounts(r, e.Name)
		entry.Content = topicDescription(e, c, sqlN, corrN)
	case core.KindSubscription:
		entry.Content = subscriptionDescription(e, c)
	}
	return entry, nil
}

// filterCounts counts the SQL (including true/false) and correlation
// filters of a topic's subscriptions (TopicDescription SqlFilterCount and
// CorrelationFilterCount).
func (g *Gateway) filterCounts(r *http.Request, topic string) (sqlN, corrN int32) {
	subs, err := g.broker(r).ListEntities(core.KindSubscription, topic)
	if err != nil {
		return 0, 0
	}
	for _, s := range subs {
		for _, rule := range s.Rules {
			if rule.Filter.Kind == core.FilterCorrelation {
				corrN++
			} else {
				sqlN++
			}
		}
	}
	return sqlN, corrN
}

// namespaceInfo answers GET /$namespaceinfo.
func (g *Gateway) namespaceInfo(w http.ResponseWriter, r *http.Request) {
	created := g.nsOf(r).Created()
	if created.IsZero() {
		created = g.started
	}
	g.writeEntry(w, r, http.StatusOK, atom.Entry{
		ID: entityURL(r, "$namespaceinfo"), Title: g.nsName(r), Updated: created, Author: g.nsName(r),
		Content: &atom.NamespaceInfo{
			CreatedTime: created, ModifiedTime: created, Name: g.nsName(r), MessagingSKU: "Standard",
		},
	})
}
