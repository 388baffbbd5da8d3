package httpgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
)

// api says which half of the gateway an error comes from: the runtime and
// management APIs report a missing entity differently (rest.md §0.2, §0.3).
type api uint8

const (
	runtimeAPI api = iota
	managementAPI
)

// statusEntry is how one core.Code is reported over HTTP.
type statusEntry struct {
	runtime    int    // status on the runtime (messaging) API
	management int    // status on the management (ATOM) API
	subCode    string // Service Bus sub-code text put before the detail, if any
}

// statusTable is the one mapping from core error codes to HTTP (rest.md §5,
// decisions.md "Errors"). Unknown codes are 500.
var statusTable = map[core.Code]statusEntry{
	core.CodeInternal:          {http.StatusInternalServerError, http.StatusInternalServerError, "SubCode=50000. "},
	core.CodeNotFound:          {http.StatusGone, http.StatusNotFound, ""},
	core.CodeLockLost:          {http.StatusNotFound, http.StatusNotFound, ""},
	core.CodeSessionLockLost:   {http.StatusNotFound, http.StatusNotFound, ""},
	core.CodeSessionCannotLock: {http.StatusConflict, http.StatusConflict, ""},
	core.CodeTimeout:           {http.StatusRequestTimeout, http.StatusRequestTimeout, ""},
	core.CodeEntityExists:      {http.StatusConflict, http.StatusConflict, "SubCode=40900. "},
	core.CodeMessageNotFound:   {http.StatusNotFound, http.StatusNotFound, ""},
	core.CodeMessageTooLarge:   {http.StatusForbidden, http.StatusForbidden, ""},
	core.CodeQuotaExceeded:     {http.StatusForbidden, http.StatusForbidden, ""},
	core.CodeBadRequest:        {http.StatusBadRequest, http.StatusBadRequest, "SubCode=40000. "},
	core.CodeEntityDisabled:    {http.StatusForbidden, http.StatusForbidden, "SubCode=40301. "},
	core.CodeRuleNotFound:      {http.StatusNotFound, http.StatusNotFound, ""},
	core.CodeConflict:          {http.StatusConflict, http.StatusConflict, "SubCode=40901. "},
	core.CodeServerBusy:        {http.StatusServiceUnavailable, http.StatusServiceUnavailable, "SubCode=50004. "},
}

// statusOf returns the HTTP status and sub-code prefix for err.
func statusOf(err error, a api) (int, string) {
	e, ok := statusTable[core.CodeOf(err)]
	if !ok {
		return http.StatusInternalServerError, "SubCode=50000. "
	}
	if a == managementAPI {
		return e.management, e.subCode
	}
	return e.runtime, e.subCode
}

// errorDetail is the text of a core error without the "core: " prefix the
// Go error string carries.
func errorDetail(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) && ce.Msg != "" {
		return ce.Msg
	}
	if errors.As(err, &ce) {
		return ce.Code.String()
	}
	return "The service was unable to process the request; please retry the operation."
}

// writeCoreError reports a core error. A cancelled request context (the
// client went away) gets no answer.
func (g *Gateway) writeCoreError(w http.ResponseWriter, r *http.Request, a api, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	status, sub := statusOf(err, a)
	if status >= 500 {
		g.log.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	}
	g.writeError(w, r, status, sub+errorDetail(err))
}

// badRequest reports a malformed request (400).
func (g *Gateway) badRequest(w http.ResponseWriter, r *http.Request, format string, args ...any) {
	g.writeError(w, r, http.StatusBadRequest, fmt.Sprintf(format, args...))
}

// writeError writes the Service Bus error body (rest.md §5):
// <Error><Code>status</Code><Detail>text TrackingId:…, SystemTracker:…, Timestamp:…</Detail></Error>
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, status int, detail string) {
	detail = strings.TrimSpace(detail)
	if detail != "" && !strings.HasSuffix(detail, ".") {
		detail += "."
	}
	tracker := g.nsName(r) + ":" + strings.Trim(r.URL.Path, "/")
	full := fmt.Sprintf("%s TrackingId:%s, SystemTracker:%s, Timestamp:%s",
		detail, core.NewUUID(), tracker, time.Unix(0, g.broker(r).Now()).UTC().Format("2006-01-02T15:04:05"))
	var b strings.Builder
	b.WriteString("<Error><Code>")
	fmt.Fprint(&b, status)
	b.WriteString("</Code><Detail>")
	b.WriteString(textEscaper.Replace(full))
	b.WriteString("</Detail></Error>")
	h := w.Header()
	h.Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// textEscaper escapes XML character data. Quotes stay literal, as in the
// service's bodies ("'Send' claim(s) are required").
var textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// notFound answers paths no route matches.
func (g *Gateway) notFound(w http.ResponseWriter, r *http.Request) {
	g.writeError(w, r, http.StatusNotFound, "No service is hosted at the specified address")
}

// methodNotAllowed answers a known path with a method it does not take.
func (g *Gateway) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	g.writeError(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("The method %s is not allowed on this address", r.Method))
}
