package core

import (
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Expiry and timers.
//
// Message expiry (TTL) is evaluated when a receiver would take the
// message, as Service Bus does ("TTL is not enforced when no clients are
// actively listening"): takeLocked sets expired records aside in
// q.mu.expiring and expireLoop moves them to the dead-letter subqueue
// (DeadLetteringOnMessageExpiration) or deletes them. A locked message is
// never expired under its lock; when the lock ends (abandon or expiry) it
// is checked again.
//
// Lock expiry and scheduled activation are driven by the broker timer,
// which calls tick with the current time.

// kickExpiry starts expireLoop if expired records wait and none runs.
func (q *queue) kickExpiry() {
	q.mu.Lock()
	if len(q.mu.expiring) == 0 || q.mu.expiryBusy || q.mu.closed {
		q.mu.Unlock()
		return
	}
	q.mu.expiryBusy = true
	q.mu.Unlock()
	q.b.run(q.expireLoop)
}

// expireLoop disposes of expired records until none are left. A
// disposal that fails gives its records back to avail, where the next
// receiver finds them expired again.
func (q *queue) expireLoop() {
	for {
		w := q.b.newWrite(false)
		q.mu.Lock()
		recs := q.mu.expiring
		q.mu.expiring = nil
		if len(recs) == 0 || q.mu.closed {
			q.mu.expiryBusy = false
			q.mu.Unlock()
			return
		}
		for _, r := range recs {
			w.hold(holdAside, q, r, LockToken{})
		}
		q.mu.Unlock()
		err := q.expire(w, recs)
		w.abort()
		if err != nil {
			q.b.warnStorage("expiring messages failed; they stay stored and expire again later", zap.String("entity", q.path), zap.Error(err))
			q.mu.Lock()
			q.mu.expiryBusy = false
			q.mu.Unlock()
			return
		}
	}
}

// expire dead-letters or drops expired records, which w holds.
func (q *queue) expire(w *write, recs []*msgRec) error {
	if q.desc().DeadLetteringOnMessageExpiration {
		err := q.deadLetter(w, recs, ReasonTTLExpired, "The message expired and was dead lettered.", nil)
		if err == nil {
			q.count(statExpired, len(recs))
		}
		return err
	}
	// Dropping an expired message need not wait for fsync: if the delete
	// is lost in a crash, the message is found expired again.
	for _, r := range recs {
		q.mu.Lock()
		owner, shared := r.owner, q.sharedBody(r)
		q.mu.Unlock()
		w.deleteRecords(q, r.seq, owner, shared)
	}
	if err := w.commit(); err != nil {
		return err
	}
	q.count(statExpired, len(recs))
	q.forget(recs)
	return nil
}

// tick handles every timer of q that is due at now: expired locks are
// released (counting the delivery; dead-lettering a message out of
// deliveries) and scheduled messages become active.
func (q *queue) tick(now int64) {
	var outOfDeliveries []*msgRec
	var activated []*msgRec
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return
	}
	q.mu.wakeAt = 0
	maxDC := q.desc().MaxDeliveryCount
	for len(q.mu.timers) > 0 && q.mu.timers.next() <= now {
		it := q.mu.timers.pop()
		r := it.rec
		switch {
		case it.sess != nil:
			outOfDeliveries = append(outOfDeliveries, q.expireSessionLockLocked(it.sess, now)...)
		case r.locked():
			// Entries leave with their lock and move when it is
			// renewed, so a due entry is its lock's expiry.
			if q.b.cfg.Faults.IgnoreLockExpiry {
				continue
			}
			q.unlockLocked(r)
			q.count(statLockExpired, 1)
			switch {
			case r.state != StateDeferred && !q.isDeadLetter() && r.deliveryCount >= maxDC:
				outOfDeliveries = append(outOfDeliveries, r)
			case r.state != StateDeferred && q.pastExpiry(r, now) && !q.isDeadLetter():
				q.mu.expiring = append(q.mu.expiring, r)
			default:
				q.returnLocked(r)
			}
		default:
			if q.mu.scheduled[r.seq] != r {
				continue // being cancelled
			}
			delete(q.mu.scheduled, r.seq)
			r.state = StateActive
			q.makeAvailLocked(r)
			q.mu.activeN++
			activated = append(activated, r)
		}
	}
	if next := q.mu.timers.next(); next != 0 {
		q.mu.wakeAt = next
		q.b.timer.wake(q, next)
	}
	q.serveWaitersLocked(now)
	states := make([][]byte, len(activated))
	for i, r := range activated {
		states[i] = r.stateRec.encode(nil)
	}
	q.mu.Unlock()
	q.kickExpiry()

	if len(activated) > 0 {
		// Holding scheduled messages keeps an entity from idling until
		// they activate (AutoDeleteOnIdle).
		q.ent.touch(now)
		// The state change need not be synced: a scheduled message found
		// past its time at recovery is activated then.
		// Memory is ahead of the store here, and may stay so if the write
		// fails: a scheduled record whose time has passed is active by
		// definition (Broker.Check counts it so).
		var batch storage.Batch
		for i, r := range activated {
			batch.Set(seqKey(tabState, q.id, r.seq), states[i])
		}
		if err := q.b.store.Apply(&batch); err != nil {
			q.b.warnStorage("recording scheduled activation failed", zap.String("entity", q.path), zap.Error(err))
		}
	}
	if len(outOfDeliveries) > 0 {
		q.deadLetterAside(outOfDeliveries, ReasonMaxDeliveryCount, maxDeliveryDescription(q.desc().MaxDeliveryCount))
	}
}

// deadLetterAside dead-letters records the caller has set aside (taken out
// of avail under q.mu). If the move fails they go back to avail and the
// failure is logged: they are delivered again and met again.
func (q *queue) deadLetterAside(recs []*msgRec, reason, description string) {
	w := q.b.newWrite(true)
	defer w.abort()
	for _, r := range recs {
		w.hold(holdAside, q, r, LockToken{})
	}
	if err := q.deadLetter(w, recs, reason, description, nil); err != nil && !q.b.closed() {
		q.b.warnStorage("dead-lettering messages failed; they stay in their queue", zap.String("entity", q.path),
			zap.String("reason", reason), zap.Error(err))
	}
}

// pastExpiry reports whether r's time to live ended by now (never, with
// the test-only fault IgnoreMessageExpiry).
func (q *queue) pastExpiry(r *msgRec, now int64) bool {
	return r.expiresAt != 0 && r.expiresAt <= now && !q.b.cfg.Faults.IgnoreMessageExpiry
}
