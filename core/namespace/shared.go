package namespace

import (
	"context"
	"errors"
	"reflect"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage/prefixstore"
)

// Shared keeps the records of a registry that several processes serve
// at once: a cluster with data groups keeps them in its meta group, so
// that every node sees the same namespaces, keys and limits. With
// Config.Shared set, Create, Delete, SetRules, SetLimits and Replace
// change the records through it (which decides, and arbitrates between
// processes), then publish the change in this registry; [Registry.Sync]
// takes the changes other processes made.
type Shared interface {
	// Create records a new namespace and returns its record with the id
	// it picked (never reused). It refuses a name in use
	// (core.ErrEntityExists) and a registry holding max namespaces, the
	// default one included (core.ErrQuotaExceeded). When it returns, a
	// Sync loads the new record.
	Create(ctx context.Context, rec Record, max int) (Record, error)
	// Update replaces the record of an existing namespace (ID 0: the
	// default one's). When it returns, a Sync loads it.
	Update(ctx context.Context, rec Record) error
	// Delete removes a namespace's record and, in time, everything in it.
	// When it returns, a Sync no longer loads it.
	Delete(ctx context.Context, rec Record) error
	// CatchUp returns once this registry holds every change acknowledged
	// anywhere before the call (it has Synced them), or ctx ends. Resolve
	// calls it, bounded and rate-limited (catchup.go), before refusing a
	// namespace it does not know.
	CatchUp(ctx context.Context) error
}

// Snapshot is what a [Shared] holds: the default namespace's record
// (nil: none written yet) and the others'.
type Snapshot struct {
	Default *Record
	Others  []Record
}

// errSharedClock refuses the test clock on a shared registry: each
// process runs its own clocks.
var errSharedClock = &core.Error{Code: core.CodeBadRequest,
	Msg: "A namespace's clock cannot be moved in a cluster with data groups: each node keeps its own clocks."}

// Sync makes the registry what load says (load runs under the lock that
// orders the registry's changes): it opens the namespaces it lacks,
// deletes those gone (or created again under a new id), as Delete does
// here, and takes the rules and limits of the others.
func (r *Registry) Sync(load func() (Snapshot, error)) error {
	r.manage.Lock()
	defer r.manage.Unlock()
	if err := r.writable(); err != nil {
		return err
	}
	snap, err := load()
	if err != nil {
		return err
	}
	var errs []error
	if snap.Default != nil {
		errs = append(errs, r.def.adopt(*snap.Default))
	}
	want := make(map[string]Record, len(snap.Others))
	for _, rec := range snap.Others {
		if rec.Name != r.def.name && rec.ID != 0 {
			want[rec.Name] = rec
		}
	}
	for _, ns := range r.List()[1:] {
		if rec, ok := want[ns.name]; !ok || rec.ID != ns.id {
			errs = append(errs, r.drop(ns))
		}
	}
	for name, rec := range want {
		if ns := r.lookup(name); ns != nil {
			errs = append(errs, ns.adopt(rec))
			continue
		}
		ns, err := r.open(rec, prefixstore.New(r.cfg.Store, dataPrefix(rec.ID)))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		r.mu.byName[name] = ns
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// adopt takes rec's rules and limits when they changed.
func (n *Namespace) adopt(rec Record) error {
	if len(rec.Rules) == 0 {
		rec.Rules = nil
	}
	if !reflect.DeepEqual(n.Rules(), rec.Rules) {
		if err := n.setRules(rec.Rules); err != nil {
			return err
		}
	}
	if n.OwnLimits() != rec.Limits {
		n.setLimits(rec.Limits)
	}
	return nil
}

// drop publishes the deletion of ns: it leaves the registry, the fronts
// are told (OnDelete) and its broker closed.
func (r *Registry) drop(ns *Namespace) error {
	r.mu.Lock()
	if r.mu.byName[ns.name] != ns {
		r.mu.Unlock()
		return nil // dropped already
	}
	delete(r.mu.byName, ns.name)
	listeners := append([]func(*Namespace){}, r.mu.onDelete...)
	r.mu.Unlock()
	close(ns.deleted)
	for _, f := range listeners {
		f(ns)
	}
	return ns.broker.CloseDeleted()
}

// createShared is Create on a shared registry: Shared picks the id and
// arbitrates, then the namespace opens here (unless a Sync opened it
// first).
func (r *Registry) createShared(ctx context.Context, rec Record) (*Namespace, error) {
	rec, err := r.cfg.Shared.Create(ctx, rec, r.cfg.MaxNamespaces)
	if err != nil {
		return nil, err
	}
	if ns := r.lookup(rec.Name); ns != nil {
		return ns, nil
	}
	ns, err := r.open(rec, prefixstore.New(r.cfg.Store, dataPrefix(rec.ID)))
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.mu.byName[rec.Name] = ns
	r.mu.Unlock()
	return ns, nil
}
