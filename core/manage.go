package core

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Entity management: create, update, delete, get and list queues, topics
// and subscriptions, persisted as 'E' records (JSON, so a data directory
// stays readable across versions) and rules as 'R' records.

// entityRecord is the persisted form of an entity. Parts lists a
// partitioned entity's partitions' ids, in partition order
// (partition.go).
type entityRecord struct {
	ID     uint64
	Entity Entity
	Parts  []uint64 `json:",omitempty"`
}

// CreateEntity creates a queue, topic or subscription. A subscription
// created without rules gets the $Default rule.
func (b *Broker) CreateEntity(ctx context.Context, e Entity) (*Entity, error) {
	if b.routed() {
		be, err := b.routeEntity(ctx, e, true)
		if err != nil {
			return nil, err
		}
		return be.CreateEntity(ctx, e)
	}
	b.manage.Lock()
	defer b.manage.Unlock()
	d, err := b.createLocked(e)
	if err == nil {
		b.armIdle()
	}
	return d, err
}

func (b *Broker) createLocked(e Entity) (*Entity, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if err := checkHeld(&e); err != nil {
		return nil, err
	}
	key := entityKey(e.Path())
	b.mu.RLock()
	_, exists := b.mu.entities[key]
	var topic *entity
	if e.Kind == KindSubscription {
		topic = b.mu.entities[entityKey(e.Topic)]
	}
	b.mu.RUnlock()
	if exists {
		return nil, errf(CodeEntityExists, "The messaging entity '%s' already exists.", e.Path())
	}
	if e.Kind == KindSubscription && (topic == nil || topic.desc.Load().Kind != KindTopic) {
		return nil, entityNotFound(e.Topic)
	}
	if e.Kind != KindSubscription && (b.hasEntityUnder(key) || b.hasEntityAbove(key)) {
		return nil, errf(CodeEntityExists, "The messaging entity '%s' conflicts with an existing entity path.", e.Path())
	}
	if e.Kind != KindSubscription && ParseAddress(e.Name).Sub != "" {
		return nil, errf(CodeBadRequest, "%s name %q must not contain the reserved segment '/Subscriptions/'", e.Kind, e.Name)
	}
	if err := b.checkForwarding(&e); err != nil {
		return nil, err
	}
	if err := b.checkEntityCount(e.Kind); err != nil {
		return nil, err
	}
	now := nanosToTime(b.Now())
	e.CreatedAt, e.UpdatedAt, e.AccessedAt = now, now, now
	rules := e.Rules
	e.Rules = nil
	if e.Kind == KindSubscription && len(rules) == 0 {
		rules = []Rule{DefaultRule()}
	}
	compiled := make([]*compiledRule, len(rules))
	for i := range rules {
		rules[i].CreatedAt = now
		c, err := compileRule(&rules[i])
		if err != nil {
			return nil, err
		}
		compiled[i] = c
	}

	nparts := 0
	switch {
	case e.Kind == KindSubscription:
		nparts = len(topic.parts)
		e.HeldPartitions = topic.desc.Load().HeldPartitions
	case e.HeldPartitions != nil:
		nparts = len(e.HeldPartitions)
	case e.EnablePartitioning:
		nparts = b.cfg.PartitionCount
	}
	if e.Kind == KindSubscription {
		// A subscription is partitioned as its topic is.
		e.EnablePartitioning = nparts > 0
	}
	b.mu.Lock()
	b.mu.nextID++
	id := b.mu.nextID
	var partIDs []uint64
	for range nparts {
		b.mu.nextID++
		partIDs = append(partIDs, b.mu.nextID)
	}
	b.mu.Unlock()

	batch := storage.Batch{Sync: true}
	rec, err := json.Marshal(entityRecord{ID: id, Entity: e, Parts: partIDs})
	if err != nil {
		return nil, err
	}
	batch.Set(entityRecordKey(key), rec)
	for _, r := range rules {
		v, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		batch.Set(nameKey(tabRule, id, strings.ToLower(r.Name)), v)
	}
	if err := b.apply(&batch); err != nil {
		return nil, err
	}
	ent := b.newEntity(id, key, &e, topic, partIDs)
	ent.rules.Store(&compiled)
	b.register(ent)
	return b.GetEntity(e.Path())
}

// hasEntityUnder reports whether some entity's path is below key ("a/b"
// under "a"), which would make the paths ambiguous.
func (b *Broker) hasEntityUnder(key string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for k, e := range b.mu.entities {
		if e.topic == nil && strings.HasPrefix(k, key+"/") {
			return true
		}
	}
	return false
}

// hasEntityAbove reports whether an entity's path is a prefix of key ("a"
// above "a/b"): the converse of hasEntityUnder.
func (b *Broker) hasEntityAbove(key string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for i := 0; i < len(key); i++ {
		if key[i] == '/' && b.mu.entities[key[:i]] != nil {
			return true
		}
	}
	return false
}

// checkForwarding rejects forwarding to a missing entity or in a loop.
func (b *Broker) checkForwarding(e *Entity) error {
	for _, target := range []string{e.ForwardTo, e.ForwardDeadLetteredMessagesTo} {
		if target == "" {
			continue
		}
		seen := map[string]bool{entityKey(e.Path()): true}
		cur := target
		for hop := 0; cur != ""; hop++ {
			k := entityKey(cur)
			if seen[k] {
				return errf(CodeBadRequest, "%s '%s': forwarding to '%s' makes a loop", e.Kind, e.Path(), target)
			}
			seen[k] = true
			t, err := b.lookup(ParseAddress(cur))
			if err != nil {
				// A target of another data group goes by transfer
				// (transfer.go); the chain beyond it is that group's, and
				// the hop count bounds a loop through it.
				if a := ParseAddress(cur); !a.DeadLetter && a.Sub == "" {
					if g, lerr := b.locateElsewhere(a.Entity); lerr != nil {
						return lerr
					} else if g != 0 {
						break
					}
				}
				return errf(CodeBadRequest, "%s '%s': forwarding target '%s' does not exist", e.Kind, e.Path(), cur)
			}
			td := t.desc.Load()
			if td.Kind == KindSubscription {
				return errf(CodeBadRequest, "%s '%s': cannot forward to subscription '%s'", e.Kind, e.Path(), cur)
			}
			if hop >= maxForwardHops {
				return errf(CodeBadRequest, "%s '%s': forwarding chain is longer than %d", e.Kind, e.Path(), maxForwardHops)
			}
			cur = td.ForwardTo
		}
	}
	return nil
}

// newEntity builds the run-time structures of an entity; partIDs are a
// partitioned entity's partitions' ids (partition.go), nil for an entity
// that is not partitioned.
func (b *Broker) newEntity(id uint64, key string, d *Entity, topic *entity, partIDs []uint64) *entity {
	ent := &entity{key: key, id: id, topic: topic}
	dc := *d
	ent.desc.Store(&dc)
	ent.lastUsed.Store(b.Now())
	if b.cfg.Stats {
		ent.stats = newEntityStats()
	}
	if partIDs != nil {
		ent.parts = make([]*entity, len(partIDs))
		for p, pid := range partIDs {
			var tp *entity
			if topic != nil {
				tp = topic.parts[p]
			}
			part := b.newUnit(pid, partitionName(key, p), d, tp)
			part.parent, part.part, part.stats = ent, p, ent.stats
			if part.in != nil {
				// Numbers up to the base are never this partition's.
				base := partitionBase(p)
				part.in.next, part.in.reserved, part.in.durable = base+1, base, base
			}
			ent.parts[p] = part
		}
		return ent
	}
	b.fillUnit(ent, d, topic)
	return ent
}

// newUnit builds an entity that holds messages itself: an unpartitioned
// entity or one partition.
func (b *Broker) newUnit(id uint64, key string, d *Entity, topic *entity) *entity {
	ent := &entity{key: key, id: id, topic: topic}
	dc := *d
	ent.desc.Store(&dc)
	ent.lastUsed.Store(b.Now())
	b.fillUnit(ent, d, topic)
	return ent
}

// fillUnit gives an entity that holds messages its inlet and queues.
func (b *Broker) fillUnit(ent *entity, d *Entity, topic *entity) {
	id := ent.id
	if d.Kind != KindSubscription {
		ent.in = &inlet{e: ent, next: 1}
	}
	if d.Kind != KindTopic {
		ent.q = newQueue(b, id, ent, d.Path())
		ent.q.dead = newQueue(b, id|dlqBit, ent, d.Path()+"/$DeadLetterQueue")
		ent.q.dead.main = ent.q
		if topic != nil {
			ent.q.shared = topic
			ent.q.dead.shared = topic
		}
	}
}

func (b *Broker) register(ent *entity) {
	b.mu.Lock()
	b.mu.entities[ent.key] = ent
	if ent.topic == nil {
		b.mu.queuesAndTopics++
	}
	for _, x := range append([]*entity{ent}, ent.parts...) {
		if x.id > b.mu.nextID {
			b.mu.nextID = x.id
		}
	}
	b.mu.Unlock()
	if ent.topic != nil {
		ent.topic.setSubs(func(subs []*entity) []*entity { return append(subs, ent) })
		for _, p := range ent.parts {
			p.topic.setSubs(func(subs []*entity) []*entity { return append(subs, p) })
		}
	}
}

// setDesc replaces the description of e and of its partitions.
func (e *entity) setDesc(d *Entity) {
	e.desc.Store(d)
	for _, p := range e.parts {
		dc := *d
		p.desc.Store(&dc)
	}
}

// setSubs replaces a topic's subscription list copy-on-write, so sends
// read it without a lock.
func (e *entity) setSubs(change func([]*entity) []*entity) {
	var cur []*entity
	if p := e.subs.Load(); p != nil {
		cur = append(cur, (*p)...)
	}
	next := change(cur)
	e.subs.Store(&next)
}

// UpdateEntity replaces the properties of an existing entity. Kind,
// RequiresSession and (for subscriptions) rules cannot change here.
func (b *Broker) UpdateEntity(ctx context.Context, e Entity) (*Entity, error) {
	if b.routed() {
		be, err := b.routeEntity(ctx, e, false)
		if err != nil {
			return nil, err
		}
		return be.UpdateEntity(ctx, e)
	}
	b.manage.Lock()
	defer b.manage.Unlock()
	d, err := b.updateLocked(e)
	if err == nil {
		b.armIdle()
	}
	return d, err
}

func (b *Broker) updateLocked(e Entity) (*Entity, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	ent, err := b.lookup(ParseAddress(e.Path()))
	if err != nil {
		return nil, err
	}
	old := ent.desc.Load()
	if old.Kind != e.Kind {
		return nil, errf(CodeBadRequest, "'%s' is a %s, not a %s", e.Path(), old.Kind, e.Kind)
	}
	if old.RequiresSession != e.RequiresSession {
		return nil, errf(CodeBadRequest, "%s '%s': RequiresSession cannot be changed after creation", e.Kind, e.Path())
	}
	if e.Kind == KindSubscription {
		e.EnablePartitioning = old.EnablePartitioning // its topic's, never the caller's
	} else if old.EnablePartitioning != e.EnablePartitioning {
		return nil, errf(CodeBadRequest, "%s '%s': EnablePartitioning cannot be changed after creation", e.Kind, e.Path())
	} else if old.RequiresDuplicateDetection != e.RequiresDuplicateDetection {
		// Service Bus: duplicate detection is chosen when a queue or
		// topic is created; only its window changes later.
		return nil, errf(CodeBadRequest, "%s '%s': RequiresDuplicateDetection cannot be changed after creation", e.Kind, e.Path())
	}
	if err := b.checkForwarding(&e); err != nil {
		return nil, err
	}
	e.Rules = nil
	e.HeldPartitions = old.HeldPartitions // the cluster's, never the caller's
	e.CreatedAt = old.CreatedAt
	e.AccessedAt = old.AccessedAt
	e.UpdatedAt = nanosToTime(b.Now())
	rec, err := json.Marshal(entityRecord{ID: ent.id, Entity: e, Parts: ent.partIDs()})
	if err != nil {
		return nil, err
	}
	batch := storage.Batch{Sync: true}
	batch.Set(entityRecordKey(ent.key), rec)
	if err := b.apply(&batch); err != nil {
		return nil, err
	}
	ent.setDesc(&e)
	ent.touch(b.Now())
	return b.GetEntity(e.Path())
}

// DeleteEntity deletes an entity with all its messages, subqueues, rules
// and session state; deleting a topic deletes its subscriptions.
func (b *Broker) DeleteEntity(ctx context.Context, path string) error {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return err
		}
		return be.DeleteEntity(ctx, path)
	}
	b.manage.Lock()
	err := b.deleteLocked(path)
	b.manage.Unlock()
	if a := ParseAddress(path); err == nil && a.Sub == "" && b.cfg.Deleted != nil {
		b.cfg.Deleted(ctx, a.Entity)
	}
	return err
}

func (b *Broker) deleteLocked(path string) error {
	a := ParseAddress(path)
	if a.DeadLetter {
		return errf(CodeBadRequest, "cannot delete the dead-letter subqueue '%s'", a.String())
	}
	ent, err := b.lookup(a)
	if err != nil {
		return err
	}
	victims := []*entity{ent}
	if subs := ent.subs.Load(); subs != nil {
		victims = append(victims, (*subs)...)
	}
	batch := storage.Batch{Sync: true}
	for _, v := range victims {
		batch.Delete(entityRecordKey(v.key))
		for _, x := range append([]*entity{v}, v.parts...) {
			for _, id := range []uint64{x.id, x.id | dlqBit} {
				for _, tab := range []byte{tabSeq, tabState, tabPull, tabBody, tabDedup, tabSession, tabRule} {
					batch.DeletePrefix(idKey(tab, id))
				}
			}
		}
	}
	if err := b.apply(&batch); err != nil {
		return err
	}
	b.mu.Lock()
	for _, v := range victims {
		delete(b.mu.entities, v.key)
		if v.topic == nil {
			b.mu.queuesAndTopics--
		}
	}
	b.mu.Unlock()
	if ent.topic != nil {
		for _, x := range append([]*entity{ent}, ent.parts...) {
			x.topic.setSubs(func(subs []*entity) []*entity {
				out := subs[:0]
				for _, s := range subs {
					if s != x {
						out = append(out, s)
					}
				}
				return out
			})
		}
	}
	for _, v := range victims {
		for _, q := range v.allQueues() {
			q.close(true)
		}
	}
	if ent.topic != nil {
		b.releaseSharedBodies(ent.allQueues()...)
	}
	return nil
}

// partIDs returns the ids of e's partitions, nil if it has none.
func (e *entity) partIDs() []uint64 {
	if e.parts == nil {
		return nil
	}
	ids := make([]uint64, len(e.parts))
	for i, p := range e.parts {
		ids[i] = p.id
	}
	return ids
}

// releaseSharedBodies drops a deleted subscription's references to its
// topic's bodies, deleting those it held last. It runs once the deletion
// is durable and the queues are closed (deleted), and finds every copy
// still in them: a settlement in flight meanwhile either gave its copy
// back before (found here) or finds the queue deleted and counts its copy
// gone itself (write.abort).
func (b *Broker) releaseSharedBodies(qs ...*queue) {
	w := b.newWrite(true)
	defer w.abort()
	for _, q := range qs {
		for _, seq := range q.sharedSeqs() {
			w.releaseRef(q, seq)
		}
	}
	if err := w.commit(); err != nil {
		b.warnStorage("deleting the shared bodies of a deleted subscription failed; they stay on disk as garbage (Broker.Check lists them)", zap.Error(err))
	}
}

// sharedSeqs returns the sequence numbers of the records of q whose body
// is its topic's.
func (q *queue) sharedSeqs() []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var seqs []int64
	q.eachRecLocked(func(r *msgRec) {
		if q.sharedBody(r) {
			seqs = append(seqs, r.seq)
		}
	})
	return seqs
}

// eachRecLocked calls fn for every record q holds: available (in the
// queue or a session), locked, deferred, scheduled or set aside to
// expire.
func (q *queue) eachRecLocked(fn func(*msgRec)) {
	for _, r := range q.mu.avail {
		fn(r)
	}
	for _, s := range q.mu.sessions.byID {
		for _, r := range s.avail {
			fn(r)
		}
	}
	for _, r := range q.mu.locked {
		if r.state != StateDeferred {
			fn(r)
		}
	}
	for _, r := range q.mu.deferred {
		fn(r)
	}
	for _, r := range q.mu.scheduled {
		fn(r)
	}
	for _, r := range q.mu.expiring {
		fn(r)
	}
}

// GetEntity returns a copy of the entity's description, rules included
// for subscriptions.
func (b *Broker) GetEntity(path string) (*Entity, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.GetEntity(path)
	}
	a := ParseAddress(path)
	ent, err := b.lookup(a)
	if err != nil {
		return nil, err
	}
	d := *ent.desc.Load()
	if rules := ent.rules.Load(); rules != nil && d.Kind == KindSubscription {
		d.Rules = make([]Rule, len(*rules))
		for i, r := range *rules {
			d.Rules[i] = r.Rule
		}
	}
	d.AccessedAt = nanosToTime(ent.lastUsed.Load())
	return &d, nil
}

// ListEntities returns the entities of a kind sorted by path; for
// subscriptions, those of the given topic.
func (b *Broker) ListEntities(kind EntityKind, topic string) ([]*Entity, error) {
	if b.routed() {
		return b.listRouted(kind, topic)
	}
	if kind == KindSubscription {
		t, err := b.lookup(ParseAddress(topic))
		if err != nil {
			return nil, err
		}
		if t.desc.Load().Kind != KindTopic {
			return nil, entityNotFound(topic)
		}
	}
	b.mu.RLock()
	var paths []string
	for _, e := range b.mu.entities {
		d := e.desc.Load()
		if d.Kind == kind && (kind != KindSubscription || strings.EqualFold(d.Topic, topic)) {
			paths = append(paths, d.Path())
		}
	}
	b.mu.RUnlock()
	sort.Slice(paths, func(i, j int) bool { return strings.ToLower(paths[i]) < strings.ToLower(paths[j]) })
	out := make([]*Entity, 0, len(paths))
	for _, p := range paths {
		if e, err := b.GetEntity(p); err == nil {
			out = append(out, e)
		}
	}
	return out, nil
}
