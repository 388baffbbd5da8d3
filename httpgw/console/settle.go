package console

import (
	"net/http"
	"strings"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// settleRequest settles a message the page locked through the REST API
// (POST …/messages/head): the REST API completes and abandons, but has no
// dead-letter or defer, so the page settles through here.
type settleRequest struct {
	Path        string `json:"path"`
	LockToken   string `json:"lockToken"`
	Outcome     string `json:"outcome"` // complete, abandon, deadletter, defer
	Reason      string `json:"reason"`
	Description string `json:"description"`
}

// settle applies an outcome to a locked message. Needs Listen.
func (h *Handler) settle(w http.ResponseWriter, r *http.Request) {
	var req settleRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Path == "" {
		writeJSONError(w, http.StatusBadRequest, "settle needs a path")
		return
	}
	if !h.authorize(w, r, req.Path, sas.Listen) {
		return
	}
	tok, err := core.ParseUUID(req.LockToken)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "lockToken is not a lock token: "+err.Error())
		return
	}
	var o core.Outcome
	switch strings.ToLower(req.Outcome) {
	case "complete":
		o.Kind = core.Complete
	case "abandon":
		o.Kind = core.Abandon
	case "deadletter":
		o.Kind = core.DeadLetter
		o.DeadLetterReason = req.Reason
		o.DeadLetterDescription = req.Description
	case "defer":
		o.Kind = core.Defer
	default:
		writeJSONError(w, http.StatusBadRequest, "outcome must be complete, abandon, deadletter or defer")
		return
	}
	if err := h.broker(r).Settle(r.Context(), req.Path, tok, o); err != nil {
		h.writeCoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Settled string `json:"settled"`
	}{req.Outcome})
}
