package core

// commitTxn applies a transaction's settlements and sends as one write:
// the locks are consumed (and given back by the write's abort if anything
// fails), each settlement and the sends are planned into the write's
// batch, the batch is applied synced, and only then does memory change.
func (b *Broker) commitTxn(sends []txnSend, settles []txnSettle) error {
	if len(sends) == 0 && len(settles) == 0 {
		return nil
	}
	now := b.Now()
	w := b.newWrite(true)
	defer w.abort()
	if len(settles) > 0 {
		w.holds = make([]hold, 0, len(settles))
	}

	type held struct {
		q  *queue
		r  *msgRec
		st stateRec
		o  Outcome
	}
	hs := make([]held, 0, len(settles))
	for _, s := range settles {
		q := s.q
		q.mu.Lock()
		r, err := q.lockedLocked(s.tok, now)
		if err != nil {
			q.mu.Unlock()
			return err
		}
		q.consumeLockLocked(w, r, s.tok)
		hs = append(hs, held{q: q, r: r, st: r.stateRec, o: s.o})
		q.mu.Unlock()
	}

	sds := make([]settled, 0, len(hs))
	fail := func(err error) error {
		for i := range sds {
			sds[i].end(err)
		}
		return err
	}
	for _, h := range hs {
		var sd settled
		var err error
		switch h.o.Kind {
		case Complete:
			sd = h.q.planComplete(w, h.r, h.st)
		case Defer:
			sd, err = h.q.planDefer(w, h.r, h.st, h.o)
		case Abandon, Release:
			sd, err = h.q.planAbandon(w, h.r, h.st, h.o, now)
		default:
			sd, err = h.q.planDeadLetter(w, []*msgRec{h.r}, h.o.DeadLetterReason, h.o.DeadLetterDescription, h.o.Properties)
		}
		if err != nil {
			return fail(err)
		}
		sds = append(sds, sd)
	}

	p := &sendPlan{b: b, now: now, owned: true}
	for _, s := range sends {
		if s.group != 0 {
			if err := b.planTxnTransfer(p, s); err != nil {
				p.finish(true)
				return fail(err)
			}
			continue
		}
		e, err := b.sendTarget(s.path)
		if err == nil {
			if e.parts != nil && s.key != "" {
				e = e.parts[partitionOfKey(s.key, len(e.parts))]
			}
			err = p.add(e, s.msgs, nil, 0)
		}
		if err != nil {
			p.finish(true)
			return fail(err)
		}
	}
	w.batch.Ops = append(w.batch.Ops, p.ops().Ops...)
	w.batch.Sync = true // a release alone would not wait; the transaction does
	err := w.commit()
	p.finish(err != nil)
	for i := range sds {
		sds[i].end(err)
	}
	return err
}
