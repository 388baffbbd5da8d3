package namespace

import (
	"context"
	"fmt"
	"math"

	"github.com/omnibusmq/omnibus/core"
)

// Limits are a namespace's quotas, the ones Service Bus sets per
// namespace (its "quotas and limits" page):
//
//   - MaxEntities: queues and topics (subscriptions not counted); a
//     create past it is refused with core.ErrQuotaExceeded. Service Bus
//     Standard: 10,000.
//   - MaxConnections: concurrent AMQP connections bound to the namespace
//     (by the host they open with or their first credential), counted by
//     the AMQP front; REST requests are not connections, as on Service
//     Bus. Service Bus: 5,000.
//   - MaxEntityBytes: the most one queue or topic of the namespace
//     stores, below its MaxSizeInMegabytes (core.Limits.MaxEntityBytes,
//     --max-entity-size).
//
// In the limits a namespace was given (Namespace.OwnLimits, the record,
// Config.json, the API) zero means "the registry's default"
// (Config.Limits); in the limits in force (Namespace.Limits) and in the
// registry's defaults zero means no cap.
type Limits struct {
	MaxEntities    int   `json:",omitempty"`
	MaxConnections int   `json:",omitempty"`
	MaxEntityBytes int64 `json:",omitempty"`
}

// MaxLimit bounds every limit's value (MaxEntityBytes: in megabytes):
// large enough for any real cap, small enough that nothing overflows.
const MaxLimit = math.MaxInt32

// Validate refuses a negative limit or one above MaxLimit, with a
// core.ErrBadRequest that names it.
func (l Limits) Validate(owner string) error {
	for _, f := range []struct {
		name   string
		v, max int64
	}{
		{"MaxEntities", int64(l.MaxEntities), MaxLimit},
		{"MaxConnections", int64(l.MaxConnections), MaxLimit},
		{"MaxEntityBytes", l.MaxEntityBytes, MaxLimit << 20},
	} {
		if f.v < 0 || f.v > f.max {
			return &core.Error{Code: core.CodeBadRequest,
				Msg: fmt.Sprintf("%s: Limits.%s must be between 0 (the default) and %d, got %d.", owner, f.name, f.max, f.v)}
		}
	}
	return nil
}

// LimitsJSON is a namespace's "Limits" object as Config.json and the
// namespaces API (PUT /$namespaces/{name}) take it: each limit optional
// (left out: the registry's default) and, when given, from 1 to
// MaxLimit. The entity size is in megabytes, as an entity's
// MaxSizeInMegabytes.
type LimitsJSON struct {
	MaxEntities              *int64 `json:",omitempty"`
	MaxConnections           *int64 `json:",omitempty"`
	MaxEntitySizeInMegabytes *int64 `json:",omitempty"`
}

// LimitError is a limit of a LimitsJSON out of range: Field is its name.
type LimitError struct {
	Field string
	Value int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("Limits.%s must be between 1 and %d, got %d (leave it out for the default)", e.Field, MaxLimit, e.Value)
}

// Limits converts j, refusing a value out of range with a *LimitError.
func (j LimitsJSON) Limits() (Limits, error) {
	var l Limits
	for _, f := range []struct {
		name string
		v    *int64
		set  func(int64)
	}{
		{"MaxEntities", j.MaxEntities, func(v int64) { l.MaxEntities = int(v) }},
		{"MaxConnections", j.MaxConnections, func(v int64) { l.MaxConnections = int(v) }},
		{"MaxEntitySizeInMegabytes", j.MaxEntitySizeInMegabytes, func(v int64) { l.MaxEntityBytes = v << 20 }},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 || *f.v > MaxLimit {
			return Limits{}, &LimitError{Field: f.name, Value: *f.v}
		}
		f.set(*f.v)
	}
	return l, nil
}

// JSON returns l as the API shows it: every limit it sets (a zero field,
// no cap or the default, is left out); an entity size that is not a
// whole number of megabytes is rounded down (at least 1).
func (l Limits) JSON() LimitsJSON {
	var j LimitsJSON
	if l.MaxEntities > 0 {
		v := int64(l.MaxEntities)
		j.MaxEntities = &v
	}
	if l.MaxConnections > 0 {
		v := int64(l.MaxConnections)
		j.MaxConnections = &v
	}
	if l.MaxEntityBytes > 0 {
		v := max(l.MaxEntityBytes>>20, 1)
		j.MaxEntitySizeInMegabytes = &v
	}
	return j
}

// over returns l with the fields it leaves zero taken from def.
func (l Limits) over(def Limits) Limits {
	if l.MaxEntities == 0 {
		l.MaxEntities = def.MaxEntities
	}
	if l.MaxConnections == 0 {
		l.MaxConnections = def.MaxConnections
	}
	if l.MaxEntityBytes == 0 {
		l.MaxEntityBytes = def.MaxEntityBytes
	}
	return l
}

// OwnLimits returns the limits the namespace was given; a zero field
// takes the registry's default.
func (n *Namespace) OwnLimits() Limits {
	if p := n.limits.Load(); p != nil {
		return *p
	}
	return Limits{}
}

// Limits returns the limits in force: the namespace's own over the
// registry's defaults. A zero field means no cap.
func (n *Namespace) Limits() Limits {
	return n.OwnLimits().over(n.reg.cfg.Limits)
}

// setLimits makes own the namespace's limits and hands the broker's
// share to it.
func (n *Namespace) setLimits(own Limits) {
	n.limits.Store(&own)
	if n.broker != nil {
		eff := n.Limits()
		n.broker.SetQuotas(eff.MaxEntities, eff.MaxEntityBytes)
	}
}

// SetLimits replaces a namespace's own limits (a zero field: the
// registry's default). The new caps hold for what follows: entities,
// connections and messages already there stay.
func (r *Registry) SetLimits(ctx context.Context, name string, limits Limits) (*Namespace, error) {
	r.manage.Lock()
	defer r.manage.Unlock()
	ns, err := r.Get(name)
	if err != nil {
		return nil, err
	}
	if err := limits.Validate("namespace '" + ns.name + "'"); err != nil {
		return nil, err
	}
	rec := ns.Record()
	rec.Limits = limits
	if err := r.write(ns, rec); err != nil {
		return nil, err
	}
	ns.setLimits(limits)
	return ns, nil
}

// Replace replaces a namespace's own rules and limits in one write, as
// PUT /$namespaces/{name} with If-Match does: SetRules and SetLimits at
// once.
func (r *Registry) Replace(ctx context.Context, name string, rules []core.AuthorizationRule, limits Limits) (*Namespace, error) {
	rules = append([]core.AuthorizationRule(nil), rules...)
	r.manage.Lock()
	defer r.manage.Unlock()
	ns, err := r.Get(name)
	if err != nil {
		return nil, err
	}
	if err := core.ValidateAuthorizationRules("namespace '"+ns.name+"'", rules); err != nil {
		return nil, err
	}
	if err := limits.Validate("namespace '" + ns.name + "'"); err != nil {
		return nil, err
	}
	rec := ns.Record()
	rec.Rules, rec.Limits = rules, limits
	if err := r.write(ns, rec); err != nil {
		return nil, err
	}
	ns.setLimits(limits)
	return ns, ns.setRules(rules)
}
