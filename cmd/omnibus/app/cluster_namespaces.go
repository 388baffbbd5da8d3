package app

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/prefixstore"
)

// Namespaces in a cluster with data groups (DESIGN.md, "Several Raft
// groups"). The registry's records (names, ids, rules, limits) live in
// the meta group, written by its leader alone, which arbitrates
// (sharedRegistry, namespaceRequest); every node's registry follows its
// copy of the meta group (syncNamespacesLoop), so a namespace created
// through one node is served, with its own keys, by all. Each
// namespace's queues and topics are placed over the data groups as the
// default namespace's are, under placement names qualified by the
// namespace's id (qualify), and live in the data group under the
// namespace's key range (namespace.DataPrefix), served by a broker of
// their own on the group's leader (groupBroker).
//
// Meta group keys, beside the placements ('P'):
//
//	'C'              → the next namespace id (uint64), never reused
//	'D'              → the default namespace's record (JSON)
//	'N' name         → a namespace's record (JSON)
//	'M' id:8         → its name, while it lives (placements check it)
//	'X' id:8         → its name, from its deletion until every data group
//	                   dropped its key range and its placements are gone

// Keys of the namespace registry in the meta group.
const (
	nsNextIDKey     = "C"
	nsDefaultKey    = "D"
	nsRecordPrefix  = "N"
	nsLivePrefix    = "M"
	nsDeletedPrefix = "X"
)

// Namespace requests (metaRequest.Op).
const (
	metaNSCreate = "ns-create"
	metaNSUpdate = "ns-update"
	metaNSDelete = "ns-delete"
	metaNSDrop   = "ns-drop" // to a data group's leader: drop a namespace's key range
)

// nsSyncInterval is how often a node looks whether its copy of the meta
// group moved without being told (syncNamespacesLoop is told of every
// move; this catches one it let pass while held).
const nsSyncInterval = time.Second

// nsSyncGap is the least time between two syncs of the namespaces.
const nsSyncGap = 50 * time.Millisecond

// nsReapInterval is how often the meta leader finishes the deletions of
// namespaces some data group could not drop at once.
const nsReapInterval = 2 * time.Second

func nsRecordKey(name string) []byte { return []byte(nsRecordPrefix + name) }

func nsIDKey(prefix string, id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefix), id)
}

// namespacePlacements is the start of the placements of namespace ns's
// queues and topics: "P", a zero byte (no entity name starts with one),
// the id.
func namespacePlacements(ns uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(placementPrefix+"\x00"), ns)
}

// qualify is the placement name of the queue or topic name of namespace
// ns: name itself in the default namespace (0), else a zero byte, the
// id, a zero byte, name.
func qualify(ns uint64, name string) string {
	if ns == 0 {
		return name
	}
	return "\x00" + strconv.FormatUint(ns, 10) + "\x00" + name
}

// unqualify splits a placement name.
func unqualify(q string) (ns uint64, name string) {
	if !strings.HasPrefix(q, "\x00") {
		return 0, q
	}
	id, name, ok := strings.Cut(q[1:], "\x00")
	if !ok {
		return 0, q
	}
	ns, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return 0, q
	}
	return ns, name
}

// displayName is a placement name as logs show it: "q" in the default
// namespace, "q (namespace 7)" in another.
func displayName(q string) string {
	if ns, name := unqualify(q); ns != 0 {
		return name + " (namespace " + strconv.FormatUint(ns, 10) + ")"
	}
	return q
}

// groupTarget is the group a call between nodes names (clusterrpc):
// data group g (below 256, raftstore.MaxGroups) of namespace ns.
func groupTarget(g, ns uint64) uint64 { return ns<<8 | g }

// splitTarget splits a groupTarget.
func splitTarget(t uint64) (g, ns uint64) { return t & 0xff, t >> 8 }

// namespaceLive refuses, on the meta leader, a new placement in a
// namespace that does not exist (deleted, or being deleted).
func namespaceLive(sess interface{ Get([]byte) ([]byte, error) }, name string) error {
	ns, _ := unqualify(name)
	if ns == 0 {
		return nil
	}
	switch _, err := sess.Get(nsIDKey(nsLivePrefix, ns)); {
	case errors.Is(err, storage.ErrNotFound):
		return &core.Error{Code: core.CodeNotFound, Msg: "The namespace of this entity has been deleted."}
	case err != nil:
		return &core.Error{Code: core.CodeServerBusy, Msg: "reading the namespace registry: " + err.Error()}
	}
	return nil
}

// routerFor is the router of namespace name's routed broker (Options.router).
func (r *routed) routerFor(name string) core.Router {
	if r.isDefault(name) {
		return r
	}
	v, err := r.meta.ReadReplica(nsRecordKey(strings.ToLower(name)))
	var rec namespace.Record
	if err == nil {
		err = json.Unmarshal(v, &rec)
	}
	if err != nil || rec.ID == 0 {
		// Sync opens only what the replica holds: not reached.
		r.log.Warn("a namespace opened that the meta group does not hold", zap.String("namespace", name), zap.Error(err))
	}
	return &nsRouter{r: r, ns: rec.ID}
}

// isDefault reports whether name is the default namespace's.
func (r *routed) isDefault(name string) bool {
	r.mu.Lock()
	home := r.home
	r.mu.Unlock()
	return home == nil || strings.EqualFold(name, home.Namespace())
}

// nsRouter is the core.GroupRouter of a namespace other than the default
// one: placements qualified by its id, brokers over its key ranges.
type nsRouter struct {
	r    *routed
	ns   uint64
	self atomic.Pointer[core.Broker] // the namespace's routed broker, found at first use
}

func (n *nsRouter) home() *core.Broker {
	if b := n.self.Load(); b != nil {
		return b
	}
	b := n.r.namespaceHome(n.ns)
	n.self.Store(b)
	return b
}

// Route implements core.Router.
func (n *nsRouter) Route(name string) (core.Backend, error) {
	g, err := n.r.groupOf(n.r.cl.ctx, qualify(n.ns, name), false)
	if err != nil {
		return nil, err
	}
	if g == 0 {
		if n.r.configPending(name) {
			return nil, errConfigPending(name)
		}
		return nil, &core.Error{Code: core.CodeNotFound, Msg: fmt.Sprintf("The messaging entity '%s' could not be found.", name)}
	}
	be, err := n.r.backendIn(g, n.ns, n.home())
	return n.r.pendingIfConfig(be, err, name)
}

// Place implements core.Router.
func (n *nsRouter) Place(ctx context.Context, name string) (core.Backend, error) {
	return n.PlaceIn(ctx, name, 0)
}

// Group implements core.GroupRouter.
func (n *nsRouter) Group(ctx context.Context, name string) (uint64, error) {
	return n.r.groupOf(ctx, qualify(n.ns, name), false)
}

// PlaceIn implements core.GroupRouter.
func (n *nsRouter) PlaceIn(ctx context.Context, name string, g uint64) (core.Backend, error) {
	q := qualify(n.ns, name)
	g, err := n.r.groupOrPlace(ctx, q, g, true)
	if err != nil {
		return nil, err
	}
	be, err := n.r.backendIn(g, n.ns, n.home())
	if err != nil {
		return nil, err
	}
	return placedBackend{Backend: be, r: n.r, name: q, g: g}, nil
}

// All implements core.Router.
func (n *nsRouter) All() ([]core.Backend, error) {
	var out []core.Backend
	for g := uint64(1); g <= uint64(n.r.meta.DataGroups()); g++ {
		be, err := n.r.backendIn(g, n.ns, n.home())
		if err != nil {
			return nil, err
		}
		out = append(out, be)
	}
	return out, nil
}

// Local implements core.Router.
func (n *nsRouter) Local() []core.Backend {
	n.r.mu.Lock()
	groups := make([]*localGroup, 0, len(n.r.local))
	for _, lg := range n.r.local {
		groups = append(groups, lg)
	}
	n.r.mu.Unlock()
	var out []core.Backend
	for _, lg := range groups {
		lg.spaces.Lock()
		if b := lg.spaces.by[n.ns]; b != nil {
			out = append(out, b)
		}
		lg.spaces.Unlock()
	}
	return out
}

var _ core.GroupRouter = (*nsRouter)(nil)

// namespaces is the routed App's registry, nil before it started.
func (r *routed) namespaces() *namespace.Registry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registry
}

// namespaceHome is the routed broker of namespace ns on this node (nil
// when its registry does not hold it).
func (r *routed) namespaceHome(ns uint64) *core.Broker {
	reg := r.namespaces()
	if reg == nil {
		return nil
	}
	for _, n := range reg.List() {
		if n.Record().ID == ns {
			return n.Broker()
		}
	}
	return nil
}

// namespaceName is the name of live namespace ns in this node's copy of
// the meta group.
func (r *routed) namespaceName(ns uint64) (string, bool) {
	v, err := r.meta.ReadReplica(nsIDKey(nsLivePrefix, ns))
	if err != nil {
		return "", false
	}
	return string(v), true
}

// groupBroker returns the broker of namespace ns in data group g, which
// this node leads (lg): the group's own for the default namespace, else
// one over the namespace's key range of the group's Session, opened at
// its first use (or when the node starts leading the group).
func (r *routed) groupBroker(lg *localGroup, g, ns uint64) (*core.Broker, error) {
	if ns == 0 {
		return lg.b, nil
	}
	lg.spaces.Lock()
	defer lg.spaces.Unlock()
	if b := lg.spaces.by[ns]; b != nil {
		return b, nil
	}
	if lg.spaces.closed {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: fmt.Sprintf("the entity's group (%d) is changing leaders; retry", g)}
	}
	name, ok := r.namespaceName(ns)
	if !ok || lg.spaces.dropped[ns] {
		return nil, &core.Error{Code: core.CodeNotFound, Msg: "The namespace of this entity does not exist (or not yet on this node)."}
	}
	o := r.cl.opts
	b, err := core.New(core.Config{Store: prefixstore.New(lg.sess, namespace.DataPrefix(ns)), Clock: o.Clock,
		Logger: o.Logger.Named("core").With(zap.Uint64("group", g), zap.String("namespace", name)), Namespace: name,
		Faults: o.Faults, Limits: o.Limits, Stats: true, TxnTimeout: o.TxnTimeout, PartitionCount: o.PartitionCount,
		Deleted:   func(ctx context.Context, entity string) { r.deleted(ctx, qualify(ns, entity), g) },
		Transfers: r.transferConfig(g, ns)})
	if err != nil {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "opening the namespace's broker: " + err.Error()}
	}
	if lg.spaces.by == nil {
		lg.spaces.by = map[uint64]*core.Broker{}
		lg.spaces.stopPumps = map[uint64]context.CancelFunc{}
	}
	lg.spaces.by[ns] = b
	lg.spaces.stopPumps[ns] = r.pumpNamespace(lg, g, ns, b)
	r.applyQuotas(b, name)
	return b, nil
}

// openSpaces opens, on a node that starts leading data group g, the
// brokers of every namespace its copy of the meta group holds, so that
// their timers (scheduled messages, expiry, auto-delete) run.
func (r *routed) openSpaces(lg *localGroup, g uint64) {
	var ids []uint64
	_ = r.meta.ScanReplica([]byte(nsLivePrefix), func(k, _ []byte) (bool, error) {
		if len(k) == 1+8 {
			ids = append(ids, binary.BigEndian.Uint64(k[1:]))
		}
		return true, nil
	})
	for _, ns := range ids {
		if _, err := r.groupBroker(lg, g, ns); err != nil {
			r.log.Warn("cannot serve a namespace in a data group this node leads", zap.Uint64("group", g), zap.Uint64("namespace", ns), zap.Error(err))
		}
	}
	r.applyQuotas(lg.b, "")
}

// closeSpaces closes the namespaces' brokers of a group no longer led.
func (lg *localGroup) closeSpaces() {
	lg.spaces.Lock()
	lg.spaces.closed = true
	by := lg.spaces.by
	lg.spaces.by = nil
	lg.spaces.Unlock()
	for _, b := range by {
		b.Close()
	}
}

// syncNamespaces brings reg in line with this node's copy of the meta
// group.
func (r *routed) syncNamespaces(reg *namespace.Registry) {
	if err := reg.Sync(r.loadNamespaces); err != nil {
		r.log.Warn("taking the namespaces' changes from the meta group", zap.Error(err))
	}
	r.refreshQuotas()
}

// applyQuotas gives b, a broker of namespace name in a data group, the
// namespace's limits in force (its own, else the process's): each group
// caps what it holds, MaxEntities the namespace's queues and topics there
// and MaxEntityBytes each one's size.
// An empty name is the default namespace's.
func (r *routed) applyQuotas(b *core.Broker, name string) {
	reg := r.namespaces()
	if reg == nil {
		return
	}
	n := reg.Default()
	if name != "" {
		var err error
		if n, err = reg.Get(name); err != nil {
			return // not in this node's registry yet: its next Sync applies them
		}
	}
	l := n.Limits()
	b.SetQuotas(l.MaxEntities, l.MaxEntityBytes)
}

// refreshQuotas gives every broker of the data groups this node leads
// its namespace's limits in force, as this node's registry has them now.
func (r *routed) refreshQuotas() {
	r.mu.Lock()
	groups := make([]*localGroup, 0, len(r.local))
	for _, lg := range r.local {
		groups = append(groups, lg)
	}
	r.mu.Unlock()
	for _, lg := range groups {
		r.applyQuotas(lg.b, "")
		lg.spaces.Lock()
		for _, b := range lg.spaces.by {
			r.applyQuotas(b, b.Namespace())
		}
		lg.spaces.Unlock()
	}
}

// syncNamespacesLoop runs syncNamespaces whenever this node's copy of
// the meta group moved, until the node stops. It waits for the copy to
// move (an idle cluster wakes it not at all) and looks every
// nsSyncInterval besides, for a move it let pass while holdSync was set.
func (r *routed) syncNamespacesLoop(reg *namespace.Registry) {
	t := time.NewTicker(nsSyncInterval)
	defer t.Stop()
	last := r.meta.Applied()
	for {
		moved := r.meta.AppliedMoved()
		if now := r.meta.Applied(); now != last && !r.holdSync.Load() {
			last = now
			r.syncNamespaces(reg)
			// At most one sync per nsSyncGap: a burst of the meta
			// group's writes (a config file's entities placed) is
			// taken in a few.
			select {
			case <-r.cl.ctx.Done():
				return
			case <-time.After(nsSyncGap):
			}
			continue
		}
		select {
		case <-r.cl.ctx.Done():
			return
		case <-moved:
		case <-t.C:
		}
	}
}

// loadNamespaces reads the registry's records from this node's copy of
// the meta group.
func (r *routed) loadNamespaces() (namespace.Snapshot, error) {
	var snap namespace.Snapshot
	if v, err := r.meta.ReadReplica([]byte(nsDefaultKey)); err == nil {
		var rec namespace.Record
		if err := json.Unmarshal(v, &rec); err != nil {
			return snap, fmt.Errorf("the default namespace's record: %w", err)
		}
		snap.Default = &rec
	} else if !errors.Is(err, storage.ErrNotFound) {
		return snap, err
	}
	err := r.meta.ScanReplica([]byte(nsRecordPrefix), func(k, v []byte) (bool, error) {
		var rec namespace.Record
		if err := json.Unmarshal(v, &rec); err != nil {
			return false, fmt.Errorf("the record of namespace %q: %w", k[1:], err)
		}
		snap.Others = append(snap.Others, rec)
		return true, nil
	})
	return snap, err
}
