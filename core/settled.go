package core

// Settlements in two steps.
//
// A settlement is planned into a write (the plan* functions of settle.go
// and deadletter.go: batch operations plus the reservations that keep the
// records out of reach) and applied to memory once that write committed.
// A single settlement plans, commits and applies at once (write.settle);
// a transaction (txn.go) plans all of its settlements and sends into one
// write and applies each once that write committed.

// settledKind says what memory makes of a committed settlement.
type settledKind uint8

const (
	settledRemoved      settledKind = iota + 1 // completed: r leaves q
	settledDeferred                            // r is deferred
	settledReturned                            // abandoned or released: r is receivable again
	settledDeadLettered                        // recs moved to q's dead-letter subqueue as moved
	settledKept                                // dead-lettered again: recs stay in the subqueue with sts
	settledForwarded                           // dead-lettered to another entity by fwd
)

// settled is one settlement planned into a write.
type settled struct {
	q           *queue
	kind        settledKind
	r           *msgRec    // removed, deferred, returned
	st          stateRec   // its state as written
	now         int64      // returned: the time of the settlement
	wasDeferred bool       // deferred: it already was
	released    bool       // returned: by a release, which is no abandon (stats.go)
	rewrote     bool       // returned: its state record was written (properties modified)
	recs        []*msgRec  // dead-lettered, kept, forwarded: the records
	moved       []*msgRec  // dead-lettered: their new records in the subqueue
	sts         []stateRec // kept: their states as written
	fwd         *sendPlan  // forwarded: the send carrying them, in the same write
}

// settle commits w for the settlement sd planned in it (unless planning
// failed with err) and applies it.
func (w *write) settle(sd *settled, err error) error {
	if err != nil {
		return err
	}
	err = w.commit()
	sd.end(err)
	return err
}

// end finishes a settlement whose write committed (err == nil) or failed:
// a forward's send is told either way; memory changes only on success.
func (sd *settled) end(err error) {
	if sd.fwd != nil {
		sd.fwd.finish(err != nil)
	}
	if err == nil {
		sd.apply()
	}
}

// apply makes the committed settlement's change in memory.
func (sd *settled) apply() {
	sd.count()
	q, r, st := sd.q, sd.r, sd.st
	switch sd.kind {
	case settledRemoved:
		q.mu.Lock()
		if st.state == StateDeferred {
			delete(q.mu.deferred, r.seq)
		}
		q.removeLocked(r)
		q.mu.Unlock()
	case settledDeferred:
		q.mu.Lock()
		r.owner = st.owner
		q.unpullLocked(r) // its state record holds its count (pull.go)
		if !sd.wasDeferred {
			q.mu.activeN--
			r.state = StateDeferred
			q.mu.deferred[r.seq] = r
			q.mu.deferredN++
		}
		q.mu.Unlock()
	case settledReturned:
		now := sd.now
		q.mu.Lock()
		r.deliveryCount, r.owner = st.deliveryCount, st.owner
		if sd.released {
			q.cancelledLocked(r)
		} else if sd.rewrote {
			q.unpullLocked(r) // its state record holds its count (pull.go)
		}
		if q.pastExpiry(r, now) && !q.isDeadLetter() && r.state != StateDeferred {
			q.mu.expiring = append(q.mu.expiring, r)
			q.mu.Unlock()
			q.kickExpiry()
			return
		}
		q.returnLocked(r)
		q.serveWaitersLocked(now)
		q.mu.Unlock()
	case settledDeadLettered:
		q.forget(sd.recs)
		now := q.b.Now()
		q.dead.mu.Lock()
		for _, nr := range sd.moved {
			q.dead.insertLocked(nr, now)
		}
		q.dead.serveWaitersLocked(now)
		q.dead.mu.Unlock()
	case settledKept:
		now := q.b.Now()
		q.mu.Lock()
		for i, r := range sd.recs {
			q.unpullLocked(r)                                // its state record holds its count (pull.go)
			q.addBytesLocked(int64(sd.sts[i].size - r.size)) // a stub's size differs
			r.owner, r.size = sd.sts[i].owner, sd.sts[i].size
			q.returnLocked(r)
		}
		q.serveWaitersLocked(now)
		q.mu.Unlock()
	case settledForwarded:
		q.forget(sd.recs)
	}
}
