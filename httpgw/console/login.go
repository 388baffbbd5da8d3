package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// loginRequest is what the login form sends: a key name and key, or a
// SAS token made elsewhere.
type loginRequest struct {
	KeyName string `json:"keyName"`
	Key     string `json:"key"`
	Token   string `json:"token"`
}

// loginResponse hands the page the token it then sends with every call,
// to this API and to the gateway's REST and ATOM endpoints alike.
type loginResponse struct {
	Token     string    `json:"token"`
	KeyName   string    `json:"keyName"`
	Rights    string    `json:"rights"`
	Scope     string    `json:"scope"` // "" for the namespace
	Namespace string    `json:"namespace"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// login checks a key (or a pasted token) and answers with a token. From a
// key it signs a namespace-wide token lasting the session TTL, so the key
// itself never stays in the browser; a pasted token is checked and handed
// back as it is. Either way the token, not a cookie, is the session: it
// travels in the Authorization header, where another site's page cannot
// make a browser put it.
//
// Logins are throttled per client address (throttle.go): after a few
// failures in a row, a client's logins are refused with 429 and a
// Retry-After, unheard, for a wait that doubles with each failure, so the
// right key does not get in during it either.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Token == "" && (req.KeyName == "" || req.Key == "") {
		writeJSONError(w, http.StatusBadRequest, "give a key name and key, or a SAS token")
		return
	}
	if wait := h.logins.admit(r.RemoteAddr); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeJSONError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"too many failed logins from this address: try again in %d s (each further failure doubles the wait, up to %s)",
			secs, loginBackoffMax))
		return
	}
	if req.Token != "" {
		h.loginToken(w, r, req.Token)
		return
	}
	ns, _, err := h.reg.Resolve(r.Host, req.KeyName, "")
	var rule sas.Rule
	if err == nil {
		rule, err = ns.Authenticate(req.KeyName, req.Key)
	}
	if err != nil {
		writeAuthError(w, err)
		return
	}
	h.logins.succeeded(r.RemoteAddr)
	exp := time.Now().Add(h.ttl).Truncate(time.Second)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	token := sas.Sign(scheme+"://"+r.Host+"/"+rule.Scope, req.KeyName, req.Key, exp)
	writeJSON(w, http.StatusOK, loginResponse{
		Token: token, KeyName: req.KeyName, Rights: rule.Rights.Effective().String(),
		Scope: rule.Scope, Namespace: ns.Name(), ExpiresAt: exp.UTC(),
	})
}

func (h *Handler) loginToken(w http.ResponseWriter, r *http.Request, token string) {
	resp, err := h.checkToken(r, token)
	if err != nil {
		writeAuthError(w, err)
		return
	}
	h.logins.succeeded(r.RemoteAddr)
	writeJSON(w, http.StatusOK, resp)
}

// checkToken validates a pasted token for its own audience.
func (h *Handler) checkToken(r *http.Request, token string) (loginResponse, error) {
	t, err := sas.Parse(token)
	if err != nil {
		return loginResponse{}, err
	}
	aud, err := t.Audience()
	if err != nil {
		return loginResponse{}, err
	}
	ns, _, err := h.reg.Resolve(r.Host, t.KeyName, t.Host())
	if err != nil {
		return loginResponse{}, err
	}
	rights, err := ns.Validate(token, aud, 0)
	if err != nil {
		return loginResponse{}, err
	}
	return loginResponse{Token: token, KeyName: t.KeyName, Rights: rights.String(), Scope: aud, Namespace: ns.Name(), ExpiresAt: t.ExpiresAt()}, nil
}

// authText is the text of a refused credential.
// writeAuthError answers a login or call whose credentials err refused:
// 401, or 503 with Retry-After when they could not be checked now (a
// cluster's group holding the rules has no reachable leader:
// core.ErrServerBusy), as the gateway answers the SDKs: the page says to
// try again rather than that the key is wrong.
func writeAuthError(w http.ResponseWriter, err error) {
	if errors.Is(err, core.ErrServerBusy) {
		w.Header().Set("Retry-After", "1")
		writeJSONError(w, http.StatusServiceUnavailable, "the credentials could not be checked now, try again: "+err.Error())
		return
	}
	writeJSONError(w, http.StatusUnauthorized, authText(err))
}

func authText(err error) string {
	var se *sas.Error
	if errors.As(err, &se) {
		return se.Reason() + ": " + se.Detail
	}
	return err.Error()
}
