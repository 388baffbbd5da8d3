package console

import (
	"net/http"
	"time"

	"github.com/omnibusmq/omnibus/core/sas"
)

// The namespace picker. A session is in the namespace its token names
// (the gateway's Host, key name or audience rules). A token with Manage
// on the default namespace (the root key) sees every namespace and may
// switch: the console then signs a token for the namespace with that
// namespace's Manage rule under its "rule@namespace" name, so the
// token's key name alone takes every later call, to this API and to the
// gateway's REST endpoints, to that namespace. Other tokens see their
// own namespace only.

// namespaceList is what GET namespaces answers.
type namespaceList struct {
	Current string   `json:"current"`
	Names   []string `json:"names"`
	// Switch says whether the caller may switch (it holds the root key).
	Switch bool `json:"switch"`
}

// rootManage reports whether r's token has Manage on the default
// namespace.
func (h *Handler) rootManage(r *http.Request) bool {
	_, err := h.reg.Default().Validate(r.Header.Get("Authorization"), "", sas.Manage)
	return err == nil
}

func (h *Handler) listNamespaces(w http.ResponseWriter, r *http.Request) {
	if !h.authorize(w, r, "", 0) {
		return
	}
	ns, err := h.namespaceOf(r)
	if err != nil {
		writeAuthError(w, err)
		return
	}
	out := namespaceList{Current: ns.Name(), Names: []string{ns.Name()}}
	if h.rootManage(r) {
		out.Switch, out.Names = true, nil
		for _, n := range h.reg.List() {
			out.Names = append(out.Names, n.Name())
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// switchNamespace answers a token for another namespace, to a caller
// holding the root key.
func (h *Handler) switchNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace string `json:"namespace"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	if !h.rootManage(r) {
		writeJSONError(w, http.StatusUnauthorized, "Unauthorized access. 'Manage' claim(s) on the default namespace (the root key) are required to switch namespaces.")
		return
	}
	ns, err := h.reg.Get(req.Namespace)
	if err != nil {
		h.writeCoreError(w, r, err)
		return
	}
	rule, ok := ns.ManageRule()
	if !ok {
		writeJSONError(w, http.StatusForbidden, "namespace '"+ns.Name()+"' has no rule with Manage rights the console could sign with; log in with one of its keys")
		return
	}
	exp := time.Now().Add(h.ttl).Truncate(time.Second)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeJSON(w, http.StatusOK, loginResponse{
		Token: sas.Sign(scheme+"://"+r.Host+"/", rule.KeyName, rule.Key, exp), KeyName: rule.KeyName,
		Rights: rule.Rights.Effective().String(), Namespace: ns.Name(), ExpiresAt: exp.UTC(),
	})
}
