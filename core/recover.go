package core

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// recover rebuilds every entity and the in-memory index of every message
// from the store. It reads only the small records (entities, rules, state
// records, sequence reservations, duplicate history, session state), never
// a message body, so it runs at the speed of a key scan.
func (b *Broker) recover() error {
	var recs []entityRecord
	err := b.store.Scan([]byte{tabEntity}, nil, func(k, v []byte) (bool, error) {
		var r entityRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, errf(CodeInternal, "entity record %q: %v", k[1:], err)
		}
		recs = append(recs, r)
		return true, nil
	})
	if err != nil {
		return err
	}
	// Topics and queues first, so subscriptions find their topic.
	sort.SliceStable(recs, func(i, j int) bool {
		return (recs[i].Entity.Kind == KindSubscription) == false && recs[j].Entity.Kind == KindSubscription
	})
	now := b.Now()
	// Messages out of deliveries move once every entity is back (a move
	// may forward to any of them). One that cannot move (a full disk)
	// stays available and is met again at its next delivery.
	var outOfDeliveries []func()
	for _, r := range recs {
		d := r.Entity
		var topic *entity
		if d.Kind == KindSubscription {
			b.mu.RLock()
			topic = b.mu.entities[entityKey(d.Topic)]
			b.mu.RUnlock()
			if topic == nil {
				b.log.Warn("dropping orphan subscription record")
				continue
			}
		}
		if topic != nil && len(topic.parts) != len(r.Parts) {
			return errf(CodeInternal, "subscription '%s' has %d partitions and its topic %d", d.Path(), len(r.Parts), len(topic.parts))
		}
		ent := b.newEntity(r.ID, entityKey(d.Path()), &d, topic, r.Parts)
		if err := b.recoverRules(ent); err != nil {
			return err
		}
		b.register(ent)
		for _, u := range ent.units() {
			if u.in != nil {
				if err := b.recoverInlet(u, now); err != nil {
					return err
				}
			}
			if u.q == nil {
				continue
			}
			for _, q := range []*queue{u.q, u.q.dead} {
				late, err := q.recoverMessages(now)
				if err != nil {
					return err
				}
				if len(late) > 0 {
					outOfDeliveries = append(outOfDeliveries, func() {
						q.deadLetterAside(late, ReasonMaxDeliveryCount, maxDeliveryDescription(q.desc().MaxDeliveryCount))
					})
				}
			}
			if err := u.q.recoverSessionStates(); err != nil {
				return err
			}
		}
	}
	for _, f := range outOfDeliveries {
		f()
	}
	return nil
}

func (b *Broker) recoverRules(ent *entity) error {
	if ent.desc.Load().Kind != KindSubscription {
		return nil
	}
	var rules []*compiledRule
	err := b.store.Scan(idKey(tabRule, ent.id), nil, func(k, v []byte) (bool, error) {
		var r Rule
		if err := json.Unmarshal(v, &r); err != nil {
			return false, errf(CodeInternal, "rule record: %v", err)
		}
		c, err := compileRule(&r)
		if err != nil {
			return false, err
		}
		rules = append(rules, c)
		return true, nil
	})
	if err != nil {
		return err
	}
	sortRules(rules)
	ent.rules.Store(&rules)
	return nil
}

func sortRules(rules []*compiledRule) {
	sort.SliceStable(rules, func(i, j int) bool {
		if !rules[i].CreatedAt.Equal(rules[j].CreatedAt) {
			return rules[i].CreatedAt.Before(rules[j].CreatedAt)
		}
		return strings.ToLower(rules[i].Name) < strings.ToLower(rules[j].Name)
	})
}

// recoverInlet restores the sequence counter (past every number ever
// handed out) and the duplicate-detection history still in its window.
func (b *Broker) recoverInlet(ent *entity, now int64) error {
	in := ent.in
	var reserved int64
	if v, err := b.store.Get(idKey(tabSeq, ent.id)); err == nil && len(v) == 8 {
		reserved = int64(binary.BigEndian.Uint64(v))
	}
	// A partition counts from its base (partition.go), whatever it
	// reserved.
	reserved = max(reserved, partitionBase(ent.part))
	in.next = reserved + 1
	in.reserved, in.durable = reserved, reserved
	window := int64(ent.desc.Load().DuplicateDetectionHistoryTimeWindow)
	return b.store.Scan(idKey(tabDedup, ent.id), nil, func(k, v []byte) (bool, error) {
		if len(v) != 8 {
			return true, nil
		}
		at := int64(binary.BigEndian.Uint64(v))
		if at > now-window {
			in.dedup.restore(string(k[9:]), at)
		}
		return true, nil
	})
}

// recoverMessages loads q's state records. Messages that were locked when
// the broker stopped are available again; their delivery was already
// counted. Those out of deliveries are returned for dead-lettering.
func (q *queue) recoverMessages(now int64) ([]*msgRec, error) {
	var late []*msgRec
	maxDC := q.desc().MaxDeliveryCount
	var maxSeq int64
	q.mu.Lock()
	defer q.mu.Unlock()
	// Counts given by pulls are in delivery records (pull.go).
	pulls, err := q.readPulls()
	if err != nil {
		return nil, err
	}
	err = q.b.store.Scan(idKey(tabState, q.id), nil, func(k, v []byte) (bool, error) {
		st, err := decodeState(v)
		if err != nil {
			return false, fmt.Errorf("core: the state record of message %d of '%s' cannot be read: %w", seqFromKey(k), q.path, err)
		}
		r := &msgRec{seq: seqFromKey(k), idx: -1, stateRec: st}
		if dc, p := pulls.count(r.seq, st.deliveryCount); p != nil {
			r.deliveryCount, r.pull = dc, p
			p.live++
		}
		maxSeq = max(maxSeq, r.seq)
		if r.state == StateScheduled && r.scheduledAt <= now {
			r.state = StateActive
		}
		if q.shared != nil && r.owner == q.shared.id {
			q.shared.refs.Lock()
			if q.shared.refs.m == nil {
				q.shared.refs.m = make(map[int64]bodyRefs)
			}
			c := q.shared.refs.m[r.seq]
			c.n++
			q.shared.refs.m[r.seq] = c
			q.shared.refs.Unlock()
		}
		q.insertLocked(r, now)
		if r.state == StateActive && !q.isDeadLetter() && r.deliveryCount >= maxDC {
			// Locked at the crash with its last delivery: take it back
			// out of avail and dead-letter it after recovery.
			q.takeBackLocked(r)
			late = append(late, r)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	q.recoveredPullsLocked(pulls)
	// A queue's own counter must pass every sequence number still stored
	// (its dead-letter subqueue shares the numbering).
	if in := q.ent.in; in != nil && maxSeq >= in.next {
		in.next = maxSeq + 1
		in.reserved, in.durable = maxSeq, maxSeq
	}
	return late, nil
}

// takeBackLocked removes an available record from avail (or its session).
func (q *queue) takeBackLocked(r *msgRec) {
	if s := q.sessionLocked(r); s != nil {
		if r.idx >= 0 && int(r.idx) < len(s.avail) && s.avail[r.idx] == r {
			s.avail.remove(int(r.idx))
			q.mu.sessions.changed(s)
		}
		return
	}
	if r.idx >= 0 && int(r.idx) < len(q.mu.avail) && q.mu.avail[r.idx] == r {
		q.mu.avail.remove(int(r.idx))
	}
}

func (q *queue) recoverSessionStates() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.b.store.Scan(idKey(tabSession, q.id), nil, func(k, v []byte) (bool, error) {
		if len(v) < 8 {
			return true, nil
		}
		s := q.mu.sessions.get(string(k[9:]))
		s.stateAt = int64(binary.BigEndian.Uint64(v))
		s.state = append([]byte{}, v[8:]...)
		q.addBytesLocked(int64(len(s.state))) // session state counts towards the quota
		return true, nil
	})
}
