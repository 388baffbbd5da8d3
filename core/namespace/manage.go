package namespace

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/prefixstore"
)

// Changes at run time. Each decides, then commits one synced batch, then
// publishes: a change the store refuses leaves memory as it was.

// Create creates a namespace named name with its own rules (none: the
// root rules apply) and the registry's default limits. It refuses an
// invalid name or rules (core.ErrBadRequest), a name in use
// (core.ErrEntityExists) and a namespace past MaxNamespaces
// (core.ErrQuotaExceeded).
func (r *Registry) Create(ctx context.Context, name string, rules []core.AuthorizationRule) (*Namespace, error) {
	return r.CreateWithLimits(ctx, name, rules, Limits{})
}

// CreateWithLimits is Create for a namespace with limits of its own (a
// zero field: the registry's default); invalid limits are a
// core.ErrBadRequest.
func (r *Registry) CreateWithLimits(ctx context.Context, name string, rules []core.AuthorizationRule, limits Limits) (*Namespace, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	name = strings.ToLower(name)
	rules = append([]core.AuthorizationRule(nil), rules...)
	if err := core.ValidateAuthorizationRules("namespace '"+name+"'", rules); err != nil {
		return nil, err
	}
	if err := limits.Validate("namespace '" + name + "'"); err != nil {
		return nil, err
	}
	r.manage.Lock()
	defer r.manage.Unlock()
	if err := r.writable(); err != nil {
		return nil, err
	}
	if r.lookup(name) != nil {
		return nil, &core.Error{Code: core.CodeEntityExists, Msg: "The namespace '" + name + "' already exists."}
	}
	if n := r.Len(); n >= r.cfg.MaxNamespaces {
		return nil, &core.Error{Code: core.CodeQuotaExceeded,
			Msg: "The maximum number of namespaces (" + strconv.Itoa(r.cfg.MaxNamespaces) + ") has been reached; delete one first."}
	}
	rec := Record{ID: r.nextID, Name: name, Created: r.cfg.Clock.Now().UTC(), Rules: rules, Limits: limits}
	if r.cfg.Shared != nil {
		return r.createShared(ctx, rec)
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	b := storage.Batch{Sync: true}
	b.Set(keyNextID, binary.BigEndian.AppendUint64(nil, rec.ID+1))
	b.Set(recordKey(name), v)
	if err := r.cfg.Store.Apply(&b); err != nil {
		return nil, storeError(err)
	}
	r.nextID++
	ns, err := r.open(rec, prefixstore.New(r.cfg.Store, dataPrefix(rec.ID)))
	if err != nil {
		// The record is durable: the namespace opens at the next start.
		return nil, err
	}
	r.mu.Lock()
	r.mu.byName[name] = ns
	r.mu.Unlock()
	return ns, nil
}

// Delete deletes a namespace with everything in it: its record and its
// whole key range go in one synced batch, then its broker is closed and
// the fronts told (OnDelete). The default namespace cannot be deleted
// (core.ErrBadRequest); an unknown one is core.ErrNotFound.
func (r *Registry) Delete(ctx context.Context, name string) error {
	r.manage.Lock()
	defer r.manage.Unlock()
	if err := r.writable(); err != nil {
		return err
	}
	ns, err := r.Get(name)
	if err != nil {
		return err
	}
	if ns.IsDefault() {
		return &core.Error{Code: core.CodeBadRequest, Msg: "The default namespace '" + ns.name + "' cannot be deleted."}
	}
	if r.cfg.Shared != nil {
		if err := r.cfg.Shared.Delete(ctx, ns.Record()); err != nil {
			return err
		}
		return r.drop(ns)
	}
	b := storage.Batch{Sync: true}
	b.Delete(recordKey(ns.name))
	b.DeletePrefix(dataPrefix(ns.id))
	if err := r.cfg.Store.Apply(&b); err != nil {
		return storeError(err)
	}
	return r.drop(ns)
}

// SetRules replaces a namespace's own rules (none: the root rules apply
// again). Tokens are checked against the new rules at once; links
// attached on a token signed with a key that is gone keep working until
// that token expires, as on Service Bus.
func (r *Registry) SetRules(ctx context.Context, name string, rules []core.AuthorizationRule) (*Namespace, error) {
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
	rec := ns.Record()
	rec.Rules = rules
	if err := r.write(ns, rec); err != nil {
		return nil, err
	}
	return ns, ns.setRules(rules)
}

// AdvanceClock moves a namespace's clock forward by d: what falls due
// (scheduled messages, expiries, lock and session lock lapses,
// auto-delete) happens before it returns. It returns the namespace's new
// time. A negative d is a core.ErrBadRequest and changes nothing; without
// the test clock it returns ErrTestClockOff.
func (r *Registry) AdvanceClock(ctx context.Context, name string, d time.Duration) (time.Time, error) {
	if !r.cfg.TestClock {
		return time.Time{}, ErrTestClockOff
	}
	if d < 0 {
		return time.Time{}, &core.Error{Code: core.CodeBadRequest,
			Msg: "A namespace's clock only moves forward; " + d.String() + " would move it back."}
	}
	r.manage.Lock()
	defer r.manage.Unlock()
	ns, err := r.Get(name)
	if err != nil {
		return time.Time{}, err
	}
	rec := ns.Record()
	rec.Ahead += d
	if err := r.write(ns, rec); err != nil {
		return time.Time{}, err
	}
	if err := ns.clk.Advance(d); err != nil {
		return time.Time{}, err
	}
	return ns.Now(), nil
}

// DeliverScheduled makes scheduled messages of a queue or topic of a
// namespace available now (core.Broker.ActivateScheduled). Like
// AdvanceClock it needs the test clock.
func (r *Registry) DeliverScheduled(ctx context.Context, name, entity string, seqs []int64) (int, error) {
	if !r.cfg.TestClock {
		return 0, ErrTestClockOff
	}
	ns, err := r.Get(name)
	if err != nil {
		return 0, err
	}
	return ns.broker.ActivateScheduled(ctx, entity, seqs)
}

// Record returns the persisted form of ns as it is now.
func (ns *Namespace) Record() Record {
	rec := Record{ID: ns.id, Name: ns.name, Created: ns.created, Rules: ns.Rules(), Limits: ns.OwnLimits()}
	if ns.clk != nil {
		rec.Ahead = ns.clk.Ahead()
	}
	return rec
}

// write stores rec as ns's record.
func (r *Registry) write(ns *Namespace, rec Record) error {
	if r.cfg.Shared != nil {
		if rec.Ahead != ns.Record().Ahead {
			return errSharedClock
		}
		return r.cfg.Shared.Update(context.Background(), rec)
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	key := recordKey(ns.name)
	if ns.IsDefault() {
		key = keyDefault
	}
	b := storage.Batch{Sync: true}
	b.Set(key, v)
	if err := r.cfg.Store.Apply(&b); err != nil {
		return storeError(err)
	}
	return nil
}

// writable refuses changes on a registry without a store (Single) or
// closed.
func (r *Registry) writable() error {
	if r.cfg.Store == nil {
		return &core.Error{Code: core.CodeBadRequest, Msg: "This server has one namespace; namespaces cannot be created or deleted."}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.mu.closed {
		return core.ErrClosed
	}
	return nil
}

// storeError is a store's refusal as the core reports one: server busy,
// so clients retry.
func storeError(err error) error {
	return &core.Error{Code: core.CodeServerBusy, Msg: "The namespace registry could not be written: " + err.Error()}
}
