package core

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
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
// [ErrLockLost]. It returns once the outcome is durable. If it cannot be
// made durable (a storage fault: [ErrServerBusy]) nothing changed and the
// receiver keeps its lock, so it may retry.
func (b *Broker) Settle(ctx context.Context, path string, tok LockToken, o Outcome) error {
	if b.routed() {
		be, err := b.route(path)
		if err == nil {
			err = be.Settle(ctx, path, tok, o)
		}
		if err != nil {
			return routedSettleErr(err)
		}
		return nil
	}
	q, err := b.queueFor(path, byLock(tok))
	if err != nil {
		return err
	}
	if o.Kind < Complete || o.Kind > Release {
		return errf(CodeBadRequest, "unknown outcome %d", o.Kind)
	}
	now := b.Now()
	w := b.newSettleWrite(true)
	defer w.abort()
	q.mu.Lock()
	r, err := q.lockedLocked(tok, now)
	if err != nil {
		q.mu.Unlock()
		return err
	}
	if o.Kind == Complete && q.b.cfg.Faults.IgnoreComplete {
		q.mu.Unlock()
		return nil // acknowledged, changing nothing (test-only fault)
	}
	// The lock is consumed now, so a concurrent settle of the same token
	// fails with lock lost; w gives it back if the outcome fails.
	q.consumeLockLocked(w, r, tok)
	st := r.stateRec
	q.mu.Unlock()

	var sd settled
	switch o.Kind {
	case Complete:
		sd = q.planComplete(w, r, st)
	case Defer:
		sd, err = q.planDefer(w, r, st, o)
	case Abandon, Release:
		sd, err = q.planAbandon(w, r, st, o, now)
	default:
		sd, err = q.planDeadLetter(w, []*msgRec{r}, o.DeadLetterReason, o.DeadLetterDescription, o.Properties)
	}
	return w.settle(&sd, err)
}

// byLock picks the partition that handed out tok (queueFor).
func byLock(tok LockToken) func(*entity) *entity {
	return func(e *entity) *entity { return e.partForLock(tok) }
}

// lockedLocked finds the record locked by tok, checking the lock is live.
//
// Nothing is taken from a closed queue: once its entity is deleted, every
// record left in it is the deletion's (releaseSharedBodies).
func (q *queue) lockedLocked(tok LockToken, now int64) (*msgRec, error) {
	if q.mu.closed {
		return nil, entityNotFound(q.path)
	}
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

// consumeLockLocked takes r's lock away for a settlement planned in w,
// which gives it back (holdLock) unless the settlement commits.
func (q *queue) consumeLockLocked(w *write, r *msgRec, tok LockToken) {
	q.unlockLocked(r) // its timer entry goes with it (lock.go)
	w.hold(holdLock, q, r, tok)
}

// planComplete plans the removal of r, whose lock w holds.
func (q *queue) planComplete(w *write, r *msgRec, st stateRec) settled {
	w.deleteRecords(q, r.seq, st.owner, q.sharedBody(r))
	return settled{q: q, kind: settledRemoved, r: r, st: st}
}

// planAbandon plans giving r back. Release also takes back the delivery
// count. A message out of deliveries goes to the dead-letter subqueue; an
// expired one expires once the settlement is applied.
func (q *queue) planAbandon(w *write, r *msgRec, st stateRec, o Outcome, now int64) (settled, error) {
	d := q.desc()
	if o.Kind == Release {
		st.deliveryCount--
	} else if !q.isDeadLetter() && st.deliveryCount >= d.MaxDeliveryCount {
		return q.planDeadLetter(w, []*msgRec{r}, ReasonMaxDeliveryCount,
			maxDeliveryDescription(d.MaxDeliveryCount), o.Properties)
	}
	if len(o.Properties) > 0 {
		var err error
		if st, err = q.planRewrite(w, r, st, false, func(m *Message) { mergeProps(m, o.Properties) }); err != nil {
			return q.planDamaged(w, r, err)
		}
	} else if o.Kind == Release {
		// Like any delivery count, not waited for.
		w.batch.Sync = false
		w.setState(q, r.seq, &st)
	}
	if o.Kind == Release {
		w.cancelPull(r) // the count taken back is below its delivery record's (pull.go)
	}
	return settled{q: q, kind: settledReturned, r: r, st: st, now: now, released: o.Kind == Release, rewrote: len(o.Properties) > 0}, nil
}

// planDamaged plans a settlement that had to rewrite a body it could not
// read: the message goes to the dead-letter subqueue, which counts as the
// settlement. Other errors are returned as they are.
func (q *queue) planDamaged(w *write, r *msgRec, err error) (settled, error) {
	if !damaged(err) {
		return settled{}, err
	}
	return q.planDeadLetter(w, []*msgRec{r}, ReasonBodyUnreadable, "", nil)
}

func maxDeliveryDescription(n int32) string {
	return "Message could not be consumed after " + strconv.Itoa(int(n)) + " delivery attempts."
}

// planDefer plans setting r aside as deferred.
func (q *queue) planDefer(w *write, r *msgRec, st stateRec, o Outcome) (settled, error) {
	wasDeferred := st.state == StateDeferred
	st.state = StateDeferred
	if len(o.Properties) > 0 {
		var err error
		if st, err = q.planRewrite(w, r, st, false, func(m *Message) { mergeProps(m, o.Properties) }); err != nil {
			return q.planDamaged(w, r, err)
		}
	} else {
		w.setState(q, r.seq, &st)
	}
	return settled{q: q, kind: settledDeferred, r: r, st: st, wasDeferred: wasDeferred}, nil
}

// planRewrite adds to w the rewrite of r's body with change applied, and
// st as its state record, and returns the state as written. A body shared
// with other subscriptions is copied to q's own space, dropping q's
// reference to the shared one. A body that cannot be read fails with an
// error for which damaged is true, or, with stub, is replaced by its stub
// (damaged.go).
func (q *queue) planRewrite(w *write, r *msgRec, st stateRec, stub bool, change func(*Message)) (stateRec, error) {
	m, raw, err := q.loadBody(st.owner, r.seq)
	if err == nil {
		if err = m.ownProperties(); err != nil { // to be changed
			err = storeError(fmt.Errorf("message %d of '%s': %w", r.seq, q.path, err))
			raw = m.Body
		}
	}
	if err != nil {
		if !stub || !damaged(err) {
			return st, err
		}
		m = stubBody(q, r.seq, st, raw, err)
		st.size = int32(m.Size())
	}
	change(m)
	body, err := encodeBody(nil, m)
	if err != nil {
		return st, err
	}
	q.mu.Lock()
	shared := q.sharedBody(r)
	q.mu.Unlock()
	if shared {
		st.owner = q.id
		w.releaseRef(q, r.seq)
	}
	w.rewriteBody(st.owner, r.seq, body)
	w.setState(q, r.seq, &st)
	return st, nil
}

// mergeProps sets props on m, whose properties are decoded
// ([Message.ownProperties]).
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
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return time.Time{}, err
		}
		return be.RenewLock(ctx, path, tok)
	}
	q, err := b.queueFor(path, byLock(tok))
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
	q.setTimerLocked(r, r.lockedUntil) // the entry moves: one per lock
	return nanosToTime(r.lockedUntil), nil
}

// ReceiveDeferred locks (or, in receive-and-delete mode, removes) the
// deferred messages with the given sequence numbers. It fails with
// [ErrMessageNotFound] if any of them is not a deferred message of the
// entity (or is locked by someone else).
func (b *Broker) ReceiveDeferred(ctx context.Context, path string, mode ReceiveMode, seqs []int64) ([]*Message, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.ReceiveDeferred(ctx, path, mode, seqs)
	}
	qs, err := b.queuesFor(path)
	if err != nil {
		return nil, err
	}
	// A number asked for twice is one message, delivered (and locked) once.
	seqs = slices.Clone(seqs)
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	if len(qs) == 1 {
		return qs[0].receiveDeferred(mode, seqs)
	}
	// A partitioned entity: each number names its partition. All of them
	// are checked first, so that a number that names nothing fails the
	// call before any message is taken.
	e, dead := qs[0].ent.root(), qs[0].isDeadLetter()
	var byPart [][]int64
	var parts []*queue
	for _, s := range seqs {
		pe := e.partForSeq(s)
		if pe == nil {
			return nil, errf(CodeMessageNotFound, "Failed to lock one or more specified messages. Either the message is already locked or it does not exist: sequence number %d in '%s'.", s, qs[0].path)
		}
		q := pe.q
		if dead {
			q = q.dead
		}
		if len(parts) == 0 || parts[len(parts)-1] != q {
			parts = append(parts, q)
			byPart = append(byPart, nil)
		}
		byPart[len(byPart)-1] = append(byPart[len(byPart)-1], s)
	}
	for i, q := range parts {
		if err := q.checkDeferred(byPart[i]); err != nil {
			return nil, err
		}
	}
	var out []*Message
	for i, q := range parts {
		msgs, err := q.receiveDeferred(mode, byPart[i])
		if err != nil {
			// Taken by another receiver since the check: what this call
			// took stays locked until its locks lapse.
			return nil, err
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// checkDeferred fails as receiveDeferred would if a number is not a
// deferred, unlocked message of q now.
func (q *queue) checkDeferred(seqs []int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return entityNotFound(q.path)
	}
	for _, s := range seqs {
		if r := q.mu.deferred[s]; r == nil || r.locked() {
			return errf(CodeMessageNotFound, "Failed to lock one or more specified messages. Either the message is already locked or it does not exist: sequence number %d in '%s'.", s, q.path)
		}
	}
	return nil
}

// receiveDeferred is ReceiveDeferred on one queue, seqs sorted and
// without repeats.
func (q *queue) receiveDeferred(mode ReceiveMode, seqs []int64) ([]*Message, error) {
	now := q.b.Now()
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return nil, entityNotFound(q.path)
	}
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
