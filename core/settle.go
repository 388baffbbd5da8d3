package core

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/omnibusmq/omnibus/storage"
)

// OutcomeKind is what a receiver decided about a locked message.
type OutcomeKind uint8

// Outcomes. Every settlement, from either front, is one of these.
const (
	Complete   OutcomeKind = iota + 1 // processed: remove it
	Abandon                           // give it back; the next delivery counts
	DeadLetter                        // move it to the dead-letter subqueue
	Defer                             // keep it aside; receivable only by sequence number
	Release                           // give it back as if never delivered (AMQP released)
)

// Outcome is a settlement.
type Outcome struct {
	Kind OutcomeKind
	// Properties are application properties to merge into the message
	// (abandon, defer, dead-letter). A nil value removes nothing: it sets
	// the property to nil.
	Properties map[string]any
	// DeadLetterReason and DeadLetterDescription set the DeadLetterReason
	// and DeadLetterErrorDescription properties (dead-letter only).
	DeadLetterReason      string
	DeadLetterDescription string
}

// Reasons the broker itself dead-letters for, as Service Bus spells them.
const (
	ReasonMaxDeliveryCount = "MaxDeliveryCountExceeded"
	ReasonTTLExpired       = "TTLExpiredException"
	ReasonFilterException  = "FilterEvaluationException"
)

// Settle applies an outcome to the message locked by tok on the entity at
// path. Settling an unknown, expired or already settled lock fails with
// [ErrLockLost]. It returns once the outcome is durable.
func (b *Broker) Settle(ctx context.Context, path string, tok LockToken, o Outcome) error {
	q, err := b.queueFor(path)
	if err != nil {
		return err
	}
	now := b.Now()
	q.mu.Lock()
	r, err := q.lockedLocked(tok, now)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	// The lock is consumed now, so a concurrent settle of the same token
	// fails with lock lost.
	delete(q.mu.locked, tok)
	if s := q.sessionLocked(r); s != nil {
		delete(s.locked, tok)
	}
	r.lock = LockToken{}
	st := r.stateRec
	q.mu.Unlock()

	switch o.Kind {
	case Complete:
		return q.complete(r, st, tok)
	case Defer:
		return q.deferMsg(r, st, tok, o)
	case Abandon, Release:
		err = q.abandon(r, st, o, now)
	case DeadLetter:
		err = q.deadLetter([]*msgRec{r}, o.DeadLetterReason, o.DeadLetterDescription, o.Properties)
	default:
		err = errf(CodeBadRequest, "unknown outcome %d", o.Kind)
	}
	if err != nil {
		// Nothing was changed durably: the receiver keeps its lock and
		// may retry, and the message is not stranded outside every list.
		q.relock(r, tok)
	}
	return err
}

// lockedLocked finds the record locked by tok, checking the lock is live.
func (q *queue) lockedLocked(tok LockToken, now int64) (*msgRec, error) {
	r := q.mu.locked[tok]
	if r == nil {
		return nil, lockLost()
	}
	if q.b.cfg.Faults.IgnoreLockExpiry {
		return r, nil
	}
	if s := q.sessionLocked(r); s != nil && s.locked[tok] == r {
		if s.lockedUntil <= now {
			return nil, errf(CodeSessionLockLost, "The session lock has expired on the MessageSession. Accept a new MessageSession.")
		}
		return r, nil
	}
	if r.lockedUntil <= now {
		return nil, lockLost()
	}
	return r, nil
}

// relock restores a lock whose settlement failed to persist, with its
// expiry (the timer entry may have been dropped meanwhile).
func (q *queue) relock(r *msgRec, tok LockToken) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r.lock = tok
	q.mu.locked[tok] = r
	if s := q.sessionLocked(r); s != nil && s.lock != (LockToken{}) {
		s.locked[tok] = r
		return
	}
	q.addTimerLocked(timeItem{at: r.lockedUntil, rec: r, tok: tok})
}

func (q *queue) complete(r *msgRec, st stateRec, tok LockToken) error {
	var batch storage.Batch
	batch.Sync = true
	shared := q.sharedBody(r)
	q.deleteRecords(&batch, r.seq, st.owner, shared)
	if err := q.b.store.Apply(&batch); err != nil {
		q.restoreRef(r.seq, shared)
		q.relock(r, tok)
		return err
	}
	q.mu.Lock()
	if st.state == StateDeferred {
		delete(q.mu.deferred, r.seq)
	}
	q.removeLocked(r)
	q.mu.Unlock()
	return nil
}

// abandon unlocks r. Release also takes back the delivery count. A
// message out of deliveries goes to the dead-letter subqueue, an expired
// one expires.
func (q *queue) abandon(r *msgRec, st stateRec, o Outcome, now int64) error {
	d := q.desc()
	if o.Kind == Release {
		q.mu.Lock()
		r.deliveryCount--
		st = r.stateRec
		q.mu.Unlock()
	} else if !q.isDeadLetter() && st.deliveryCount >= d.MaxDeliveryCount {
		return q.deadLetter([]*msgRec{r}, ReasonMaxDeliveryCount,
			maxDeliveryDescription(d.MaxDeliveryCount), o.Properties)
	}
	if len(o.Properties) > 0 {
		if err := q.rewriteBody(r, st, func(m *Message) { mergeProps(m, o.Properties) }); err != nil {
			return err
		}
	} else if o.Kind == Release {
		var batch storage.Batch
		batch.Set(seqKey(tabState, q.id, r.seq), st.encode(nil))
		if err := q.b.store.Apply(&batch); err != nil {
			return err
		}
	}
	q.mu.Lock()
	if q.pastExpiry(r, now) && !q.isDeadLetter() && r.state != StateDeferred {
		q.mu.expiring = append(q.mu.expiring, r)
		q.mu.Unlock()
		q.kickExpiry()
		return nil
	}
	q.returnLocked(r)
	q.serveWaitersLocked(now)
	q.mu.Unlock()
	return nil
}

func maxDeliveryDescription(n int32) string {
	return "Message could not be consumed after " + strconv.Itoa(int(n)) + " delivery attempts."
}

func (q *queue) deferMsg(r *msgRec, st stateRec, tok LockToken, o Outcome) error {
	wasDeferred := st.state == StateDeferred
	st.state = StateDeferred
	var err error
	if len(o.Properties) > 0 {
		err = q.rewriteBodyState(r, st, func(m *Message) { mergeProps(m, o.Properties) })
	} else {
		batch := storage.Batch{Sync: true}
		batch.Set(seqKey(tabState, q.id, r.seq), st.encode(nil))
		err = q.b.store.Apply(&batch)
	}
	if err != nil {
		q.relock(r, tok)
		return err
	}
	if wasDeferred {
		return nil
	}
	q.mu.Lock()
	q.mu.activeN--
	r.state = StateDeferred
	q.mu.deferred[r.seq] = r
	q.mu.deferredN++
	q.mu.Unlock()
	return nil
}

// rewriteBody applies change to r's message and stores it durably. A body
// shared with other subscriptions is copied to this queue's own space.
func (q *queue) rewriteBody(r *msgRec, st stateRec, change func(*Message)) error {
	return q.rewriteBodyState(r, st, change)
}

// rewriteBodyState is rewriteBody that also writes st as r's state.
func (q *queue) rewriteBodyState(r *msgRec, st stateRec, change func(*Message)) error {
	m, err := q.loadBody(st.owner, r.seq)
	if err != nil {
		return err
	}
	change(m)
	body, err := encodeBody(nil, m)
	if err != nil {
		return err
	}
	batch := storage.Batch{Sync: true}
	shared := q.sharedBody(r)
	if shared {
		st.owner = q.id
	}
	batch.Set(seqKey(tabBody, st.owner, r.seq), body)
	batch.Set(seqKey(tabState, q.id, r.seq), st.encode(nil))
	if shared && q.shared.releaseRef(r.seq) {
		batch.Delete(seqKey(tabBody, q.shared.id, r.seq))
	}
	if err := q.b.store.Apply(&batch); err != nil {
		return err
	}
	q.mu.Lock()
	r.owner = st.owner
	q.mu.Unlock()
	return nil
}

func mergeProps(m *Message, props map[string]any) {
	if len(props) == 0 {
		return
	}
	if m.ApplicationProperties == nil {
		m.ApplicationProperties = make(map[string]any, len(props))
	}
	for k, v := range props {
		m.ApplicationProperties[k] = v
	}
}

// RenewLock extends the lock tok holds by the entity's lock duration and
// returns the new expiry.
func (b *Broker) RenewLock(ctx context.Context, path string, tok LockToken) (time.Time, error) {
	q, err := b.queueFor(path)
	if err != nil {
		return time.Time{}, err
	}
	now := b.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	r, err := q.lockedLocked(tok, now)
	if err != nil {
		return time.Time{}, err
	}
	if s := q.sessionLocked(r); s != nil && s.locked[tok] == r {
		return nanosToTime(s.lockedUntil), nil // renew the session lock instead
	}
	r.lockedUntil = now + int64(q.lockDuration())
	q.addTimerLocked(timeItem{at: r.lockedUntil, rec: r, tok: tok})
	return nanosToTime(r.lockedUntil), nil
}

// ReceiveDeferred locks (or, in receive-and-delete mode, removes) the
// deferred messages with the given sequence numbers. It fails with
// [ErrMessageNotFound] if any of them is not a deferred message of the
// entity (or is locked by someone else).
func (b *Broker) ReceiveDeferred(ctx context.Context, path string, mode ReceiveMode, seqs []int64) ([]*Message, error) {
	q, err := b.queueFor(path)
	if err != nil {
		return nil, err
	}
	// A number asked for twice is one message, delivered (and locked) once.
	seqs = slices.Clone(seqs)
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	now := b.Now()
	q.mu.Lock()
	for _, s := range seqs {
		r := q.mu.deferred[s]
		if r == nil || r.locked() {
			q.mu.Unlock()
			return nil, errf(CodeMessageNotFound, "Failed to lock one or more specified messages. Either the message is already locked or it does not exist: sequence number %d in '%s'.", s, q.path)
		}
	}
	got := make([]taken, 0, len(seqs))
	for _, s := range seqs {
		r := q.mu.deferred[s]
		if mode == ReceiveAndDelete {
			delete(q.mu.deferred, s)
		}
		got = append(got, q.deliverLocked(r, now, mode))
	}
	q.mu.Unlock()
	return q.finish(got, mode)
}
