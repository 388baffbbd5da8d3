package core

import (
	"math"
	"sync/atomic"
)

// Entity quota (MaxSizeInMegabytes).
//
// A queue's size is what it stores: every message it holds, in any state
// (active, locked, deferred, scheduled), those of its dead-letter
// subqueue, and its sessions' state, as Service Bus counts them. A
// topic's size is what its subscriptions hold, each subscription's copy
// counted (the body is stored once, but Service Bus also counts a topic
// message once per subscription), so a topic's MaxSizeInMegabytes bounds
// all its subscriptions together; a subscription has no quota of its
// own.
//
// A stored message counts [Message.Size] plus [MessageOverhead], so that
// many tiny messages fill an entity as their real cost does rather than
// as their few bytes of body would.
//
// A send that would take its entity over the maximum fails whole with
// [CodeQuotaExceeded] and Service Bus's message; nothing of it is stored.
// Sends still being written count as if stored (quota.pending), so
// concurrent and pipelined sends cannot together overshoot. A move
// within the broker (dead-lettering, forwarding dead letters) is never
// refused for quota: the message already counted where it came from.

// MessageOverhead is what each stored message counts towards its
// entity's size beyond [Message.Size]: the broker's stamps and records
// (sequence number, times, delivery count, state, keys), about what
// Service Bus's system properties add to a message.
const MessageOverhead = 128

// entityQuota is the size account of a queue or topic. Guarded by
// nothing: both counters are atomics.
type entityQuota struct {
	stored  atomic.Int64 // bytes held now (see above)
	pending atomic.Int64 // bytes of sends planned but not yet published
}

// storedBytes is what r counts towards its entity's size.
func (r *msgRec) storedBytes() int64 { return int64(r.size) + MessageOverhead }

// account returns the entity whose quota q's messages count against: a
// subscription's topic, otherwise the queue itself.
func (q *queue) account() *entity {
	if q.ent.topic != nil {
		return q.ent.topic
	}
	return q.ent
}

// addBytesLocked changes q's size by n, and its entity's. A closed
// (deleted) queue has already taken its bytes out of its entity's.
func (q *queue) addBytesLocked(n int64) {
	q.mu.bytes += n
	if !q.mu.closed {
		q.account().quota.stored.Add(n)
	}
}

// dropBytesLocked takes a deleted queue's bytes out of its entity's size
// (a deleted subscription no longer counts against its topic).
func (q *queue) dropBytesLocked() {
	q.account().quota.stored.Add(-q.mu.bytes)
}

// maxBytes is the most d's entity may store: its MaxSizeInMegabytes in
// bytes (saturated, for a description stored before its range was
// checked), or [Limits.MaxEntityBytes] (as SetQuotas last set it) if
// smaller.
func (b *Broker) maxBytes(d *Entity) int64 {
	max := int64(math.MaxInt64)
	if mb := d.MaxSizeInMegabytes; mb <= max>>20 {
		max = mb << 20
	}
	if c := b.quotas.maxEntityBytes.Load(); c > 0 && c < max {
		max = c
	}
	return max
}

// reserve counts ps's records against e's quota, or refuses them all if
// they would take e over its maximum. Called once ps is fully planned.
func (p *sendPlan) reserve(e *entity, d *Entity, ps *pendingSend) error {
	var n int64
	for _, pl := range ps.places {
		n += pl.r.storedBytes()
	}
	if n == 0 {
		return nil
	}
	if p.move {
		e.quota.pending.Add(n)
		ps.quota = n
		return nil
	}
	if err := e.quota.reserve(n, p.b.maxBytes(d), d); err != nil {
		return err
	}
	ps.quota = n
	return nil
}

// reserve adds n to pending unless stored + pending + n would pass max.
func (eq *entityQuota) reserve(n, max int64, d *Entity) error {
	for {
		pending := eq.pending.Load()
		if used := eq.stored.Load() + pending; used+n > max {
			return quotaExceeded(d, used, max)
		}
		if eq.pending.CompareAndSwap(pending, pending+n) {
			return nil
		}
	}
}

// releaseQuota ends ps's reservation once its records are published (and
// so counted in stored) or the send failed.
func (ps *pendingSend) releaseQuota() {
	if ps.quota != 0 {
		ps.in.e.quota.pending.Add(-ps.quota)
		ps.quota = 0
	}
}

// quotaExceeded is Service Bus's error for a full entity.
func quotaExceeded(d *Entity, size, max int64) error {
	kind := "Queue"
	if d.Kind == KindTopic {
		kind = "Topic"
	}
	return errf(CodeQuotaExceeded, "The maximum entity size has been reached or exceeded for %s: '%s'. Size of entity in bytes:%d, Max entity size in bytes:%d.",
		kind, d.Path(), size, max)
}

// checkStateQuotaLocked refuses a session state that would take the
// entity over its maximum: session state counts towards it.
func (q *queue) checkStateQuotaLocked(grow int64) error {
	if grow <= 0 {
		return nil
	}
	acct := q.account()
	d := acct.desc.Load()
	eq := &acct.quota
	if used, max := eq.stored.Load()+eq.pending.Load(), q.b.maxBytes(d); used+grow > max {
		return quotaExceeded(d, used, max)
	}
	return nil
}
