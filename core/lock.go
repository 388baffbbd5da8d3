package core

// Message locks.
//
// A peek-locked record is in q.mu.locked under its token and, outside a
// session, has one entry in q.mu.timers for its expiry (inside a session
// the session lock's entry covers it). lockLocked and unlockLocked are the
// only places a lock begins and ends, so the table and the timers always
// agree: a settled, released or expired lock leaves no entry behind.

// lockLocked gives r a new lock for a delivery at now.
func (q *queue) lockLocked(r *msgRec, now int64) {
	r.lock = q.tagLock(NewUUID())
	q.mu.locked[r.lock] = r
	if s := q.sessionLocked(r); s != nil && s.lock != (LockToken{}) {
		// Under a session lock, the message lock lasts as long.
		r.lockedUntil = s.lockedUntil
		s.locked[r.lock] = r
		return
	}
	r.lockedUntil = now + int64(q.lockDuration())
	q.setTimerLocked(r, r.lockedUntil)
}

// relockLocked restores the lock tok on r, with the expiry r had, after a
// settlement that consumed it failed to persist.
func (q *queue) relockLocked(r *msgRec, tok LockToken) {
	r.lock = tok
	q.mu.locked[tok] = r
	if s := q.sessionLocked(r); s != nil && s.lock != (LockToken{}) {
		s.locked[tok] = r
		return
	}
	q.setTimerLocked(r, r.lockedUntil)
}

// unlockLocked ends r's lock: settled, released, given back or expired.
func (q *queue) unlockLocked(r *msgRec) {
	delete(q.mu.locked, r.lock)
	if s := q.sessionLocked(r); s != nil {
		delete(s.locked, r.lock)
	}
	q.dropTimerLocked(r)
	r.lock = LockToken{}
}
