package namespace

import (
	"sync/atomic"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Namespace is one namespace: a broker over its key range, its rules and
// its clock. Its methods are safe for concurrent use.
type Namespace struct {
	reg     *Registry
	name    string
	id      uint64 // 0 for the default namespace
	broker  *core.Broker
	clk     *clock.Offset // nil unless the test clock is on
	created time.Time
	deleted chan struct{} // closed once the namespace is deleted

	// own holds the namespace's own rules (nil: the root rules apply) and
	// auth the validator built from the rules in force; both are replaced
	// together, under the registry's manage lock, by SetRules.
	own  atomic.Pointer[[]core.AuthorizationRule]
	auth atomic.Pointer[sas.Validator]
	// fixed, when set, is the only validator (Single): no aliases, no
	// entity rules. Nil with nilAuth means no authentication at all.
	fixed   *sas.Validator
	nilAuth bool
	// limits are the namespace's own limits (limits.go), replaced under
	// the registry's manage lock.
	limits atomic.Pointer[Limits]
}

// Name returns the namespace's name, lower case.
func (n *Namespace) Name() string { return n.name }

// Broker returns the namespace's broker.
func (n *Namespace) Broker() *core.Broker { return n.broker }

// IsDefault reports whether n is the default (first) namespace.
func (n *Namespace) IsDefault() bool { return n.id == 0 }

// Created returns when the namespace was created.
func (n *Namespace) Created() time.Time { return n.created }

// Deleted returns a channel closed once the namespace has been deleted.
func (n *Namespace) Deleted() <-chan struct{} { return n.deleted }

// Clock returns the namespace's test clock, nil when the registry runs
// without one.
func (n *Namespace) Clock() *clock.Offset { return n.clk }

// Now returns the namespace's current time (its broker's).
func (n *Namespace) Now() time.Time { return time.Unix(0, n.broker.Now()) }

// Rules returns the namespace's own authorization rules, nil when it has
// none and the root rules apply. The caller must not modify them.
func (n *Namespace) Rules() []core.AuthorizationRule {
	if p := n.own.Load(); p != nil {
		return *p
	}
	return nil
}

// AuthDisabled reports whether the namespace checks no credentials at
// all (a [Single] registry without a validator): every client may do
// everything.
func (n *Namespace) AuthDisabled() bool { return n.nilAuth }
