package core

import "github.com/omnibusmq/omnibus/storage"

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
	errs = make([]error, len(toks))
	q, err := b.queueFor(path)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	type done struct {
		r      *msgRec
		st     stateRec
		shared bool
		i      int
	}
	now := b.Now()
	got := make([]done, 0, len(toks))
	q.mu.Lock()
	for i, tok := range toks {
		r, err := q.lockedLocked(tok, now)
		if err != nil {
			errs[i] = err
			continue
		}
		// Consumed now, as in Settle.
		delete(q.mu.locked, tok)
		if s := q.sessionLocked(r); s != nil {
			delete(s.locked, tok)
		}
		r.lock = LockToken{}
		got = append(got, done{r: r, st: r.stateRec, i: i})
	}
	q.mu.Unlock()
	if len(got) == 0 {
		return errs
	}
	batch := storage.Batch{Sync: durable}
	for j := range got {
		d := &got[j]
		d.shared = q.sharedBody(d.r)
		q.deleteRecords(&batch, d.r.seq, d.st.owner, d.shared)
	}
	if err := b.store.Apply(&batch); err != nil {
		for _, d := range got {
			q.restoreRef(d.r.seq, d.shared)
			q.relock(d.r, toks[d.i])
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
	return errs
}
