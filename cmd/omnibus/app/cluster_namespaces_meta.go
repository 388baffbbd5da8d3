package app

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/storage"
)

// Namespace changes in a cluster with data groups, as the meta leader makes
// them (cluster_namespaces.go has the layout and each node's side).

// sharedRegistry is the namespace.Shared of a node's registry: each
// change is made by the meta leader, and returns once this node's copy
// of the meta group holds it (so that a Sync does not undo it).
type sharedRegistry struct{ r *routed }

// replicaWait bounds how long a change waits to reach this node's copy
// of the meta group.
const replicaWait = 5 * time.Second

// Create implements namespace.Shared.
func (s sharedRegistry) Create(ctx context.Context, rec namespace.Record, max int) (namespace.Record, error) {
	a, err := s.r.callMeta(ctx, metaRequest{Op: metaNSCreate, Record: &rec, Max: max})
	if err != nil {
		return namespace.Record{}, err
	}
	if a.Record == nil {
		return namespace.Record{}, errors.New("the meta leader answered a namespace's creation without its record")
	}
	s.r.waitReplica(nsRecordKey(a.Record.Name), a.Record)
	return *a.Record, nil
}

// Update implements namespace.Shared.
func (s sharedRegistry) Update(ctx context.Context, rec namespace.Record) error {
	if _, err := s.r.callMeta(ctx, metaRequest{Op: metaNSUpdate, Record: &rec}); err != nil {
		return err
	}
	key := nsRecordKey(rec.Name)
	if rec.ID == 0 {
		key = []byte(nsDefaultKey)
	}
	s.r.waitReplica(key, &rec)
	return nil
}

// Delete implements namespace.Shared.
func (s sharedRegistry) Delete(ctx context.Context, rec namespace.Record) error {
	if _, err := s.r.callMeta(ctx, metaRequest{Op: metaNSDelete, Record: &rec}); err != nil {
		return err
	}
	s.r.waitReplica(nsRecordKey(rec.Name), nil)
	return nil
}

// waitReplica waits, up to replicaWait, until this node's copy of the
// meta group holds the record want at key (nil: nothing).
func (r *routed) waitReplica(key []byte, want *namespace.Record) {
	deadline := time.Now().Add(replicaWait)
	for {
		v, err := r.meta.ReadReplica(key)
		if (want == nil && errors.Is(err, storage.ErrNotFound)) || (want != nil && err == nil && sameRecord(v, *want)) {
			return
		}
		if time.Now().After(deadline) {
			r.log.Warn("a namespace's change has not reached this node's copy of the meta group yet", zap.ByteString("key", key))
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var _ namespace.Shared = sharedRegistry{}

// namespaceRequest carries out a namespace request: on the meta leader,
// or (ns-drop) on a data group's leader.
func (r *routed) namespaceRequest(ctx context.Context, req metaRequest) (metaAnswer, error) {
	if req.Op == metaNSDrop {
		return metaAnswer{}, r.dropLocal(req.Group, req.NS)
	}
	if req.Record == nil {
		return metaAnswer{}, &core.Error{Code: core.CodeBadRequest, Msg: req.Op + " without a record"}
	}
	sess, err := r.metaSession()
	if err != nil {
		return metaAnswer{}, err
	}
	rec := *req.Record
	switch req.Op {
	case metaNSCreate:
		rec, err := r.createNamespace(sess, rec, req.Max)
		return metaAnswer{Record: &rec}, err
	case metaNSUpdate:
		return metaAnswer{}, r.updateNamespace(sess, rec)
	}
	return metaAnswer{}, r.deleteNamespace(ctx, sess, rec)
}

// metaStore is the meta leader's Session as the registry's changes use
// it.
type metaStore interface {
	Get([]byte) ([]byte, error)
	Apply(*storage.Batch) error
}

func metaBusy(what string, err error) error {
	return &core.Error{Code: core.CodeServerBusy, Msg: what + ": " + err.Error()}
}

// createNamespace records a new namespace on the meta leader.
func (r *routed) createNamespace(sess metaStore, rec namespace.Record, max int) (namespace.Record, error) {
	r.placeMu.Lock()
	defer r.placeMu.Unlock()
	switch _, err := sess.Get(nsRecordKey(rec.Name)); {
	case err == nil:
		return rec, &core.Error{Code: core.CodeEntityExists, Msg: "The namespace '" + rec.Name + "' already exists."}
	case !errors.Is(err, storage.ErrNotFound):
		return rec, metaBusy("reading the namespace registry", err)
	}
	count := 1 // the default namespace
	if err := r.meta.ScanReplica([]byte(nsRecordPrefix), func(_, _ []byte) (bool, error) { count++; return true, nil }); err != nil {
		return rec, metaBusy("counting the namespaces", err)
	}
	if max > 0 && count >= max {
		return rec, &core.Error{Code: core.CodeQuotaExceeded,
			Msg: "The maximum number of namespaces (" + strconv.Itoa(max) + ") has been reached; delete one first."}
	}
	rec.ID = 1
	switch v, err := sess.Get([]byte(nsNextIDKey)); {
	case err == nil && len(v) == 8:
		rec.ID = binary.BigEndian.Uint64(v)
	case err != nil && !errors.Is(err, storage.ErrNotFound):
		return rec, metaBusy("reading the namespace registry", err)
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return rec, err
	}
	b := &storage.Batch{Sync: true}
	b.Set([]byte(nsNextIDKey), binary.BigEndian.AppendUint64(nil, rec.ID+1))
	b.Set(nsRecordKey(rec.Name), v)
	b.Set(nsIDKey(nsLivePrefix, rec.ID), []byte(rec.Name))
	if err := sess.Apply(b); err != nil {
		return rec, metaBusy("recording the namespace", err)
	}
	r.log.Info("created a namespace", zap.String("namespace", rec.Name), zap.Uint64("id", rec.ID))
	return rec, nil
}

// updateNamespace replaces a namespace's record (rules, limits) on the
// meta leader.
func (r *routed) updateNamespace(sess metaStore, rec namespace.Record) error {
	r.placeMu.Lock()
	defer r.placeMu.Unlock()
	key := []byte(nsDefaultKey)
	if rec.ID != 0 {
		key = nsRecordKey(rec.Name)
		if err := r.sameNamespace(sess, rec); err != nil {
			return err
		}
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	b := &storage.Batch{Sync: true}
	b.Set(key, v)
	if err := sess.Apply(b); err != nil {
		return metaBusy("recording the namespace", err)
	}
	return nil
}

// sameNamespace refuses a change to a namespace that is gone, or was
// created again under a new id.
func (r *routed) sameNamespace(sess metaStore, rec namespace.Record) error {
	v, err := sess.Get(nsRecordKey(rec.Name))
	var cur namespace.Record
	if err == nil {
		err = json.Unmarshal(v, &cur)
	}
	switch {
	case errors.Is(err, storage.ErrNotFound) || (err == nil && cur.ID != rec.ID):
		return &core.Error{Code: core.CodeNotFound, Msg: "The namespace '" + rec.Name + "' could not be found."}
	case err != nil:
		return metaBusy("reading the namespace registry", err)
	}
	return nil
}

// deleteNamespace deletes a namespace on the meta leader: its record
// goes at once (so no node serves it and no entity is placed in it any
// more), leaving a tombstone until each data group has dropped its key
// range and its placements are gone (finishDeletions, now and later).
func (r *routed) deleteNamespace(ctx context.Context, sess metaStore, rec namespace.Record) error {
	r.placeMu.Lock()
	if err := r.sameNamespace(sess, rec); err != nil {
		r.placeMu.Unlock()
		return err
	}
	b := &storage.Batch{Sync: true}
	b.Delete(nsRecordKey(rec.Name))
	b.Delete(nsIDKey(nsLivePrefix, rec.ID))
	b.Set(nsIDKey(nsDeletedPrefix, rec.ID), []byte(rec.Name))
	err := sess.Apply(b)
	r.placeMu.Unlock()
	if err != nil {
		return metaBusy("deleting the namespace", err)
	}
	r.log.Info("deleted a namespace", zap.String("namespace", rec.Name), zap.Uint64("id", rec.ID))
	r.finishDeletion(ctx, sess, rec.ID)
	return nil
}

// finishDeletion drops deleted namespace ns's key range in every data
// group, then its placements and tombstone; what fails now is done by
// the meta leader later (finishDeletionsLoop).
func (r *routed) finishDeletion(ctx context.Context, sess metaStore, ns uint64) {
	for g := uint64(1); g <= uint64(r.meta.DataGroups()); g++ {
		if err := r.dropIn(ctx, g, ns); err != nil {
			r.log.Info("a deleted namespace's data in a data group is dropped later", zap.Uint64("namespace", ns), zap.Uint64("group", g), zap.Error(err))
			return
		}
	}
	b := &storage.Batch{Sync: true}
	b.DeletePrefix(namespacePlacements(ns))
	b.DeletePrefix(namespaceSpreads(ns)) // cluster_spread.go
	b.Delete(nsIDKey(nsDeletedPrefix, ns))
	if err := sess.Apply(b); err != nil {
		r.log.Info("a deleted namespace's placements are removed later", zap.Uint64("namespace", ns), zap.Error(err))
	}
}

// finishDeletionsLoop finishes, while this node leads the meta group
// (sess), the deletions of namespaces some data group could not drop at
// once.
func (r *routed) finishDeletionsLoop(sess metaStore, done <-chan struct{}) {
	t := time.NewTicker(nsReapInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		var ids []uint64
		_ = r.meta.ScanReplica([]byte(nsDeletedPrefix), func(k, _ []byte) (bool, error) {
			if len(k) == 1+8 {
				ids = append(ids, binary.BigEndian.Uint64(k[1:]))
			}
			return true, nil
		})
		for _, ns := range ids {
			ctx, cancel := context.WithTimeout(r.cl.ctx, unplaceTimeout)
			r.finishDeletion(ctx, sess, ns)
			cancel()
		}
	}
}

// dropIn has data group g's leader drop namespace ns's key range.
func (r *routed) dropIn(ctx context.Context, g, ns uint64) error {
	leader := r.leaderOf(g)
	switch leader {
	case 0:
		return &core.Error{Code: core.CodeServerBusy, Msg: fmt.Sprintf("data group %d has no leader now", g)}
	case r.meta.ID():
		return r.dropLocal(g, ns)
	}
	_, err := r.callNode(ctx, leader, metaRequest{Op: metaNSDrop, Group: g, NS: ns})
	return err
}

// dropLocal closes namespace ns's broker in data group g, which this
// node leads, and deletes its key range there.
func (r *routed) dropLocal(g, ns uint64) error {
	r.mu.Lock()
	lg := r.local[g]
	r.mu.Unlock()
	if lg == nil || ns == 0 {
		return &core.Error{Code: core.CodeServerBusy, Msg: fmt.Sprintf("this node does not serve data group %d", g)}
	}
	lg.spaces.Lock()
	b, stop := lg.spaces.by[ns], lg.spaces.stopPumps[ns]
	delete(lg.spaces.by, ns)
	delete(lg.spaces.stopPumps, ns)
	if lg.spaces.dropped == nil {
		lg.spaces.dropped = map[uint64]bool{}
	}
	// A call placed before the deletion that comes now, while this node's
	// copy of the meta group may not show it yet, must not open the
	// namespace again and write in the range just dropped. Once the copy
	// shows it, namespaceName refuses it alone: the entry goes, so the
	// set holds only deletions this node's copy has not caught up with.
	for id := range lg.spaces.dropped {
		if _, live := r.namespaceName(id); !live {
			delete(lg.spaces.dropped, id)
		}
	}
	lg.spaces.dropped[ns] = true
	lg.spaces.Unlock()
	if stop != nil {
		stop() // a dropped namespace's pumps would poll its closed broker until the Session ends
	}
	if b != nil {
		_ = b.CloseDeleted()
	}
	batch := &storage.Batch{Sync: true}
	batch.DeletePrefix(namespace.DataPrefix(ns))
	if err := lg.sess.Apply(batch); err != nil {
		return metaBusy("dropping the namespace's data", err)
	}
	return nil
}

// sameRecord reports whether the record encoded in v is rec.
func sameRecord(v []byte, rec namespace.Record) bool {
	var got namespace.Record
	if json.Unmarshal(v, &got) != nil {
		return false
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(rec)
	return bytes.Equal(a, b)
}

// checkEntityCount refuses, on the meta leader, a new placement in a
// namespace that holds its MaxEntities queues and topics already,
// counted over every data group (each group's broker only sees its
// own), as a single node refuses the create.
func (r *routed) checkEntityCount(sess interface {
	Scan(prefix, start []byte, fn func(k, v []byte) (bool, error)) error
}, name string) error {
	reg := r.namespaces()
	if reg == nil {
		return nil
	}
	id, _ := unqualify(name)
	n := reg.Default()
	prefix := []byte(placementPrefix)
	if id != 0 {
		nsName, ok := r.namespaceName(id)
		if !ok {
			return nil // namespaceLive refuses it
		}
		var err error
		if n, err = reg.Get(nsName); err != nil {
			return nil // not in this node's registry yet
		}
		prefix = namespacePlacements(id)
	}
	max := n.Limits().MaxEntities
	if max <= 0 {
		return nil
	}
	count := 0
	err := sess.Scan(prefix, nil, func(k, _ []byte) (bool, error) {
		if id != 0 || len(k) < 2 || k[1] != 0 { // the default namespace's: no zero byte after P
			count++
		}
		return true, nil
	})
	if err != nil {
		return metaBusy("counting the namespace's queues and topics", err)
	}
	if count >= max {
		return &core.Error{Code: core.CodeQuotaExceeded, Msg: fmt.Sprintf("The maximum entity count of %d has been reached or exceeded for namespace '%s': "+
			"it holds %d queues and topics. Delete one, or raise the namespace's Limits.MaxEntities.", max, n.Name(), count)}
	}
	return nil
}
