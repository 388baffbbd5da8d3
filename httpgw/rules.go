package httpgw

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/httpgw/internal/atom"
)

// Rule management: /{topic}/Subscriptions/{sub}/Rules/{rule} and the
// …/Rules listing (rest.md §4.1).

func rulePath(r *http.Request) (subPath, rule string) {
	v := mux.Vars(r)
	return v["topic"] + "/Subscriptions/" + v["sub"], v["rule"]
}

// findRule returns the named rule of a subscription (names compare
// case-insensitively, as in the core).
func (g *Gateway) findRule(r *http.Request, subPath, name string) (core.Rule, error) {
	rules, err := g.broker(r).ListRules(subPath)
	if err != nil {
		return core.Rule{}, err
	}
	for _, r := range rules {
		if strings.EqualFold(r.Name, name) {
			return r, nil
		}
	}
	return core.Rule{}, &core.Error{Code: core.CodeRuleNotFound, Msg: "The rule '" + name + "' could not be found on '" + subPath + "'."}
}

func (g *Gateway) ruleEntry(r *http.Request, subPath string, rule core.Rule) atom.Entry {
	return atom.Entry{ID: entityURL(r, subPath+"/Rules/"+rule.Name), Title: rule.Name,
		Published: rule.CreatedAt, Updated: rule.CreatedAt, Content: ruleDescription(rule)}
}

// getRule answers GET …/Rules/{rule}: the entry, or 404.
func (g *Gateway) getRule(w http.ResponseWriter, r *http.Request) {
	subPath, name := rulePath(r)
	rule, err := g.findRule(r, subPath, name)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	g.writeEntry(w, r, http.StatusOK, g.ruleEntry(r, subPath, rule))
}

// putRule creates a rule (201, 409 if the name is taken) or, with
// If-Match, replaces it (200, 404 if missing). The core has no rule
// update, so a replace removes the old rule and adds the new one, putting
// the old one back if the new one is refused.
func (g *Gateway) putRule(w http.ResponseWriter, r *http.Request) {
	subPath, name := rulePath(r)
	desc, ok := g.readDescription(w, r)
	if !ok {
		return
	}
	d, isRule := desc.(*atom.RuleDescription)
	if !isRule {
		g.badRequest(w, r, "The request body holds a %T; a rule path takes a RuleDescription", desc)
		return
	}
	rule, err := coreRule(d)
	if err != nil {
		g.badRequest(w, r, "%v", err)
		return
	}
	rule.Name = name // the path names the rule
	if isUpdate(r) {
		err = g.replaceRule(r, subPath, rule)
	} else {
		err = g.broker(r).AddRule(r.Context(), subPath, rule)
	}
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	got, err := g.findRule(r, subPath, name)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	g.writeEntry(w, r, createdOrOK(r), g.ruleEntry(r, subPath, got))
}

func (g *Gateway) replaceRule(r *http.Request, subPath string, rule core.Rule) error {
	old, err := g.findRule(r, subPath, rule.Name)
	if err != nil {
		return err
	}
	check := rule
	if err := check.Validate(); err != nil {
		return err
	}
	if err := g.broker(r).RemoveRule(r.Context(), subPath, old.Name); err != nil {
		return err
	}
	if err := g.broker(r).AddRule(r.Context(), subPath, rule); err != nil {
		_ = g.broker(r).AddRule(r.Context(), subPath, old)
		return err
	}
	return nil
}

// deleteRule answers DELETE …/Rules/{rule}: 200, or 404.
func (g *Gateway) deleteRule(w http.ResponseWriter, r *http.Request) {
	subPath, name := rulePath(r)
	if err := g.broker(r).RemoveRule(r.Context(), subPath, name); err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	writeEmptyOK(w)
}

// listRules answers GET …/Rules, paged. Listing needs Listen (or Manage)
// rights (rest.md §3.2).
func (g *Gateway) listRules(w http.ResponseWriter, r *http.Request) {
	subPath, _ := rulePath(r)
	p, err := readPage(r.URL.Query())
	if err != nil {
		g.badRequest(w, r, "%v", err)
		return
	}
	rules, err := g.broker(r).ListRules(subPath)
	if err != nil {
		g.writeCoreError(w, r, managementAPI, err)
		return
	}
	lo, hi, more := p.window(len(rules))
	path := subPath + "/Rules"
	f := atom.Feed{ID: entityURL(r, path), Title: "Rules", Updated: g.now()}
	if more {
		f.Next = nextURL(r, path, p, hi)
	}
	for _, rule := range rules[lo:hi] {
		f.Entries = append(f.Entries, g.ruleEntry(r, subPath, rule))
	}
	g.writeFeed(w, r, f)
}
