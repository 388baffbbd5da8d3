package app

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage"
)

// Partitioned queues and topics spread over the data groups
// (core.SpreadRouter; core/route_spread.go). When a partitioned queue or
// topic that forwards nowhere is created in a cluster of two or more data
// groups, the meta leader deals its partitions round the groups,
// starting with the group with the fewest placements, and records that
// (a spread record, below) together with the entity's placement record
// (its partition 0's group) in one write: a node whose replica of the
// meta group holds the placement holds the spread too, so finding the
// placement without a spread means "not spread".

// spreadPrefix starts the meta group's spread records: the lower-case
// name of a partitioned queue or topic, then its core.Spread as JSON.
const spreadPrefix = "S"

// spreadKey is the meta group's record of name's spread; name is
// qualified by its namespace (qualify) unless it is the default one's,
// and its record then starts with namespaceSpreads, as placementKey's
// with namespacePlacements.
func spreadKey(name string) []byte {
	if ns, n := unqualify(name); ns != 0 {
		return append(namespaceSpreads(ns), strings.ToLower(n)...)
	}
	return []byte(spreadPrefix + strings.ToLower(name))
}

// namespaceSpreads is the start of the spreads of namespace ns's queues
// and topics: "S", a zero byte, the id.
func namespaceSpreads(ns uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(spreadPrefix+"\x00"), ns)
}

// decodeSpread reads a spread record.
func decodeSpread(v []byte) (*core.Spread, error) {
	var sp core.Spread
	if err := json.Unmarshal(v, &sp); err != nil || len(sp.Groups) == 0 {
		return nil, &core.Error{Code: core.CodeInternal, Msg: "a spread record of the meta group does not decode"}
	}
	return &sp, nil
}

// Spread implements core.SpreadRouter.
func (r *routed) Spread(ctx context.Context, name string) (*core.Spread, error) {
	// A spread is recorded with its placement: placed without one is
	// placed whole (nil).
	if p, ok := r.placeOf(name); ok {
		return p.spread, nil
	}
	if v, err := r.meta.ReadReplica(spreadKey(name)); err == nil {
		return decodeSpread(v) // a spread record that does not decode
	}
	return r.spreadOrPlace(ctx, name, 0, false, false)
}

// PlaceSpread implements core.SpreadRouter.
func (r *routed) PlaceSpread(ctx context.Context, name string, n int, dupKeys bool) (*core.Spread, error) {
	if r.meta.DataGroups() < 2 {
		return nil, nil
	}
	return r.spreadOrPlace(ctx, name, n, dupKeys, true)
}

// GroupBackend implements core.SpreadRouter.
func (r *routed) GroupBackend(g uint64) (core.Backend, error) { return r.backend(g) }

// spreadOrPlace asks the meta leader for name's spread (metaSpread).
func (r *routed) spreadOrPlace(ctx context.Context, name string, n int, dupKeys, create bool) (*core.Spread, error) {
	a, err := r.callMeta(ctx, metaRequest{Op: metaSpread, Name: name, Parts: n, DupKeys: dupKeys, Create: create})
	if err != nil {
		return nil, err
	}
	return a.Spread, nil
}

// placeSpread answers a metaSpread request on the meta leader: name's
// spread, dealt and recorded now if name has no place and create is set;
// nil when name is not spread.
func (r *routed) placeSpread(name string, n int, dupKeys, create bool) (*core.Spread, error) {
	r.mu.Lock()
	sess := r.metaSess
	r.mu.Unlock()
	if sess == nil {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "the meta group has no leader serving now (an election is under way); retry"}
	}
	r.placeMu.Lock()
	defer r.placeMu.Unlock()
	if v, err := sess.Get(spreadKey(name)); err == nil {
		return decodeSpread(v)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "reading the spread: " + err.Error()}
	}
	if _, err := sess.Get(placementKey(name)); err == nil {
		return nil, nil // placed whole
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "reading the placement: " + err.Error()}
	}
	groups := r.meta.DataGroups()
	if !create || groups < 2 || n < 1 || n > core.MaxPartitionCount {
		return nil, nil
	}
	if err := namespaceLive(sess, name); err != nil {
		return nil, err
	}
	if err := r.checkEntityCount(sess, name); err != nil {
		return nil, err
	}
	sp := dealPartitions(n, groups, r.leastPlaced(sess), dupKeys)
	v, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	b := &storage.Batch{Sync: true}
	b.Set(spreadKey(name), v)
	b.Set(placementKey(name), binary.BigEndian.AppendUint64(nil, sp.Groups[0]))
	if err := sess.Apply(b); err != nil {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "recording the spread: " + err.Error()}
	}
	r.log.Info("spread a partitioned queue or topic over the data groups", zap.String("name", displayName(name)), zap.Uint64s("groups", sp.Groups))
	return sp, nil
}

// dealPartitions deals n partitions round data groups 1..groups, partition
// 0 to group first.
func dealPartitions(n, groups int, first uint64, dupKeys bool) *core.Spread {
	sp := &core.Spread{Groups: make([]uint64, n), DupKeys: dupKeys}
	for p := range sp.Groups {
		sp.Groups[p] = (first-1+uint64(p))%uint64(groups) + 1
	}
	return sp
}

// Spread implements core.SpreadRouter in namespace n.
func (n *nsRouter) Spread(ctx context.Context, name string) (*core.Spread, error) {
	return n.r.Spread(ctx, qualify(n.ns, name))
}

// PlaceSpread implements core.SpreadRouter in namespace n.
func (n *nsRouter) PlaceSpread(ctx context.Context, name string, parts int, dupKeys bool) (*core.Spread, error) {
	return n.r.PlaceSpread(ctx, qualify(n.ns, name), parts, dupKeys)
}

// GroupBackend implements core.SpreadRouter in namespace n.
func (n *nsRouter) GroupBackend(g uint64) (core.Backend, error) {
	return n.r.backendIn(g, n.ns, n.home())
}

var (
	_ core.SpreadRouter = (*routed)(nil)
	_ core.SpreadRouter = (*nsRouter)(nil)
)
