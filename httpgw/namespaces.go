package httpgw

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw/internal/atom"
)

// The namespaces API (httpgw/README.md, "Namespaces"): JSON over HTTP,
// omnibus's own (Service Bus manages namespaces through Azure Resource
// Manager, which a local broker has no use for).
//
//	GET    /$namespaces                  list
//	GET    /$namespaces/{name}           one, with its rules
//	PUT    /$namespaces/{name}           create (201); with If-Match: * replace its rules and limits (200)
//	DELETE /$namespaces/{name}           delete, with everything in it
//	POST   /$namespaces/{name}/clock?advance=1h30m        move its test clock forward
//	POST   /$namespaces/{name}/deliver?entity=q&sequence=7 deliver scheduled messages now
//
// All but the last two need Manage on the default namespace (the root
// key); those two accept Manage on the namespace itself too, and answer
// 403 unless omnibus runs with --allow-test-clock.

// maxNamespaceBody bounds a PUT /$namespaces/{name} body: twelve rules
// with keys of the longest length fit several times over.
const maxNamespaceBody = 64 << 10

// namespaceJSON is a namespace as the API shows it.
type namespaceJSON struct {
	Name    string
	Default bool      `json:",omitempty"`
	Created time.Time `json:",omitzero"`
	// Now is the namespace's time (ahead of the wall clock once its test
	// clock has moved).
	Now time.Time
	// AuthorizationRules are the namespace's own rules; none: the root
	// rules apply (and on the default namespace they always do).
	AuthorizationRules []ruleJSON `json:",omitempty"`
	// Limits are the limits in force: the namespace's own, the process's
	// for those it was not given; one left out has no cap.
	Limits namespace.LimitsJSON `json:",omitzero"`
}

// ruleJSON is a shared access authorization rule as the API shows it.
type ruleJSON struct {
	KeyName      string
	PrimaryKey   string `json:",omitempty"`
	SecondaryKey string `json:",omitempty"`
	Rights       []string
}

func namespaceView(ns *namespace.Namespace) namespaceJSON {
	v := namespaceJSON{Name: ns.Name(), Default: ns.IsDefault(), Created: ns.Created(), Now: ns.Now().UTC(), Limits: ns.Limits().JSON()}
	for _, r := range ns.Rules() {
		v.AuthorizationRules = append(v.AuthorizationRules, ruleJSON{KeyName: r.KeyName, PrimaryKey: r.PrimaryKey,
			SecondaryKey: r.SecondaryKey, Rights: rightsNames(r.Rights)})
	}
	return v
}

// rightsNames lists rights as Service Bus's AccessRights values.
func rightsNames(r sas.Rights) []string {
	if r == 0 {
		return nil
	}
	return strings.Split(r.String(), ",")
}

// nsRoutes adds the namespaces API to the router.
func (g *Gateway) nsRoutes(r *mux.Router) {
	const base = "/{_nss:(?i:\\$namespaces)}"
	r.Path(base).Methods(http.MethodGet).Handler(g.rootManage(g.listNamespaces))
	r.Path(base + "/{ns}").Methods(http.MethodGet).Handler(g.rootManage(g.getNamespace))
	r.Path(base + "/{ns}").Methods(http.MethodPut).Handler(g.rootManage(g.putNamespace))
	r.Path(base + "/{ns}").Methods(http.MethodDelete).Handler(g.rootManage(g.deleteNamespace))
	r.Path(base + "/{ns}/{_clock:(?i:clock)}").Methods(http.MethodPost).Handler(g.nsManage(g.advanceClock))
	r.Path(base + "/{ns}/{_deliver:(?i:deliver)}").Methods(http.MethodPost).Handler(g.nsManage(g.deliverScheduled))
}

// rootManage needs Manage on the default namespace.
func (g *Gateway) rootManage(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := g.reg.Default().Validate(requestToken(r), r.URL.Path, sas.Manage); err != nil {
			g.unauthorized(w, r, err)
			return
		}
		h(w, r)
	})
}

// nsManage needs Manage on the default namespace or on the namespace the
// path names.
func (g *Gateway) nsManage(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := requestToken(r)
		_, err := g.reg.Default().Validate(token, r.URL.Path, sas.Manage)
		if err != nil {
			if ns, nerr := g.reg.Get(mux.Vars(r)["ns"]); nerr == nil {
				if _, nerr := ns.Validate(token, "", sas.Manage); nerr == nil {
					err = nil
				}
			}
		}
		if err != nil {
			g.unauthorized(w, r, err)
			return
		}
		h(w, r)
	})
}

func (g *Gateway) listNamespaces(w http.ResponseWriter, r *http.Request) {
	all := g.reg.List()
	out := make([]namespaceJSON, 0, len(all))
	for _, ns := range all {
		out = append(out, namespaceView(ns))
	}
	g.writeJSON(w, r, http.StatusOK, out)
}

func (g *Gateway) getNamespace(w http.ResponseWriter, r *http.Request) {
	ns, err := g.reg.Get(mux.Vars(r)["ns"])
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	g.writeJSON(w, r, http.StatusOK, namespaceView(ns))
}

// putNamespace creates a namespace, or with If-Match: * replaces its
// rules and limits. The body is optional: {"AuthorizationRules":
// [{"KeyName":…,"PrimaryKey":…,"SecondaryKey":…,"Rights":["Listen","Send"]}],
// "Limits":{"MaxEntities":…,"MaxConnections":…,"MaxEntitySizeInMegabytes":…}};
// what it leaves out is none (rules: the root key's) or the default
// (limits).
func (g *Gateway) putNamespace(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["ns"]
	body, _, err := readBody(r, maxNamespaceBody, nil) // 64 KiB: not budgeted, as management bodies
	if errors.Is(err, errBodyTooLarge) {
		g.badRequest(w, r, "The request body is larger than %d bytes, the limit of a namespace description", maxNamespaceBody)
		return
	}
	if err != nil {
		g.badRequest(w, r, "Reading the request body failed: %v", err)
		return
	}
	var in struct {
		AuthorizationRules []ruleJSON
		Limits             namespace.LimitsJSON
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			g.badRequest(w, r, "SubCode=40000. The namespace description is not valid JSON: %v", err)
			return
		}
	}
	rules, err := rulesFromJSON(in.AuthorizationRules)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	limits, err := in.Limits.Limits()
	if err != nil {
		g.badRequest(w, r, "SubCode=40000. The namespace description is not valid: %v", err)
		return
	}
	status := http.StatusCreated
	var ns *namespace.Namespace
	if isUpdate(r) {
		status = http.StatusOK
		ns, err = g.reg.Replace(r.Context(), name, rules, limits)
	} else {
		ns, err = g.reg.CreateWithLimits(r.Context(), name, rules, limits)
	}
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	g.writeJSON(w, r, status, namespaceView(ns))
}

// rulesFromJSON turns the API's rules into the core's; the core checks
// them further (keys, names, duplicates).
func rulesFromJSON(in []ruleJSON) ([]core.AuthorizationRule, error) {
	out := make([]core.AuthorizationRule, 0, len(in))
	for _, j := range in {
		rights, err := sas.ParseRights(j.Rights...)
		if err != nil {
			return nil, &core.Error{Code: core.CodeBadRequest, Msg: "authorization rule '" + j.KeyName + "': " + strings.TrimPrefix(err.Error(), "sas: ")}
		}
		out = append(out, core.AuthorizationRule{KeyName: j.KeyName, PrimaryKey: j.PrimaryKey, SecondaryKey: j.SecondaryKey, Rights: rights})
	}
	return out, nil
}

func (g *Gateway) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	if err := g.reg.Delete(r.Context(), mux.Vars(r)["ns"]); err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// advanceClock moves a namespace's test clock forward by ?advance= (a Go
// duration, "90s", "1h30m", or an ISO 8601 one, "PT1H30M").
func (g *Gateway) advanceClock(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["ns"]
	raw := r.URL.Query().Get("advance")
	d, err := parseAdvance(raw)
	if err != nil {
		g.badRequest(w, r, "SubCode=40000. advance=%q is not a duration: give one like 90s, 1h30m or PT1H30M", raw)
		return
	}
	if _, err := g.reg.AdvanceClock(r.Context(), name, d); err != nil {
		g.testClockError(w, r, err)
		return
	}
	ns, err := g.reg.Get(name)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	g.writeJSON(w, r, http.StatusOK, namespaceView(ns))
}

// deliverScheduled delivers scheduled messages of ?entity= (a queue or
// topic) named by ?sequence= (repeated, or comma-separated) now.
func (g *Gateway) deliverScheduled(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	entity := q.Get("entity")
	var seqs []int64
	for _, v := range q["sequence"] {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				g.badRequest(w, r, "SubCode=40000. sequence=%q is not a sequence number", f)
				return
			}
			seqs = append(seqs, n)
		}
	}
	if entity == "" || len(seqs) == 0 {
		g.badRequest(w, r, "SubCode=40000. Name the queue or topic (entity=) and the scheduled messages' sequence numbers (sequence=)")
		return
	}
	n, err := g.reg.DeliverScheduled(r.Context(), mux.Vars(r)["ns"], entity, seqs)
	if err != nil {
		g.testClockError(w, r, err)
		return
	}
	g.writeJSON(w, r, http.StatusOK, struct{ Delivered int }{n})
}

// testClockError reports a test clock call's failure: 403 when the test
// clock is off.
func (g *Gateway) testClockError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, namespace.ErrTestClockOff) {
		g.writeError(w, r, http.StatusForbidden, "SubCode=40300. The test clock is off: start omnibus with --allow-test-clock (OMNIBUS_ALLOW_TEST_CLOCK=1) to move a namespace's clock or deliver scheduled messages now")
		return
	}
	g.writeCoreError(w, r, managementAPI, err)
}

// parseAdvance parses a Go duration or an ISO 8601 one (PT1H30M).
func parseAdvance(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	return atom.ParseDuration(s)
}

// writeJSON writes v as the JSON response.
func (g *Gateway) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		g.writeError(w, r, http.StatusInternalServerError, "SubCode=50000. Encoding the response failed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
