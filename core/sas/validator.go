package sas

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"time"
)

// DefaultClockSkew is how long after its expiry a token is still accepted
// when [Config.ClockSkew] is zero.
const DefaultClockSkew = 5 * time.Minute

// Rule is a shared access authorization rule: a named key with rights,
// defined on the namespace or on one entity.
type Rule struct {
	// KeyName is the rule name clients put in skn (e.g.
	// "RootManageSharedAccessKey"). Matched exactly.
	KeyName string
	// Key is the primary key, used as UTF-8 text.
	Key string
	// SecondaryKey is an optional second key accepted like Key.
	SecondaryKey string
	// Rights are the claims tokens signed with this rule carry.
	Rights Rights
	// Scope is "" for a namespace rule, or the path of the queue or topic
	// the rule is defined on. A topic rule also covers its subscriptions.
	Scope string
}

// Covers reports whether the rule may be used for the entity at
// entityPath: its scope is the namespace, the entity itself or an ancestor
// (compared case-insensitively on segment boundaries).
func (r Rule) Covers(entityPath string) bool {
	return Covers(NormalizePath(r.Scope), NormalizePath(entityPath))
}

// Config configures a [Validator]. Its zero value is usable but accepts no
// token, because it has no rules.
type Config struct {
	// Rules are the keys tokens may be signed with.
	Rules []Rule
	// ClockSkew is how long after its expiry a token is still accepted.
	// Zero means [DefaultClockSkew]; a negative value means no tolerance.
	ClockSkew time.Duration
	// Now returns the current time. Nil means [time.Now].
	Now func() time.Time
	// SharedNames lets several rules have the same key name and scope (a
	// namespace's rules under an alias, core/namespace): a token or key
	// is accepted if any of them verifies it. Without it such rules are
	// refused as a mistake.
	SharedNames bool
}

// Validator checks tokens and keys against a fixed set of rules. It is safe
// for concurrent use; it never changes after [NewValidator].
type Validator struct {
	rules []rule
	skew  time.Duration
	now   func() time.Time
}

// rule is a Rule with its scope normalised once.
type rule struct {
	Rule
	scope string
}

// NewValidator checks cfg and returns a Validator. Every rule needs a key
// name, a key and only known rights; two rules with the same key name and
// scope are refused.
func NewValidator(cfg Config) (*Validator, error) {
	v := &Validator{skew: cfg.ClockSkew, now: cfg.Now}
	switch {
	case v.skew == 0:
		v.skew = DefaultClockSkew
	case v.skew < 0:
		v.skew = 0
	}
	if v.now == nil {
		v.now = time.Now
	}
	seen := make(map[[2]string]bool)
	for i, r := range cfg.Rules {
		if r.KeyName == "" || r.Key == "" {
			return nil, fmt.Errorf("sas: rule %d: key name and key are required", i)
		}
		if r.Rights&^allRights != 0 {
			return nil, fmt.Errorf("sas: rule %q: unknown rights bits %#x", r.KeyName, uint8(r.Rights&^allRights))
		}
		nr := rule{Rule: r, scope: NormalizePath(r.Scope)}
		k := [2]string{r.KeyName, nr.scope}
		if seen[k] && !cfg.SharedNames {
			return nil, fmt.Errorf("sas: rule %q defined twice for scope %q", r.KeyName, r.Scope)
		}
		seen[k] = true
		v.rules = append(v.rules, nr)
	}
	return v, nil
}

// ClockSkew returns how long after its expiry a token is still accepted.
// A grant made on a token's strength should last as long (token expiry
// plus ClockSkew), so that a token accepted again would be accepted now.
func (v *Validator) ClockSkew() time.Duration { return v.skew }

// Validate checks a token presented for the entity at entityPath (for
// example "q1", "t/Subscriptions/s", "$Resources/Queues", or "" for the
// namespace) and needing the rights need. In order it checks that the token
// parses, that a rule with its key name exists for that entity, the
// signature (constant-time, with the primary and secondary key), the expiry
// (allowing the clock skew), that the token's resource covers entityPath,
// and that the rule grants need. It returns the rule's effective rights, also
// with [ErrInsufficientRights], so callers can cache what a token allows.
// Every error is an [*Error].
func (v *Validator) Validate(token, entityPath string, need Rights) (Rights, error) {
	t, err := Parse(token)
	if err != nil {
		return 0, err
	}
	entity := NormalizePath(entityPath)

	known := false
	var match *rule
	for i := range v.rules {
		r := &v.rules[i]
		if r.KeyName != t.KeyName {
			continue
		}
		known = true
		if Covers(r.scope, entity) && r.verify(t) {
			match = r
			break
		}
	}
	switch {
	case !known:
		return 0, refuse(ErrUnknownKey, fmt.Sprintf("The token has an invalid signature. Key name '%s' is not known.", t.KeyName))
	case match == nil:
		return 0, v.noMatch(t, entity)
	}

	if exp := t.ExpiresAt(); !v.now().Before(exp.Add(v.skew)) {
		return 0, refuse(ErrExpiredToken, fmt.Sprintf("The token is expired. Expiration time: '%s'.", exp.Format("2006-01-02 15:04:05Z")))
	}
	aud, err := t.Audience()
	if err != nil {
		return 0, err
	}
	if !Covers(aud, entity) {
		return 0, refuse(ErrInvalidAudience, "The authorization header contains a token with a wrong audience.")
	}
	got := match.Rights.Effective()
	if !got.Has(need) {
		return got, refuse(ErrInsufficientRights, insufficientDetail(got, need))
	}
	return got, nil
}

// noMatch explains why no rule with the token's key name verified it: the
// key is defined only on other entities, or the signature is wrong.
func (v *Validator) noMatch(t *Token, entity string) error {
	for i := range v.rules {
		r := &v.rules[i]
		if r.KeyName == t.KeyName && Covers(r.scope, entity) {
			return refuse(ErrInvalidSignature, "The token has an invalid signature.")
		}
	}
	return refuse(ErrUnknownKey, fmt.Sprintf("The token has an invalid signature. Key name '%s' is not defined for '%s'.", t.KeyName, entity))
}

// verify reports whether t carries a signature made with one of r's keys.
func (r *rule) verify(t *Token) bool {
	for _, key := range [2]string{r.Key, r.SecondaryKey} {
		if key == "" {
			continue
		}
		want := signature(key, t.Resource, t.Expiry)
		if secretEqual(want, t.Signature) || secretEqual(want, t.RawSignature) {
			return true
		}
	}
	return false
}

// Authenticate checks a key name and key pair, as SASL PLAIN carries them
// (username = key name, password = key), against the rules, comparing keys
// in constant time. It returns the matching rule; the caller decides per
// entity with [Rule.Covers] and [Rights.Has]. An unknown name gives
// [ErrUnknownKey], a wrong key [ErrInvalidSignature], both as [*Error].
func (v *Validator) Authenticate(keyName, key string) (Rule, error) {
	known := false
	for _, r := range v.rules {
		if r.KeyName != keyName {
			continue
		}
		known = true
		for _, k := range [2]string{r.Key, r.SecondaryKey} {
			if k != "" && secretEqual(k, key) {
				return r.Rule, nil
			}
		}
	}
	if !known {
		return Rule{}, refuse(ErrUnknownKey, fmt.Sprintf("Key name '%s' is not known.", keyName))
	}
	return Rule{}, refuse(ErrInvalidSignature, fmt.Sprintf("The key given for '%s' is wrong.", keyName))
}

// secretEqual compares a secret (a key, a signature) with what a peer
// sent in time that depends on neither: both are hashed first, so not
// even the length of the secret shows (subtle.ConstantTimeCompare alone
// returns early when the lengths differ).
func secretEqual(secret, sent string) bool {
	a, b := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(sent))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// insufficientDetail is the Service Bus text for a missing claim, e.g.
// "Unauthorized access. 'Send' claim(s) are required to perform this
// operation."
func insufficientDetail(got, need Rights) string {
	missing := need &^ got
	return "Unauthorized access. '" + missing.String() + "' claim(s) are required to perform this operation."
}
