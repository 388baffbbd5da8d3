package namespace

import (
	"errors"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Tokens and keys. A namespace's rules are known under three names each,
// so that a client can pick its namespace by key name without DNS
// (Registry.ForKeyName): the rule's own name, "name@namespace", and, for
// namespace-level rules, the namespace's name itself (AlmostServiceBus's
// connection strings: SharedAccessKeyName=<namespace>). The three verify
// with the same keys and carry the same rights.

// aliases returns rules with each rule also under its "@namespace" name
// and, for namespace-level rules, under the namespace's name.
func aliases(ns string, rules []sas.Rule) []sas.Rule {
	out := make([]sas.Rule, 0, 3*len(rules))
	for _, r := range rules {
		out = append(out, r)
		at := r
		at.KeyName = r.KeyName + "@" + ns
		out = append(out, at)
		if r.Scope == "" {
			bare := r
			bare.KeyName = ns
			out = append(out, bare)
		}
	}
	return out
}

// validator builds the validator for rules with their aliases.
func (r *Registry) validator(ns string, rules []sas.Rule) (*sas.Validator, error) {
	return sas.NewValidator(sas.Config{Rules: aliases(ns, rules), ClockSkew: r.cfg.ClockSkew, Now: r.cfg.TokenNow, SharedNames: true})
}

// namespaceRules are the namespace-level rules in force for a namespace
// with the given own rules: the default namespace has the root rules and
// its own; another has its own, or the root rules when it has none.
func (r *Registry) namespaceRules(isDefault bool, own []core.AuthorizationRule) []sas.Rule {
	var out []sas.Rule
	if isDefault || len(own) == 0 {
		out = append(out, r.cfg.RootRules...)
	}
	for _, a := range own {
		out = append(out, a.SASRule(""))
	}
	return out
}

// Validate checks a token presented for the entity at path (a request
// path: "q", "q/messages/head", "t/Subscriptions/s", "" for the
// namespace) needing the rights need, against the namespace's rules and
// those of the queue or topic the path lies in. It returns what
// [sas.Validator.Validate] returns.
func (n *Namespace) Validate(token, path string, need sas.Rights) (sas.Rights, error) {
	if n.nilAuth {
		return sas.Manage.Effective(), nil
	}
	if n.fixed != nil {
		return n.fixed.Validate(token, path, need)
	}
	v := n.auth.Load()
	ar, unknown := n.broker.AuthorizationRulesOn(sas.NormalizePath(path))
	if unknown != nil {
		// The entity's rules cannot be read now (its group has no
		// reachable leader): a token of the namespace's rules is checked
		// as ever; one whose key is not among them may be the entity's,
		// so it is answered "retry" (server busy), never "unauthorized",
		// which the SDKs take as final.
		rights, err := v.Validate(token, path, need)
		if err != nil && errors.Is(err, sas.ErrUnknownKey) {
			return 0, unknown
		}
		return rights, err
	}
	if len(ar.Rules) > 0 {
		ev, err := n.withEntityRules(ar)
		if err != nil {
			return 0, err
		}
		v = ev
	}
	return v.Validate(token, path, need)
}

// withEntityRules returns a validator for the namespace's rules plus an
// entity's.
func (n *Namespace) withEntityRules(ar core.AccessRules) (*sas.Validator, error) {
	rules := n.reg.namespaceRules(n.IsDefault(), n.Rules())
	for _, a := range ar.Rules {
		rules = append(rules, a.SASRule(ar.Path))
	}
	return n.reg.validator(n.name, rules)
}

// Authenticate checks a key name and key, as SASL PLAIN carries them,
// against the namespace's rules and, when no namespace rule has that
// name, the rules of its queues and topics. It returns the matching
// rule, scoped to its entity for an entity's rule.
func (n *Namespace) Authenticate(keyName, key string) (sas.Rule, error) {
	if n.nilAuth {
		return sas.Rule{KeyName: keyName, Rights: sas.Manage.Effective()}, nil
	}
	if n.fixed != nil {
		return n.fixed.Authenticate(keyName, key)
	}
	rule, err := n.auth.Load().Authenticate(keyName, key)
	if err == nil || !errors.Is(err, sas.ErrUnknownKey) {
		return rule, err
	}
	name := strings.TrimSuffix(keyName, "@"+n.name)
	found, unknown := n.broker.EntityAuthorizationRules(name)
	if unknown != nil {
		// A group could not be listed: the key may be one of its
		// entities' (retry), unless a rule found elsewhere takes it.
		err = unknown
	}
	for _, ar := range found {
		v, verr := n.withEntityRules(ar)
		if verr != nil {
			return sas.Rule{}, verr
		}
		if rule, verr := v.Authenticate(keyName, key); verr == nil {
			return rule, nil
		} else if !errors.Is(verr, sas.ErrUnknownKey) {
			err = verr
		}
	}
	return sas.Rule{}, err
}

// ClockSkew returns how long after its expiry a token is still accepted.
func (n *Namespace) ClockSkew() time.Duration {
	if n.nilAuth {
		return sas.DefaultClockSkew
	}
	if n.fixed != nil {
		return n.fixed.ClockSkew()
	}
	return n.auth.Load().ClockSkew()
}

// ManageRule returns a namespace-level rule in force with Manage rights,
// keys included, under the name that picks this namespace from any host
// ("rule@namespace"; the rule's own name on the default namespace): what
// a tool holding the root key signs with to work in this namespace (the
// console's namespace picker). False when the namespace has no such rule.
func (n *Namespace) ManageRule() (sas.Rule, bool) {
	if n.fixed != nil || n.nilAuth {
		return sas.Rule{}, false
	}
	for _, r := range n.reg.namespaceRules(n.IsDefault(), n.Rules()) {
		if r.Rights.Has(sas.Manage) {
			if !n.IsDefault() {
				r.KeyName += "@" + n.name
			}
			return r, true
		}
	}
	return sas.Rule{}, false
}
