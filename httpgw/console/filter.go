package console

import (
	"errors"
	"net/http"

	"github.com/omnibusmq/omnibus/core/filter"
	"github.com/omnibusmq/omnibus/core/sas"
)

type filterRequest struct {
	Topic  string `json:"topic"` // the topic the rule is for; its token must cover it
	Filter string `json:"filter"`
	Action string `json:"action"`
}

// exprCheck is the verdict on one expression: OK, or the parser's error
// and where it is.
type exprCheck struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

type filterResponse struct {
	Filter exprCheck  `json:"filter"`
	Action *exprCheck `json:"action,omitempty"`
}

// checkFilter compiles a SQL filter and, if given, a rule action with the
// parser rules use, and answers where the first error of each is (line
// and column), so the editor can show it before the rule is saved.
// Needs Listen on the topic (reading rules needs as much).
func (h *Handler) checkFilter(w http.ResponseWriter, r *http.Request) {
	var req filterRequest
	if !readJSON(w, r, &req) {
		return
	}
	if !h.authorize(w, r, req.Topic, sas.Listen) {
		return
	}
	var out filterResponse
	_, err := filter.Compile(req.Filter)
	out.Filter = verdict(err)
	if req.Action != "" {
		_, err := filter.CompileAction(req.Action)
		v := verdict(err)
		out.Action = &v
	}
	writeJSON(w, http.StatusOK, out)
}

func verdict(err error) exprCheck {
	if err == nil {
		return exprCheck{OK: true}
	}
	var pe *filter.ParseError
	if errors.As(err, &pe) {
		return exprCheck{Error: pe.Msg, Line: pe.Line, Column: pe.Column}
	}
	return exprCheck{Error: err.Error()}
}
