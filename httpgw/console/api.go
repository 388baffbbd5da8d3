package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
)

// maxAPIBody bounds the body of an API call: the largest is a resubmit
// listing sequence numbers.
const maxAPIBody = 256 << 10

// apiRoutes lists the API's endpoints. Each says the SAS right it needs
// through h.call; only login takes no token.
func (h *Handler) apiRoutes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST "+APIPath+"login", h.guard(h.login))
	m.HandleFunc("GET "+APIPath+"entities", h.guard(h.listEntities))
	m.HandleFunc("GET "+APIPath+"entity", h.guard(h.getEntity))
	m.HandleFunc("GET "+APIPath+"messages", h.guard(h.peek))
	m.HandleFunc("POST "+APIPath+"settle", h.guard(h.settle))
	m.HandleFunc("POST "+APIPath+"resubmit", h.guard(h.resubmit))
	m.HandleFunc("POST "+APIPath+"purge", h.guard(h.purge))
	m.HandleFunc("GET "+APIPath+"sessions", h.guard(h.sessions))
	m.HandleFunc("POST "+APIPath+"filter", h.guard(h.checkFilter))
	m.HandleFunc("GET "+APIPath+"namespaces", h.guard(h.listNamespaces))
	m.HandleFunc("POST "+APIPath+"namespaces/switch", h.guard(h.switchNamespace))
	m.HandleFunc(APIPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, "no such console API call: "+r.Method+" "+r.URL.Path)
	})
	return m
}

// guard refuses what a page of another origin could make a browser send:
// a request whose Origin (or Sec-Fetch-Site) says it comes from another
// site, and a POST whose body is not JSON (an HTML form cannot send
// application/json). Authentication itself is a SAS token in the
// Authorization header, which a browser never attaches on its own, so a
// forged request carries no credentials either way.
func (h *Handler) guard(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			writeJSONError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		if r.Method == http.MethodPost {
			mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if mt != "application/json" {
				writeJSONError(w, http.StatusUnsupportedMediaType, "the console API takes application/json")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxAPIBody)
		}
		w.Header().Set("Cache-Control", "no-store")
		next(w, r)
	}
}

// sameOrigin reports whether r comes from the console's own page (or
// from a client that is no browser: no Origin at all).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && strings.EqualFold(u.Host, r.Host)
}

// authorize checks the call's token for the entity at path (""
// for the namespace) and the rights need, writing the 401 when it fails.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, path string, need sas.Rights) bool {
	token := r.Header.Get("Authorization")
	if strings.TrimSpace(token) == "" {
		writeJSONError(w, http.StatusUnauthorized, "log in: the console API needs a SAS token in the Authorization header")
		return false
	}
	ns, err := h.namespaceOf(r)
	if err == nil {
		_, err = ns.Validate(token, path, need)
	}
	if err != nil {
		writeAuthError(w, err)
		return false
	}
	return true
}

// namespaceOf returns the namespace a call is for: the one its token
// (and Host) names, as for the gateway's requests.
func (h *Handler) namespaceOf(r *http.Request) (*namespace.Namespace, error) {
	t, err := sas.Parse(r.Header.Get("Authorization"))
	if err != nil {
		ns, _ := h.reg.ForHost(r.Host)
		return ns, nil
	}
	ns, _, err := h.reg.Resolve(r.Host, t.KeyName, t.Host())
	return ns, err
}

// broker returns the broker of the namespace of an authorized call.
func (h *Handler) broker(r *http.Request) *core.Broker {
	ns, err := h.namespaceOf(r)
	if err != nil {
		return h.reg.Default().Broker()
	}
	return ns.Broker()
}

// readJSON decodes the call's body into v, writing a 400 when it cannot.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	d := json.NewDecoder(r.Body)
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a console API request body may hold at most %d bytes", maxAPIBody))
			return false
		}
		writeJSONError(w, http.StatusBadRequest, "malformed request body: "+err.Error())
		return false
	}
	if _, err := d.Token(); err != io.EOF {
		writeJSONError(w, http.StatusBadRequest, "malformed request body: more than one JSON value")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type apiError struct {
	Error string `json:"error"`
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Error: msg})
}

// coreStatus maps a core error to an HTTP status, as the REST API
// reports the same errors (httpgw/errors.go).
var coreStatus = map[core.Code]int{
	core.CodeNotFound:          http.StatusNotFound,
	core.CodeLockLost:          http.StatusNotFound,
	core.CodeSessionLockLost:   http.StatusNotFound,
	core.CodeSessionCannotLock: http.StatusConflict,
	core.CodeTimeout:           http.StatusRequestTimeout,
	core.CodeEntityExists:      http.StatusConflict,
	core.CodeMessageNotFound:   http.StatusNotFound,
	core.CodeMessageTooLarge:   http.StatusRequestEntityTooLarge,
	core.CodeQuotaExceeded:     http.StatusForbidden,
	core.CodeBadRequest:        http.StatusBadRequest,
	core.CodeEntityDisabled:    http.StatusForbidden,
	core.CodeRuleNotFound:      http.StatusNotFound,
	core.CodeConflict:          http.StatusConflict,
	core.CodeServerBusy:        http.StatusServiceUnavailable,
}

func (h *Handler) writeCoreError(w http.ResponseWriter, r *http.Request, err error) {
	status, ok := coreStatus[core.CodeOf(err)]
	if !ok {
		status = http.StatusInternalServerError
		h.log.Error("console API call failed", zap.String("path", r.URL.Path), zap.Error(err))
	}
	writeJSONError(w, status, err.Error())
}
