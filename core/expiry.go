package core

import (
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

// expireLoop disposes of expired records until none are left.
func (q *queue) expireLoop() {
	for {
		q.mu.Lock()
		recs := q.mu.expiring
		q.mu.expiring = nil
		if len(recs) == 0 || q.mu.closed {
			q.mu.expiryBusy = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if err := q.expire(recs); err != nil {
			q.b.log.Warn("expiring messages failed; they stay stored and expire again later")
			q.mu.Lock()
			for _, r := range recs {
				q.returnLocked(r)
			}
			q.mu.expiryBusy = false
			q.mu.Unlock()
			return
		}
	}
}

func (q *queue) expire(recs []*msgRec) error {
	if q.desc().DeadLetteringOnMessageExpiration {
		return q.deadLetter(recs, ReasonTTLExpired, "The message expired and was dead lettered.", nil)
	}
	// Dropping an expired message need not wait for fsync: if the delete
	// is lost in a crash, the message is found expired again.
	var batch storage.Batch
	shared := make([]bool, len(recs))
	for i, r := range recs {
		q.mu.Lock()
		owner := r.owner
		shared[i] = q.sharedBody(r)
		q.mu.Unlock()
		q.deleteRecords(&batch, r.seq, owner, shared[i])
	}
	if err := q.b.store.Apply(&batch); err != nil {
		for i, r := range recs {
			q.restoreRef(r.seq, shared[i])
		}
		return err
	}
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
	q.mu.wakeAt = 0
	maxDC := q.desc().MaxDeliveryCount
	for len(q.mu.timers) > 0 && q.mu.timers.next() <= now {
		it := q.mu.timers.pop()
		r := it.rec
		switch {
		case it.sess != nil:
			outOfDeliveries = append(outOfDeliveries, q.expireSessionLockLocked(it.sess, it.tok, now)...)
		case it.tok != (LockToken{}):
			if r.lock != it.tok || r.lockedUntil > now || q.b.cfg.Faults.IgnoreLockExpiry {
				continue // settled, renewed or re-locked since
			}
			delete(q.mu.locked, r.lock)
			r.lock = LockToken{}
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
				continue // cancelled
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
		var batch storage.Batch
		for i, r := range activated {
			batch.Set(seqKey(tabState, q.id, r.seq), states[i])
		}
		if err := q.b.store.Apply(&batch); err != nil {
			q.b.log.Warn("recording scheduled activation failed")
		}
	}
	if len(outOfDeliveries) > 0 {
		d := q.desc()
		if err := q.deadLetter(outOfDeliveries, ReasonMaxDeliveryCount, maxDeliveryDescription(d.MaxDeliveryCount), nil); err != nil {
			q.b.log.Warn("dead-lettering messages out of deliveries failed")
			q.mu.Lock()
			for _, r := range outOfDeliveries {
				q.returnLocked(r)
			}
			q.mu.Unlock()
		}
	}
}

// pastExpiry reports whether r's time to live ended by now (never, with
// the test-only fault IgnoreMessageExpiry).
func (q *queue) pastExpiry(r *msgRec, now int64) bool {
	return r.expiresAt != 0 && r.expiresAt <= now && !q.b.cfg.Faults.IgnoreMessageExpiry
}
