package core

import (
	"crypto/rand"
	"encoding/base64"
	"strings"

	"github.com/omnibusmq/omnibus/core/sas"
)

// Shared access authorization rules (Service Bus's
// SharedAccessAuthorizationRule): a key name, two keys and the rights a
// token signed with either key carries. Rules on a queue or topic are
// part of its description ([Entity.AuthorizationRules]), stored and
// replicated with it; a token signed with one reaches only that entity,
// its subscriptions and its subqueues (core/sas checks the scope). The
// namespace's own rules are kept by core/namespace, which validates them
// with the same [ValidateAuthorizationRules].

// Bounds of authorization rules.
const (
	// MaxAuthorizationRules is how many rules a namespace, queue or topic
	// may have (Service Bus: 12).
	MaxAuthorizationRules = 12
	// MaxKeyNameLength is the longest key name (Service Bus: 256).
	MaxKeyNameLength = 256
	// MinAccessKeyLength and MaxAccessKeyLength bound a key's length.
	// Service Bus's own keys are 44 characters of base64 (256 bits); a
	// key shorter than 32 characters is refused as too easy to guess.
	MinAccessKeyLength = 32
	MaxAccessKeyLength = 256
)

// AuthorizationRule is a shared access authorization rule.
type AuthorizationRule struct {
	KeyName      string
	PrimaryKey   string
	SecondaryKey string
	// Rights is what tokens signed with the rule's keys may do: Listen,
	// Send, Manage (which implies the other two).
	Rights sas.Rights
}

// SASRule returns r as core/sas checks tokens against it, scoped to the
// entity at path ("" for a namespace rule).
func (r AuthorizationRule) SASRule(path string) sas.Rule {
	return sas.Rule{KeyName: r.KeyName, Key: r.PrimaryKey, SecondaryKey: r.SecondaryKey, Rights: r.Rights, Scope: path}
}

// ValidateAuthorizationRules checks the rules of one namespace or entity
// (named by owner in errors, e.g. "queue 'orders'") and fills what may be
// left out: a missing key is generated (44 characters of base64, as
// Service Bus makes them) and Manage gets Send and Listen. It refuses
// more than [MaxAuthorizationRules] rules, a key name that is empty, too
// long, has a character other than a letter, digit, '.', '-' or '_', or
// is given twice (names compare without case), a rule without rights, and
// a key shorter than [MinAccessKeyLength] or longer than
// [MaxAccessKeyLength]. Errors are [ErrBadRequest]s.
func ValidateAuthorizationRules(owner string, rules []AuthorizationRule) error {
	if len(rules) > MaxAuthorizationRules {
		return errf(CodeBadRequest, "%s: at most %d authorization rules are allowed, got %d", owner, MaxAuthorizationRules, len(rules))
	}
	seen := make(map[string]bool, len(rules))
	for i := range rules {
		r := &rules[i]
		if err := checkKeyName(r.KeyName); err != nil {
			return errf(CodeBadRequest, "%s: authorization rule %d: %v", owner, i+1, err)
		}
		low := strings.ToLower(r.KeyName)
		if seen[low] {
			return errf(CodeBadRequest, "%s: the authorization rule '%s' is defined twice; key names must be unique", owner, r.KeyName)
		}
		seen[low] = true
		if r.Rights == 0 {
			return errf(CodeBadRequest, "%s: authorization rule '%s' has no rights; give Listen, Send or Manage", owner, r.KeyName)
		}
		r.Rights = r.Rights.Effective()
		for _, k := range []*string{&r.PrimaryKey, &r.SecondaryKey} {
			if *k == "" {
				*k = NewAccessKey()
			}
		}
		for _, k := range [2]struct{ name, key string }{{"PrimaryKey", r.PrimaryKey}, {"SecondaryKey", r.SecondaryKey}} {
			if n := len(k.key); n < MinAccessKeyLength || n > MaxAccessKeyLength {
				return errf(CodeBadRequest, "%s: the %s of authorization rule '%s' is %d characters long; a key must be %d to %d characters (Service Bus makes 44-character base64 keys)",
					owner, k.name, r.KeyName, n, MinAccessKeyLength, MaxAccessKeyLength)
			}
		}
	}
	return nil
}

// checkKeyName checks an authorization rule's key name.
func checkKeyName(name string) error {
	if name == "" || len(name) > MaxKeyNameLength {
		return errf(CodeBadRequest, "the key name must be 1 to %d characters long", MaxKeyNameLength)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return errf(CodeBadRequest, "the key name '%s' may contain only letters, digits, periods, hyphens and underscores", name)
		}
	}
	return nil
}

// NewAccessKey returns a new random key: 256 bits in base64, as Service
// Bus generates them.
func NewAccessKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.StdEncoding.EncodeToString(b[:])
}

// AccessRules are the authorization rules of one queue or topic, with the
// entity's path (its scope).
type AccessRules struct {
	Path  string
	Rules []AuthorizationRule
}

// AuthorizationRulesOn returns the authorization rules of the queue or
// topic that path (an entity path as sas.NormalizePath leaves it, or any
// request path below an entity: "q/messages/head",
// "t/subscriptions/s/$deadletterqueue") lies in; none when that entity
// has none or does not exist. Entities do not nest (a queue or topic
// whose path lies below another's is refused), so the shortest prefix of
// path that names one is the entity, and a rule of one never reaches
// another. A broker looks the prefixes up in memory, without copying
// descriptions: the fronts call it for every token they check. A routed
// broker asks the entity's group (routedRulesOn), and returns an
// [ErrServerBusy] when that group cannot be asked now: whether the
// entity has rules is then unknown, not "none".
func (b *Broker) AuthorizationRulesOn(path string) (AccessRules, error) {
	key := entityKey(strings.Trim(path, "/"))
	if b.routed() {
		return b.routedRulesOn(key)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for p := range entityPrefixes(key) {
		if e := b.mu.entities[p]; e != nil {
			d := e.desc.Load()
			if d.Kind == KindSubscription || len(d.AuthorizationRules) == 0 {
				return AccessRules{}, nil
			}
			return AccessRules{Path: d.Path(), Rules: d.AuthorizationRules}, nil
		}
	}
	return AccessRules{}, nil
}

// entityPrefixes yields the prefixes of key that end on a segment
// boundary, shortest first, key itself last.
func entityPrefixes(key string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := 0; i <= len(key); i++ {
			if i < len(key) && key[i] != '/' {
				continue
			}
			if !yield(key[:i]) {
				return
			}
		}
	}
}

// routedRulesOn is AuthorizationRulesOn of a routed broker: the entity's
// description comes from its group (the local group broker when this
// node leads it, else the group's leader over the cluster's RPC). A
// prefix placed nowhere is skipped; when a group (or the placement)
// cannot be asked now, the rules are unknown: a server-busy error
// (rulesUnknown), so that a token signed with one of them is answered
// "retry" rather than refused for good.
func (b *Broker) routedRulesOn(key string) (AccessRules, error) {
	for p := range entityPrefixes(key) {
		be, err := b.route(p)
		if err != nil {
			if CodeOf(err) == CodeNotFound {
				continue
			}
			return AccessRules{}, rulesUnknown(p, err)
		}
		e, err := be.GetEntity(p)
		if err != nil {
			if CodeOf(err) == CodeNotFound {
				continue
			}
			return AccessRules{}, rulesUnknown(p, err)
		}
		if e.Kind == KindSubscription || len(e.AuthorizationRules) == 0 {
			return AccessRules{}, nil
		}
		return AccessRules{Path: e.Path(), Rules: e.AuthorizationRules}, nil
	}
	return AccessRules{}, nil
}

// rulesUnknown is the server-busy error of an entity whose authorization
// rules cannot be read now (its group has no reachable leader).
func rulesUnknown(path string, err error) error {
	return errf(CodeServerBusy, "The authorization rules of '%s' cannot be read now (%v); retry shortly.", path, err)
}

// EntityAuthorizationRules returns, for every queue and topic that has
// authorization rules with the key name keyName, those rules with the
// entity's path: what a SASL PLAIN login with that key name may be
// checked against. A routed broker also returns an [ErrServerBusy] when
// a group could not be listed (the rules found are still returned).
func (b *Broker) EntityAuthorizationRules(keyName string) ([]AccessRules, error) {
	if b.routed() {
		return b.routedEntityRules(keyName)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []AccessRules
	for _, e := range b.mu.entities {
		out = appendKeyRules(out, e.desc.Load(), keyName)
	}
	return out, nil
}

// appendKeyRules appends d's rule named keyName, if it has one.
func appendKeyRules(out []AccessRules, d *Entity, keyName string) []AccessRules {
	for _, r := range d.AuthorizationRules {
		if r.KeyName == keyName {
			out = append(out, AccessRules{Path: d.Path(), Rules: []AuthorizationRule{r}})
		}
	}
	return out
}

// routedEntityRules is EntityAuthorizationRules of a routed broker: the
// queues and topics of every group (a spread entity once). When a group
// cannot be listed now, the rules found elsewhere come with a
// server-busy error.
func (b *Broker) routedEntityRules(keyName string) ([]AccessRules, error) {
	var out []AccessRules
	var unknown error
	for _, kind := range []EntityKind{KindQueue, KindTopic} {
		es, err := b.listRouted(kind, "")
		if err != nil {
			unknown = rulesUnknown("the "+kind.String()+"s", err)
			continue
		}
		for _, e := range es {
			out = appendKeyRules(out, e, keyName)
		}
	}
	return out, unknown
}
