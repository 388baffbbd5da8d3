package amqpserver

import (
	"sync"
	"time"

	"github.com/omnibusmq/omnibus/core/sas"
)

// connAuth is what one connection may do: the rights its SASL login gave
// for every entity (PLAIN, or everything when the server has no
// validator), plus the grants of tokens put on $cbs, each limited to an
// entity path prefix and an expiry. Link attaches and $management
// operations consult it. It is safe for concurrent use: the connection
// goroutine adds grants while management handlers read it.
type connAuth struct {
	now func() time.Time

	mu struct {
		sync.Mutex          // guards the fields below
		open       bool     // no validator: every right everywhere
		rule       sas.Rule // SASL PLAIN login; zero Rule when none
		plain      bool
		// The PLAIN login's key name and key, checked again while links
		// depend on them (lifetime.go): a rule changed since the login
		// (a rotated key, fewer rights) takes effect on it too.
		plainKeyName, plainKey string
		granted                bool // a put-token has been accepted
		grants                 []grant
	}
}

// grant is the effect of one accepted put-token.
type grant struct {
	path    string // normalised entity path prefix ("" = namespace)
	rights  sas.Rights
	expires time.Time
}

func newConnAuth(now func() time.Time) *connAuth {
	return &connAuth{now: now}
}

// allowAll gives the connection every right (server without a validator).
func (a *connAuth) allowAll() {
	a.mu.Lock()
	a.mu.open = true
	a.mu.Unlock()
}

// login records a SASL PLAIN login with rule, made with key under
// keyName.
func (a *connAuth) login(rule sas.Rule, keyName, key string) {
	a.mu.Lock()
	a.mu.rule, a.mu.plain = rule, true
	a.mu.plainKeyName, a.mu.plainKey = keyName, key
	a.mu.Unlock()
}

// plainCredential returns the PLAIN login's key name and key, "" when
// the connection has none.
func (a *connAuth) plainCredential() (keyName, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.plainKeyName, a.mu.plainKey
}

// relogin replaces the PLAIN login's rule with the one its key verifies
// against now, or takes its rights away when it verifies against none.
func (a *connAuth) relogin(rule sas.Rule, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ok {
		rule = sas.Rule{}
	}
	a.mu.rule = rule
}

// add records a put-token grant, replacing an older one for the same path.
func (a *connAuth) add(path string, rights sas.Rights, expires time.Time) {
	path = sas.NormalizePath(path)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	kept := a.mu.grants[:0]
	for _, g := range a.mu.grants {
		if g.path != path && g.expires.After(now) {
			kept = append(kept, g)
		}
	}
	a.mu.grants = append(kept, grant{path: path, rights: rights, expires: expires})
	a.mu.granted = true
}

// authenticated reports whether the connection has presented a
// credential: a SASL PLAIN login, a put-token accepted (even one that
// has lapsed since), or any at all when the server has no validator.
func (a *connAuth) authenticated() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.open || a.mu.plain || a.mu.granted
}

// usesGrants reports whether the connection's rights can lapse: those of
// $cbs grants when their tokens expire, those of a SASL PLAIN login when
// its rule changes. Only a server without a validator gives rights that
// cannot.
func (a *connAuth) usesGrants() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.mu.open
}

// nextExpiry returns the earliest expiry of a grant still live.
func (a *connAuth) nextExpiry() (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	var next time.Time
	for _, g := range a.mu.grants {
		if g.expires.After(now) && (next.IsZero() || g.expires.Before(next)) {
			next = g.expires
		}
	}
	return next, !next.IsZero()
}

// allows reports whether the connection holds all the rights in need for
// entity.
func (a *connAuth) allows(entity string, need sas.Rights) bool {
	return a.rights(entity).Has(need)
}

// allowsAny reports whether the connection holds at least one of the
// rights in need for entity.
func (a *connAuth) allowsAny(entity string, need sas.Rights) bool {
	return a.rights(entity)&need.Effective() != 0
}

// rights returns every right the connection holds for entity: its login's
// (if the rule covers the entity) and those of live grants covering it.
func (a *connAuth) rights(entity string) sas.Rights {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.open {
		return sas.Manage.Effective()
	}
	var r sas.Rights
	if a.mu.plain && a.mu.rule.Covers(entity) {
		r |= a.mu.rule.Rights.Effective()
	}
	path := sas.NormalizePath(entity)
	now := a.now()
	for _, g := range a.mu.grants {
		if g.expires.After(now) && sas.Covers(g.path, path) {
			r |= g.rights.Effective()
		}
	}
	return r
}
