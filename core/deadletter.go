package core

// deadLetter moves recs, which the caller holds through w (a consumed
// lock, or records set aside), to the dead-letter subqueue — or to the
// entity named by ForwardDeadLetteredMessagesTo — stamping the reason and
// description as application properties. The move is w's one durable
// batch: each message is in exactly one place before and after, and q's
// memory changes only once it committed. A message whose body cannot be
// read moves with a stub body and ReasonBodyUnreadable (damaged.go).
func (q *queue) deadLetter(w *write, recs []*msgRec, reason, description string, props map[string]any) error {
	sd, err := q.planDeadLetter(w, recs, reason, description, props)
	return w.settle(&sd, err)
}

// planDeadLetter plans what deadLetter does into w.
func (q *queue) planDeadLetter(w *write, recs []*msgRec, reason, description string, props map[string]any) (settled, error) {
	w.batch.Sync = true
	if q.isDeadLetter() {
		return q.planDeadLetterAgain(w, recs, props)
	}
	if q.b.cfg.Faults.DropDeadLetters {
		return q.planDropDeadLetters(w, recs), nil
	}
	d := q.desc()
	msgs := make([]*Message, len(recs))
	stubs := make([]bool, len(recs))
	for i, r := range recs {
		m, stub, err := q.bodyForMove(r)
		if err != nil {
			return settled{}, err
		}
		if !stub {
			mergeProps(m, props)
			if m.ApplicationProperties == nil {
				m.ApplicationProperties = make(map[string]any, 2)
			}
			m.ApplicationProperties["DeadLetterReason"] = reason
			m.ApplicationProperties["DeadLetterErrorDescription"] = description
		}
		msgs[i], stubs[i] = m, stub
	}
	if d.ForwardDeadLetteredMessagesTo != "" {
		return q.planForwardDeadLetters(w, recs, msgs, d)
	}
	moved := make([]*msgRec, len(recs))
	for i, r := range recs {
		q.mu.Lock()
		st := r.stateRec
		shared := q.sharedBody(r)
		q.mu.Unlock()
		body, err := encodeBody(nil, msgs[i])
		if err != nil {
			return settled{}, err
		}
		nr := &msgRec{seq: r.seq, idx: -1, stateRec: st}
		nr.state = StateActive
		nr.expiresAt = 0 // dead-lettered messages do not expire
		nr.scheduledAt = 0
		if stubs[i] {
			nr.size = int32(msgs[i].Size())
		}
		if shared {
			nr.owner = q.dead.id
			w.releaseRef(q, r.seq)
		}
		w.batch.Delete(seqKey(tabState, q.id, r.seq))
		w.rewriteBody(nr.owner, r.seq, body)
		w.batch.Set(seqKey(tabState, q.dead.id, r.seq), nr.encode(nil))
		moved[i] = nr
	}
	return settled{q: q, kind: settledDeadLettered, recs: recs, moved: moved}, nil
}

// planDeadLetterAgain plans a dead-letter of messages already in a
// dead-letter subqueue: Service Bus keeps them where they are and only
// merges the properties. A damaged body is replaced by its stub.
func (q *queue) planDeadLetterAgain(w *write, recs []*msgRec, props map[string]any) (settled, error) {
	sts := make([]stateRec, len(recs))
	for i, r := range recs {
		q.mu.Lock()
		st := r.stateRec
		q.mu.Unlock()
		st, err := q.planRewrite(w, r, st, true, func(m *Message) { mergeProps(m, props) })
		if err != nil {
			return settled{}, err
		}
		sts[i] = st
	}
	return settled{q: q, kind: settledKept, recs: recs, sts: sts}, nil
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

// planForwardDeadLetters plans sending dead-lettered messages to the
// configured entity instead of the subqueue, removing them here in the
// same write.
func (q *queue) planForwardDeadLetters(w *write, recs []*msgRec, msgs []*Message, d *Entity) (settled, error) {
	b := q.b
	p := &sendPlan{b: b, now: b.Now(), move: true} // a move: never refused for quota
	t, err := p.forwardTarget(d, d.ForwardDeadLetteredMessagesTo, 0)
	if err != nil {
		return settled{}, errf(CodeNotFound, "'%s' forwards dead letters to '%s', which does not exist", d.Path(), d.ForwardDeadLetteredMessagesTo)
	}
	for i, r := range recs {
		q.mu.Lock()
		owner, shared := r.owner, q.sharedBody(r)
		q.mu.Unlock()
		w.deleteRecords(q, r.seq, owner, shared)
		msgs[i].DeadLetterSource = q.path
	}
	if err := p.addForwarded(q.ent, t, msgs, nil, 1); err != nil {
		p.finish(true)
		return settled{}, err
	}
	// The send's records ride in the move's batch: one write.
	w.batch.Ops = append(w.batch.Ops, p.ops().Ops...)
	return settled{q: q, kind: settledForwarded, recs: recs, fwd: p}, nil
}

// planDropDeadLetters plans deleting recs instead of moving them: the
// test-only fault DropDeadLetters.
func (q *queue) planDropDeadLetters(w *write, recs []*msgRec) settled {
	for _, r := range recs {
		q.mu.Lock()
		owner, shared := r.owner, q.sharedBody(r)
		q.mu.Unlock()
		w.deleteRecords(q, r.seq, owner, shared)
	}
	return settled{q: q, kind: settledForwarded, recs: recs}
}
