package console

import (
	"encoding/base64"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/omnibusmq/omnibus/core/sas"
)

type sessionJSON struct {
	ID          string    `json:"id"`
	Messages    int       `json:"messages"`
	StateSize   int       `json:"stateSize"`
	StateText   string    `json:"stateText,omitempty"`   // the state's first bytes, when they are UTF-8
	StateBase64 string    `json:"stateBase64,omitempty"` // otherwise
	StateSetAt  time.Time `json:"stateSetAt"`
	Locked      bool      `json:"locked"`
	LockedUntil time.Time `json:"lockedUntil"`
}

type sessionList struct {
	Total int           `json:"total"`
	Items []sessionJSON `json:"items"`
}

// sessions lists one page of the sessions of a session-enabled queue or
// subscription: their message counts, state (its first KiB) and whether a
// receiver holds them, until when. Parameters: path, after (the last id of
// the previous page), top (1 to 500, default 100). Needs Listen.
func (h *Handler) sessions(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	path := qs.Get("path")
	if path == "" {
		writeJSONError(w, http.StatusBadRequest, "listing sessions needs the path parameter")
		return
	}
	if !h.authorize(w, r, path, sas.Listen) {
		return
	}
	_, top, ok := pageParams(w, "", qs.Get("top"), 100)
	if !ok {
		return
	}
	got, total, err := h.broker(r).Sessions(path, qs.Get("after"), top)
	if err != nil {
		h.writeCoreError(w, r, err)
		return
	}
	out := sessionList{Total: total, Items: make([]sessionJSON, 0, len(got))}
	for _, s := range got {
		j := sessionJSON{
			ID: s.ID, Messages: s.Messages, StateSize: s.StateSize, StateSetAt: s.StateSetAt,
			Locked: s.Locked, LockedUntil: s.LockedUntil,
		}
		if utf8.Valid(s.StatePrefix) {
			j.StateText = string(s.StatePrefix)
		} else {
			j.StateBase64 = base64.StdEncoding.EncodeToString(s.StatePrefix)
		}
		out.Items = append(out.Items, j)
	}
	writeJSON(w, http.StatusOK, out)
}
