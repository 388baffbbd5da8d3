package core

// Message locks.
//
// A peek-locked record is in q.mu.locked under its token and, outside a
// session, has one entry in q.mu.timers for its expiry (inside a session
// the session lock's entry covers it). lockLocked and unlockLocked are the
// only places a lock begins and ends, and deliveredLocked the only place
// a new lock's expiry is armed, so the table and the timers agree on a
// quiet broker: a settled, released or expired lock leaves no entry
// behind.
//
// A new lock cannot expire before its delivery's write (the message's new
// delivery count, receive.go's finish) is done: that write sets the
// state record (or a delivery record) from what the message was when it
// was taken, so a lock that expired meanwhile would let another receiver
// take the message and settle it first, and the late write would then
// bring back a completed message's state record, or make a deferred one
// Active in the store. So a message lock's expiry is armed, and a session
// lock's expiry waits for the deliveries under it (session.delivering),
// only once the write is done; a lock whose time passed meanwhile expires
// then, at once. For the same reason CloseSession takes back the messages
// under a session lock only once those writes are done
// (closeWhenDelivered).

// lockLocked gives r a new lock for a delivery at now, and returns the
// session whose lock it lives under, if any. The caller calls
// deliveredLocked (or undeliverLocked) once the delivery's write is done.
func (q *queue) lockLocked(r *msgRec, now int64) *session {
	r.lock = q.tagLock(NewUUID())
	q.mu.locked[r.lock] = r
	if s := q.sessionLocked(r); s != nil && s.lock != (LockToken{}) {
		// Under a session lock, the message lock lasts as long.
		r.lockedUntil = s.lockedUntil
		s.locked[r.lock] = r
		s.delivering++
		return s
	}
	r.lockedUntil = now + int64(q.lockDuration())
	return nil
}

// deliveredLocked ends t's delivery once its write is done, committed or
// not: the expiry of its message lock, if it still holds it, is armed, or
// its session lock may expire again.
func (q *queue) deliveredLocked(t *taken) {
	if t.sess != nil {
		q.undeliverLocked(t)
		return
	}
	if r := t.r; r.lock == t.lock && !q.mu.closed {
		q.setTimerLocked(r, r.lockedUntil) // due already: it expires at once
	}
}

// undeliverLocked ends t's delivery without arming its lock's expiry: a
// delivery taken back (its lock ended by the caller), or one under a
// session lock. The session lock's expiry, if it fell due while
// deliveries under it were being written, runs once the last is done.
func (q *queue) undeliverLocked(t *taken) {
	s := t.sess
	if s == nil {
		return
	}
	t.sess = nil
	s.delivering--
	if s.delivering > 0 {
		return
	}
	if s.idle != nil {
		close(s.idle) // a CloseSession waits for it (closeWhenDelivered)
		s.idle = nil
	}
	// A closing lock is ended by its CloseSession, which waits for this.
	if s.lock != (LockToken{}) && !s.closing && s.tpos == 0 && !q.mu.closed {
		q.setSessionTimerLocked(s, s.lockedUntil)
	}
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
