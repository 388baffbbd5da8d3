package core

// CompleteMany completes the messages locked by toks on the entity at
// path, as [Broker.Settle] with [Complete] would one by one, but with one
// store write for all of them: a front that receives a burst of
// completions answers them for the price of one. errs[i] is the outcome
// of toks[i]: nil once its removal is written, or the error Settle would
// have returned (lock lost, session lock lost, a failed write). A token
// listed twice is completed once; the second gets lock lost.
//
// With durable, CompleteMany returns once the removal is on disk, as a
// front must before it tells a client its completion was accepted. A
// front whose client is told nothing (AMQP: a delivery the client settled
// itself, in receiver-settle-mode first) passes false: the removal is
// written at once and reaches the disk with the store's next synced
// write or shortly after (see storage.Batch.Sync). A crash before that
// makes the messages available again, the at-least-once delivery such a
// client chose; a message is never lost.
func (b *Broker) CompleteMany(path string, toks []LockToken, durable bool) (errs []error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			errs = make([]error, len(toks))
			for i := range errs {
				errs[i] = routedSettleErr(err)
			}
			return errs
		}
		errs = be.CompleteMany(path, toks, durable)
		for i := range errs {
			if errs[i] != nil {
				errs[i] = routedSettleErr(errs[i])
			}
		}
		return errs
	}
	errs = make([]error, len(toks))
	qs, err := b.queuesFor(path)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if len(qs) == 1 {
		return qs[0].completeMany(toks, durable, errs)
	}
	// A partitioned entity: each token to the partition that locked it.
	e := qs[0].ent.root()
	at := make(map[int][]int)
	for i, tok := range toks {
		p := e.partForLock(tok).part
		at[p] = append(at[p], i)
	}
	for p, idx := range at {
		sub := make([]LockToken, len(idx))
		for j, i := range idx {
			sub[j] = toks[i]
		}
		subErrs := qs[p].completeMany(sub, durable, make([]error, len(sub)))
		for j, i := range idx {
			errs[i] = subErrs[j]
		}
	}
	return errs
}

// completeMany is CompleteMany on one queue; errs has a place per token.
func (q *queue) completeMany(toks []LockToken, durable bool, errs []error) []error {
	b := q.b
	type done struct {
		r  *msgRec
		st stateRec
		i  int
	}
	now := b.Now()
	w := b.newSettleWrite(durable)
	if len(toks) > 1 {
		w.holds = make([]hold, 0, len(toks)) // one per lock: no regrowing
	}
	defer w.abort()
	got := make([]done, 0, len(toks))
	q.mu.Lock()
	for i, tok := range toks {
		r, err := q.lockedLocked(tok, now)
		if err != nil {
			errs[i] = err
			continue
		}
		if q.b.cfg.Faults.IgnoreComplete {
			continue // acknowledged, changing nothing (test-only fault)
		}
		// Consumed now, as in Settle.
		q.consumeLockLocked(w, r, tok)
		got = append(got, done{r: r, st: r.stateRec, i: i})
	}
	q.mu.Unlock()
	if len(got) == 0 {
		return errs
	}
	for _, d := range got {
		w.deleteRecords(q, d.r.seq, d.st.owner, q.sharedBody(d.r))
	}
	if err := w.commit(); err != nil {
		for _, d := range got {
			errs[d.i] = err
		}
		return errs
	}
	q.mu.Lock()
	for _, d := range got {
		if d.st.state == StateDeferred {
			delete(q.mu.deferred, d.r.seq)
		}
		q.removeLocked(d.r)
	}
	q.mu.Unlock()
	q.count(statCompleted, len(got))
	return errs
}
