package app

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/storage"
)

// Placements follow deletion (DESIGN.md, "Several Raft groups"): once a
// queue or topic is deleted its placement record goes, so that a name
// created again is placed afresh (the data group with the fewest, or
// that of the entities it forwards to).
//
// A create and a delete of one name may race on different nodes, and the
// create in a data group is not atomic with the placement in the meta
// group. The meta leader arbitrates, under placeMu, with two rules that
// keep "an entity that exists in group g is placed in g" true:
//
//   - forget (after a delete, on the deleting group's leader): the
//     placement goes only if it still names g and g's leader, asked
//     while placeMu is held, says the entity is not there;
//   - confirm (after a create, on the creating node): the placement is
//     recorded again if a forget removed it meanwhile; if another group
//     took the name meanwhile (a create placed there after the forget),
//     the create lost the race: what it made is deleted and the client
//     told the entity exists.
//
// A create that lands in g after forget's check runs its confirm after
// forget (placeMu), which restores the placement; one that landed before
// is seen by the check, which keeps it.

// Meta requests other than placements (clusterrpc.Meta), JSON-encoded.
const (
	metaForget  = "forget"
	metaConfirm = "confirm"
	metaSpread  = "spread"  // cluster_spread.go
	metaApplied = "applied" // cluster_nscatchup.go
)

// metaRequest is a request to the meta leader (or, ns-drop, to a data
// group's leader).
type metaRequest struct {
	Op    string
	Name  string `json:",omitempty"` // the queue or topic (placement name)
	Group uint64 `json:",omitempty"`

	// metaSpread: the partitions of a new partitioned entity, whether it
	// detects duplicates, whether to spread it if it has no place.
	Parts   int  `json:",omitempty"`
	DupKeys bool `json:",omitempty"`
	Create  bool `json:",omitempty"`

	// The namespace requests' (cluster_namespaces.go).
	NS     uint64            `json:",omitempty"`
	Record *namespace.Record `json:",omitempty"`
	Max    int               `json:",omitempty"`
}

// metaAnswer is the meta leader's answer.
type metaAnswer struct {
	Group uint64 `json:",omitempty"` // confirm: the group that holds the name, when not the caller's
	// Spread answers metaSpread: nil when the name is not spread.
	Spread *core.Spread      `json:",omitempty"`
	Record *namespace.Record `json:",omitempty"` // ns-create: the record made
	// Applied answers metaApplied: how far the meta leader has applied.
	Applied uint64 `json:",omitempty"`
}

// unplaceTimeout bounds the forgetting of a deleted entity's placement
// (a call to the meta leader, which asks the data group): the delete is
// done whatever comes of it.
const unplaceTimeout = 5 * time.Second

// callMeta sends req to the meta leader: this node, or a call to it.
func (r *routed) callMeta(ctx context.Context, req metaRequest) (metaAnswer, error) {
	leader := r.meta.Leader()
	switch leader {
	case 0:
		return metaAnswer{}, &core.Error{Code: core.CodeServerBusy, Msg: "the meta group has no leader now (an election is under way); retry"}
	case r.meta.ID():
		return r.metaRequest(ctx, req)
	}
	return r.callNode(ctx, leader, req)
}

// callNode sends req to node id.
func (r *routed) callNode(ctx context.Context, id uint64, req metaRequest) (metaAnswer, error) {
	c, err := r.client(id)
	if err != nil {
		return metaAnswer{}, err
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return metaAnswer{}, err
	}
	ans, err := c.Meta(ctx, raw)
	if err != nil {
		return metaAnswer{}, err
	}
	var a metaAnswer
	if err := json.Unmarshal(ans, &a); err != nil {
		return metaAnswer{}, fmt.Errorf("the meta leader's answer: %w", err)
	}
	return a, nil
}

// answerMeta implements clusterrpc.Meta on the meta leader.
func (r *routed) answerMeta(ctx context.Context, raw []byte) ([]byte, error) {
	var req metaRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, &core.Error{Code: core.CodeBadRequest, Msg: "a malformed request to the meta leader: " + err.Error()}
	}
	a, err := r.metaRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(a)
}

// metaRequest carries out req on the meta leader.
func (r *routed) metaRequest(ctx context.Context, req metaRequest) (metaAnswer, error) {
	switch req.Op {
	case metaForget:
		return metaAnswer{}, r.forget(ctx, req.Name, req.Group)
	case metaConfirm:
		g, err := r.confirm(req.Name, req.Group)
		return metaAnswer{Group: g}, err
	case metaSpread:
		sp, err := r.placeSpread(req.Name, req.Parts, req.DupKeys, req.Create)
		return metaAnswer{Spread: sp}, err
	case metaNSCreate, metaNSUpdate, metaNSDelete, metaNSDrop:
		return r.namespaceRequest(ctx, req)
	case metaApplied:
		return r.answerApplied()
	}
	return metaAnswer{}, &core.Error{Code: core.CodeBadRequest, Msg: "an unknown request to the meta leader: " + req.Op}
}

// metaSession is the meta group's Session while this node leads it.
func (r *routed) metaSession() (interface {
	Get([]byte) ([]byte, error)
	Apply(*storage.Batch) error
}, error) {
	r.mu.Lock()
	sess := r.metaSess
	r.mu.Unlock()
	if sess == nil {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "the meta group has no leader serving now (an election is under way); retry"}
	}
	return sess, nil
}

// placedGroup reads name's placement through the meta leader's Session:
// 0 when it has none.
func placedGroup(sess interface{ Get([]byte) ([]byte, error) }, name string) (uint64, error) {
	v, err := sess.Get(placementKey(name))
	switch {
	case err == nil && len(v) == 8:
		return binary.BigEndian.Uint64(v), nil
	case err == nil || errors.Is(err, storage.ErrNotFound):
		return 0, nil
	}
	return 0, &core.Error{Code: core.CodeServerBusy, Msg: "reading the placement: " + err.Error()}
}

// forget removes name's placement, on the meta leader, when it names
// group g and g's leader does not hold the entity.
func (r *routed) forget(ctx context.Context, name string, g uint64) error {
	sess, err := r.metaSession()
	if err != nil {
		return err
	}
	r.placeMu.Lock()
	defer r.placeMu.Unlock()
	if pg, err := placedGroup(sess, name); err != nil || pg != g {
		return err // placed elsewhere since (or nowhere): not ours to remove
	}
	ns, entity := unqualify(name)
	be, err := r.backendIn(g, ns, r.namespaceHome(ns))
	if err != nil {
		return err
	}
	switch _, err := be.GetEntity(entity); {
	case err == nil:
		return nil // created again in g meanwhile: it keeps its place
	case !errors.Is(err, core.ErrNotFound):
		return err
	}
	b := &storage.Batch{Sync: true}
	b.Delete(placementKey(name))
	b.Delete(spreadKey(name)) // a partitioned entity's, if it was spread (cluster_spread.go)
	if err := sess.Apply(b); err != nil {
		return &core.Error{Code: core.CodeServerBusy, Msg: "removing the placement: " + err.Error()}
	}
	r.log.Info("forgot the placement of a deleted queue or topic", zap.String("name", displayName(name)), zap.Uint64("group", g))
	return nil
}

// confirm, on the meta leader, makes sure name, just created in group g,
// is placed there: recorded again when a forget removed the placement
// meanwhile. It returns the other group when another create took the
// name meanwhile, 0 otherwise.
func (r *routed) confirm(name string, g uint64) (uint64, error) {
	sess, err := r.metaSession()
	if err != nil {
		return 0, err
	}
	r.placeMu.Lock()
	defer r.placeMu.Unlock()
	pg, err := placedGroup(sess, name)
	switch {
	case err != nil:
		return 0, err
	case pg == g:
		return 0, nil
	case pg != 0:
		return pg, nil
	}
	b := &storage.Batch{Sync: true}
	b.Set(placementKey(name), binary.BigEndian.AppendUint64(nil, g))
	if err := sess.Apply(b); err != nil {
		return 0, &core.Error{Code: core.CodeServerBusy, Msg: "recording the placement again: " + err.Error()}
	}
	r.log.Info("placed again a queue or topic created while its name was deleted", zap.String("name", displayName(name)), zap.Uint64("group", g))
	return 0, nil
}

// deleted is the core.Config.Deleted of data group g's broker: the
// placement of the queue or topic name it deleted goes (forget).
func (r *routed) deleted(ctx context.Context, name string, g uint64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unplaceTimeout)
	defer cancel()
	if _, err := r.callMeta(ctx, metaRequest{Op: metaForget, Name: name, Group: g}); err != nil {
		// It keeps its place: a name created again goes to g.
		r.log.Warn("a deleted queue's or topic's placement could not be removed; a new one of that name goes to the same group",
			zap.String("name", displayName(name)), zap.Uint64("group", g), zap.Error(err))
	}
}

// placedBackend is the backend Place and PlaceIn return: a queue or
// topic created through it has its placement confirmed.
type placedBackend struct {
	core.Backend
	r    *routed
	name string
	g    uint64
}

// CreateEntity creates e in the group name was placed in, then confirms
// the placement (confirm). When another group took the name meanwhile,
// what was made here is deleted and the create fails as a create of an
// existing entity does.
func (p placedBackend) CreateEntity(ctx context.Context, e core.Entity) (*core.Entity, error) {
	d, err := p.Backend.CreateEntity(ctx, e)
	if err != nil || e.Kind == core.KindSubscription {
		return d, err
	}
	a, err := p.r.callMeta(ctx, metaRequest{Op: metaConfirm, Name: p.name, Group: p.g})
	switch {
	case err != nil:
		// The placement was made before the create; only a racing
		// delete's forget can have removed it since.
		p.r.log.Warn("the placement of a queue or topic just created could not be confirmed",
			zap.String("name", displayName(p.name)), zap.Uint64("group", p.g), zap.Error(err))
	case a.Group != 0:
		if derr := p.Backend.DeleteEntity(ctx, e.Path()); derr != nil && !errors.Is(derr, core.ErrNotFound) {
			p.r.log.Warn("a queue or topic created in a group that lost its name to another could not be deleted again",
				zap.String("name", displayName(p.name)), zap.Uint64("group", p.g), zap.Uint64("placed", a.Group), zap.Error(derr))
		}
		return nil, &core.Error{Code: core.CodeEntityExists, Msg: fmt.Sprintf("The messaging entity '%s' already exists.", e.Path())}
	}
	return d, nil
}

// placedBackend returns group g's backend for a create of name.
func (r *routed) placedBackend(name string, g uint64) (core.Backend, error) {
	be, err := r.backend(g)
	if err != nil {
		return nil, err
	}
	return placedBackend{Backend: be, r: r, name: name, g: g}, nil
}
