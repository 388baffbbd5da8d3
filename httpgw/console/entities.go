package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// maxPage is the most entities or sessions one call lists.
const maxPage = 500

// entityItem is one row of the namespace view.
type entityItem struct {
	Path            string     `json:"path"`
	Name            string     `json:"name"`
	Kind            string     `json:"kind"`
	Topic           string     `json:"topic,omitempty"`
	Status          string     `json:"status"`
	RequiresSession bool       `json:"requiresSession"`
	ForwardTo       string     `json:"forwardTo,omitempty"`
	Counts          countsJSON `json:"counts"`
	// Stats are cumulative counts since the broker started, when it keeps
	// them (the page turns them into rates); absent when it does not.
	Stats     *statsJSON `json:"stats,omitempty"`
	UpdatedAt time.Time  `json:"updatedAt"`
	Error     string     `json:"error,omitempty"`
}

type countsJSON struct {
	Active        int64 `json:"active"`
	DeadLetter    int64 `json:"deadLetter"`
	Scheduled     int64 `json:"scheduled"`
	Deferred      int64 `json:"deferred"`
	Total         int64 `json:"total"`
	SizeBytes     int64 `json:"sizeBytes"`
	Subscriptions int   `json:"subscriptions"`
}

type statsJSON struct {
	Incoming     int64 `json:"incoming"`
	Outgoing     int64 `json:"outgoing"`
	Completed    int64 `json:"completed"`
	DeadLettered int64 `json:"deadLettered"`
	Expired      int64 `json:"expired"`
}

type entityList struct {
	Total int          `json:"total"`
	Items []entityItem `json:"items"`
}

// listEntities answers one page of queues, topics or a topic's
// subscriptions, with their counts, optionally only those whose path
// holds the text q. Listing needs Manage, as the ATOM feeds do.
// Parameters: kind (queues, topics, subscriptions), topic (for
// subscriptions), q, skip, top (1 to 500, default 100).
func (h *Handler) listEntities(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	var kind core.EntityKind
	scope := ""
	switch qs.Get("kind") {
	case "queues", "":
		kind = core.KindQueue
	case "topics":
		kind = core.KindTopic
	case "subscriptions":
		kind = core.KindSubscription
		scope = qs.Get("topic")
		if scope == "" {
			writeJSONError(w, http.StatusBadRequest, "listing subscriptions needs the topic parameter")
			return
		}
	default:
		writeJSONError(w, http.StatusBadRequest, "kind must be queues, topics or subscriptions")
		return
	}
	if !h.authorize(w, r, scope, sas.Manage) {
		return
	}
	skip, top, ok := pageParams(w, qs.Get("skip"), qs.Get("top"), 100)
	if !ok {
		return
	}
	all, err := h.broker(r).ListEntities(kind, scope)
	if err != nil {
		h.writeCoreError(w, r, err)
		return
	}
	if needle := strings.ToLower(qs.Get("q")); needle != "" {
		kept := all[:0]
		for _, e := range all {
			if strings.Contains(strings.ToLower(e.Path()), needle) {
				kept = append(kept, e)
			}
		}
		all = kept
	}
	out := entityList{Total: len(all), Items: []entityItem{}}
	lo := min(skip, len(all))
	hi := lo + min(top, len(all)-lo) // skip+top could overflow
	for _, e := range all[lo:hi] {
		c, err := h.broker(r).Counts(e.Path())
		item := h.item(h.broker(r), e, c)
		if err != nil {
			item.Error = err.Error() // deleted meanwhile
		}
		out.Items = append(out.Items, item)
	}
	writeJSON(w, http.StatusOK, out)
}

// getEntity answers one entity's row: kind, status and counts. Needs
// Listen on it: the counts say no more than a peek does.
func (h *Handler) getEntity(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	if path == "" {
		writeJSONError(w, http.StatusBadRequest, "entity needs the path parameter")
		return
	}
	if !h.authorize(w, r, path, sas.Listen) {
		return
	}
	e, err := h.broker(r).GetEntity(path)
	if err != nil {
		h.writeCoreError(w, r, err)
		return
	}
	c, err := h.broker(r).Counts(e.Path())
	if err != nil {
		h.writeCoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.item(h.broker(r), e, c))
}

func (h *Handler) item(b *core.Broker, e *core.Entity, c core.Counts) entityItem {
	it := entityItem{
		Path: e.Path(), Name: e.Name, Kind: e.Kind.String(), Topic: e.Topic,
		Status: string(e.Status), RequiresSession: e.RequiresSession,
		ForwardTo: e.ForwardTo, UpdatedAt: e.UpdatedAt,
		Counts: countsJSON{
			Active: c.Active, DeadLetter: c.DeadLetter, Scheduled: c.Scheduled, Deferred: c.Deferred,
			Total: c.Total, SizeBytes: c.SizeBytes, Subscriptions: c.Subscriptions,
		},
	}
	if b.StatsOn() {
		if st, err := b.EntityStats(e.Path()); err == nil {
			it.Stats = &statsJSON{
				Incoming: st.Incoming, Outgoing: st.Outgoing, Completed: st.Completed,
				DeadLettered: st.DeadLettered, Expired: st.Expired,
			}
		}
	}
	return it
}

// pageParams reads skip and top, writing a 400 when they are not numbers
// in range.
func pageParams(w http.ResponseWriter, skipS, topS string, def int) (skip, top int, ok bool) {
	skip, top = 0, def
	var err error
	if skipS != "" {
		if skip, err = strconv.Atoi(skipS); err != nil || skip < 0 {
			writeJSONError(w, http.StatusBadRequest, "skip must be a number from 0")
			return 0, 0, false
		}
	}
	if topS != "" {
		if top, err = strconv.Atoi(topS); err != nil || top < 1 || top > maxPage {
			writeJSONError(w, http.StatusBadRequest, "top must be a number from 1 to "+strconv.Itoa(maxPage))
			return 0, 0, false
		}
	}
	return skip, top, true
}
