package core

import (
	"github.com/omnibusmq/omnibus/storage"
)

// deadLetter moves recs, which the caller has taken out of every
// structure of q (avail, locked; deferred ones may still be in the
// deferred map), to the dead-letter subqueue — or to the entity named by
// ForwardDeadLetteredMessagesTo — stamping the reason and description as
// application properties. The move is one durable batch: the message is
// in exactly one place before and after.
func (q *queue) deadLetter(recs []*msgRec, reason, description string, props map[string]any) error {
	if q.isDeadLetter() {
		// A dead-lettered message cannot be dead-lettered again: Service
		// Bus keeps it where it is (it only updates properties).
		for _, r := range recs {
			q.mu.Lock()
			st := r.stateRec
			q.mu.Unlock()
			if err := q.rewriteBody(r, st, func(m *Message) { mergeProps(m, props) }); err != nil {
				return err
			}
			q.mu.Lock()
			q.returnLocked(r)
			q.serveWaitersLocked(q.b.Now())
			q.mu.Unlock()
		}
		return nil
	}
	d := q.desc()
	msgs := make([]*Message, len(recs))
	for i, r := range recs {
		q.mu.Lock()
		owner, seq := r.owner, r.seq
		cached := r.msg
		q.mu.Unlock()
		var m *Message
		if cached != nil {
			m = cached.Clone()
		} else {
			var err error
			if m, err = q.loadBody(owner, seq); err != nil {
				return err
			}
		}
		mergeProps(m, props)
		if m.ApplicationProperties == nil {
			m.ApplicationProperties = make(map[string]any, 2)
		}
		m.ApplicationProperties["DeadLetterReason"] = reason
		m.ApplicationProperties["DeadLetterErrorDescription"] = description
		msgs[i] = m
	}
	if d.ForwardDeadLetteredMessagesTo != "" {
		return q.forwardDeadLetters(recs, msgs, d)
	}
	batch := storage.Batch{Sync: true}
	moved := make([]*msgRec, len(recs))
	for i, r := range recs {
		q.mu.Lock()
		st := r.stateRec
		shared := q.sharedBody(r)
		q.mu.Unlock()
		body, err := encodeBody(nil, msgs[i])
		if err != nil {
			return err
		}
		nr := &msgRec{seq: r.seq, idx: -1, stateRec: st}
		nr.state = StateActive
		nr.expiresAt = 0 // dead-lettered messages do not expire
		nr.scheduledAt = 0
		if shared {
			nr.owner = q.dead.id
			if q.shared.releaseRef(r.seq) {
				batch.Delete(seqKey(tabBody, q.shared.id, r.seq))
			}
		}
		batch.Delete(seqKey(tabState, q.id, r.seq))
		batch.Set(seqKey(tabBody, nr.owner, r.seq), body)
		batch.Set(seqKey(tabState, q.dead.id, r.seq), nr.encode(nil))
		moved[i] = nr
	}
	if err := q.b.store.Apply(&batch); err != nil {
		return err
	}
	q.forget(recs)
	now := q.b.Now()
	q.dead.mu.Lock()
	for _, nr := range moved {
		q.dead.insertLocked(nr, now)
	}
	q.dead.serveWaitersLocked(now)
	q.dead.mu.Unlock()
	return nil
}

// forget drops moved-away records from q's structures and counts.
func (q *queue) forget(recs []*msgRec) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range recs {
		if r.state == StateDeferred {
			delete(q.mu.deferred, r.seq)
		}
		q.removeLocked(r)
	}
}

// forwardDeadLetters sends dead-lettered messages to the configured
// entity instead of the subqueue, removing them here in the same batch.
func (q *queue) forwardDeadLetters(recs []*msgRec, msgs []*Message, d *Entity) error {
	b := q.b
	t, err := b.lookup(ParseAddress(d.ForwardDeadLetteredMessagesTo))
	if err != nil {
		return errf(CodeNotFound, "'%s' forwards dead letters to '%s', which does not exist", d.Path(), d.ForwardDeadLetteredMessagesTo)
	}
	p := &sendPlan{b: b, now: b.Now(), batch: storage.Batch{Sync: true}}
	for i, r := range recs {
		q.mu.Lock()
		owner, shared := r.owner, q.sharedBody(r)
		q.mu.Unlock()
		q.deleteRecords(&p.batch, r.seq, owner, shared)
		msgs[i].DeadLetterSource = q.path
	}
	err = p.add(t, msgs, nil, 1)
	if err == nil {
		err = b.store.Apply(&p.batch)
	}
	p.finish(err != nil)
	if err != nil {
		return err
	}
	q.forget(recs)
	return nil
}
