package core

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// ReceiveMode is how a receive settles the messages it takes.
type ReceiveMode uint8

// Receive modes.
const (
	PeekLock         ReceiveMode = iota // lock; settle later by lock token
	ReceiveAndDelete                    // remove as it is handed out
)

// ReceiveOptions parameterise [Broker.Receive].
type ReceiveOptions struct {
	Mode ReceiveMode
	Max  int // at most this many messages; values < 1 mean 1
	// MaxBytes, when positive, ends the batch before the message that
	// would bring the stored sizes ([Message.Size]) of the messages taken
	// above it; the first message is taken whatever its size. A front
	// uses it to bound the bytes it holds for a slow client.
	MaxBytes int
	// Session restricts the receive to a session this receiver holds
	// (see [Broker.AcceptSession]); required on session-enabled entities.
	Session *SessionLock
}

// waiter is a blocked Receive. The publisher that serves it takes the
// messages on its behalf (locks or removes them) and sends them on ch, so
// a message goes to exactly one waiter and needs no storage read.
type waiter struct {
	mode     ReceiveMode
	max      int
	maxBytes int      // see ReceiveOptions.MaxBytes
	sess     *session // nil: any message of the queue
	// sessLock is the session lock the waiter receives under: once the
	// session's lock is another (closed, expired, accepted again by
	// another receiver) the waiter takes nothing more (sessionLockGone).
	sessLock LockToken
	ch       chan []taken
	// claim is set for a waiter that waits on several queues at once (a
	// partitioned entity's, receive_any.go): whoever sets it first serves
	// the waiter, or cancels it; the others drop it. from is the queue
	// that served it, written before the send on ch.
	claim *atomic.Bool
	from  *queue
}

// taken is a record handed to a receiver, with the fields it needs copied
// while the queue mutex was held.
type taken struct {
	r           *msgRec
	st          stateRec
	seq         int64
	lock        LockToken
	lockedUntil int64
	msg         *Message // the body kept in memory at send, shared: clone before use
	loaded      *Message // the body read from storage for this delivery alone
	shared      bool
	bad         error    // the body cannot be read (finish, quarantine)
	sess        *session // the session lock its message lock lives under (lockLocked)
}

// Receive returns up to opts.Max messages from the queue, subscription or
// dead-letter subqueue at path, waiting until at least one is available or
// ctx is done. When ctx ends first it returns no messages and a nil error
// for a deadline (the caller's own timeout), or ctx.Err() when cancelled.
func (b *Broker) Receive(ctx context.Context, path string, opts ReceiveOptions) ([]*Message, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.Receive(ctx, path, opts)
	}
	a := ParseAddress(path)
	e, err := b.receivable(a)
	if err != nil {
		return nil, err
	}
	qs := e.mainQueues(a.DeadLetter)
	q := qs[0]
	d := q.desc()
	if d.Status == StatusDisabled || d.Status == StatusReceiveDisabled {
		return nil, errf(CodeEntityDisabled, "Messaging entity '%s' is currently disabled for receiving.", q.path)
	}
	if opts.Max < 1 {
		opts.Max = 1
	}
	var sess *session
	if d.RequiresSession && !q.isDeadLetter() {
		if opts.Session == nil {
			return nil, errf(CodeBadRequest, "It is not possible for an entity that requires sessions to create a non-sessionful message receiver: '%s'.", q.path)
		}
		q = e.partForSession(opts.Session.SessionID).q
		if sess, err = q.heldSession(opts.Session); err != nil {
			return nil, err
		}
	} else if opts.Session != nil {
		return nil, errf(CodeBadRequest, "It is not possible for an entity that does not require sessions to create a sessionful message receiver: '%s'.", q.path)
	} else if len(qs) > 1 {
		return e.receiveAny(ctx, qs, opts)
	}

	for {
		out, again, err := q.receiveOnce(ctx, opts, sess)
		if !again {
			return out, err
		}
		// Every message taken had an unreadable body and went to the
		// dead-letter subqueue (quarantine): take again.
	}
}

// receiveOnce takes what is available or waits for it, as Receive does.
// again reports that what it took is gone (dead-lettered, for a body
// that cannot be read) and nothing is left to return yet.
func (q *queue) receiveOnce(ctx context.Context, opts ReceiveOptions, sess *session) (out []*Message, again bool, err error) {
	now := q.b.Now()
	q.mu.Lock()
	if q.mu.closed {
		err := q.closedErrLocked()
		q.mu.Unlock()
		return nil, false, err
	}
	if sess != nil && !sess.heldBy(opts.Session.Token) {
		q.mu.Unlock()
		return nil, false, errSessionLockLost()
	}
	got := q.takeLocked(now, opts.Mode, opts.Max, opts.MaxBytes, sess)
	if len(got) > 0 {
		// When the backlog reaches past the hand-over cache, have the
		// next batch's bodies read while this one is delivered.
		ahead := sess == nil && q.headUncachedLocked()
		q.mu.Unlock()
		if ahead {
			q.startReadAhead(opts.Max)
		}
		q.kickExpiry()
		out, err = q.finish(got, opts.Mode)
		return out, err == nil && len(out) == 0, err
	}
	w := &waiter{mode: opts.Mode, max: opts.Max, maxBytes: opts.MaxBytes, sess: sess, ch: make(chan []taken, 1)}
	if sess != nil {
		w.sessLock = opts.Session.Token
	}
	q.mu.waiters = append(q.mu.waiters, w)
	q.mu.Unlock()
	q.kickExpiry()

	select {
	case got, ok := <-w.ch:
		if !ok {
			return nil, false, q.closedErr()
		}
		out, err = q.finish(got, opts.Mode)
		return out, err == nil && len(out) == 0 && ctx.Err() == nil, err
	case <-ctx.Done():
	}
	q.mu.Lock()
	if q.removeWaiterLocked(w) {
		q.mu.Unlock()
		if ctx.Err() == context.DeadlineExceeded {
			return nil, false, nil
		}
		return nil, false, ctx.Err()
	}
	q.mu.Unlock()
	// Served concurrently with the cancellation: give the messages back
	// untouched (no delivery counted).
	if got, ok := <-w.ch; ok {
		q.untake(got, opts.Mode)
	}
	if ctx.Err() == context.DeadlineExceeded {
		return nil, false, nil
	}
	return nil, false, ctx.Err()
}

// sessionLockGone reports whether w receives under a session lock that
// has ended: its session was closed or its lock expired, and maybe
// accepted since by another receiver. Such a waiter must take nothing: a
// message it took would go to a link that gives it back, after the
// session's new holder has been handed the messages behind it (FIFO in
// the session broken). Called with the queue mutex held.
func (w *waiter) sessionLockGone() bool {
	return w.sess != nil && !w.sess.heldBy(w.sessLock)
}

// wakeEmpty serves w nothing: its receive looks again and reports what
// it finds (the session lock lost), or returns if its context is done.
func (w *waiter) wakeEmpty() {
	w.ch <- nil
	close(w.ch)
}

// dropSessionWaitersLocked wakes, with nothing, the waiters that receive
// under a session lock that has just ended (see sessionLockGone).
func (q *queue) dropSessionWaitersLocked(s *session) {
	ws := q.mu.waiters[:0]
	for _, w := range q.mu.waiters {
		if w.sess == s && w.sessionLockGone() {
			w.wakeEmpty()
			continue
		}
		ws = append(ws, w)
	}
	clear(q.mu.waiters[len(ws):])
	q.mu.waiters = ws
}

func (q *queue) removeWaiterLocked(w *waiter) bool {
	for i, x := range q.mu.waiters {
		if x == w {
			q.mu.waiters = append(q.mu.waiters[:i], q.mu.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// takeLocked takes up to max deliverable messages (and, if maxBytes > 0,
// up to maxBytes of them but at least one) for one receiver, locking
// them (peek-lock) or removing them (receive-and-delete). Expired
// messages met on the way are set aside for expireLoop.
func (q *queue) takeLocked(now int64, mode ReceiveMode, max, maxBytes int, sess *session) []taken {
	h := &q.mu.avail
	if sess != nil {
		if sess.lockedUntil <= now && !q.b.cfg.Faults.IgnoreLockExpiry {
			return nil
		}
		h = &sess.avail
	}
	var out []taken
	bytes := 0
	for len(out) < max && len(*h) > 0 {
		if maxBytes > 0 && len(out) > 0 && bytes+int(h.peek().size) > maxBytes {
			break
		}
		r := h.pop()
		if q.b.cfg.Faults.BreakFIFO && len(*h) > 0 {
			second := h.pop()
			h.push(r)
			r = second
		}
		if q.pastExpiry(r, now) && !q.isDeadLetter() {
			q.mu.expiring = append(q.mu.expiring, r)
			continue
		}
		bytes += int(r.size)
		out = append(out, q.deliverLocked(r, now, mode))
	}
	if sess != nil {
		q.mu.sessions.changed(sess)
	}
	return out
}

// deliverLocked hands r to a receiver.
func (q *queue) deliverLocked(r *msgRec, now int64, mode ReceiveMode) taken {
	r.deliveryCount++
	t := taken{r: r, st: r.stateRec, seq: r.seq, msg: r.msg, shared: q.sharedBody(r)}
	if mode == PeekLock {
		t.sess = q.lockLocked(r, now)
		t.lock, t.lockedUntil = r.lock, r.lockedUntil
		q.dropCacheLocked(r)
	} else {
		q.removeLocked(r)
	}
	return t
}

func (q *queue) lockDuration() time.Duration {
	return q.desc().LockDuration
}

// serveWaitersLocked hands available messages to blocked receivers,
// oldest waiter first; each waiter is served once and leaves the list.
func (q *queue) serveWaitersLocked(now int64) {
	if len(q.mu.sessions.waiters) > 0 {
		q.serveAcceptersLocked(now)
	}
	for i := 0; i < len(q.mu.waiters); {
		w := q.mu.waiters[i]
		if w.claim != nil {
			if len(q.mu.avail) == 0 {
				return
			}
			if !w.claim.CompareAndSwap(false, true) {
				// Served by another of its queues, or cancelled.
				q.mu.waiters = append(q.mu.waiters[:i], q.mu.waiters[i+1:]...)
				continue
			}
		}
		if w.sessionLockGone() {
			q.mu.waiters = append(q.mu.waiters[:i], q.mu.waiters[i+1:]...)
			w.wakeEmpty()
			continue
		}
		got := q.takeLocked(now, w.mode, w.max, w.maxBytes, w.sess)
		if len(got) == 0 && w.claim == nil {
			if w.sess == nil && len(q.mu.avail) == 0 {
				return
			}
			i++
			continue
		}
		// A waiter on several queues that this one claimed gets what it
		// took, even nothing (what was there had expired): it looks again.
		w.from = q
		w.ch <- got
		close(w.ch)
		q.mu.waiters = append(q.mu.waiters[:i], q.mu.waiters[i+1:]...)
	}
}

// finish builds the delivered messages and records the delivery: the new
// delivery count (peek-lock) or the removal (receive-and-delete, durable
// before the message is handed out). A message whose body cannot be read
// is not delivered: it goes to the dead-letter subqueue (quarantine), so
// it never blocks the messages behind it.
//
// The delivery count is written without waiting for fsync, and a
// peek-lock delivery goes out even if that write fails (a full disk): the
// count is kept in memory and written with the message's next state
// change; a crash before then only undercounts, as after any crash. A
// receive-and-delete whose removal fails hands nothing out and leaves
// every message where it was.
func (q *queue) finish(got []taken, mode ReceiveMode) ([]*Message, error) {
	q.loadBodies(got)
	out := make([]*Message, len(got))
	bad := 0
	for i := range got {
		t := &got[i]
		m, err := q.message(t)
		if err != nil {
			if !damaged(err) {
				q.untake(got, mode)
				return nil, err
			}
			t.bad = err
			bad++
		}
		out[i] = m
	}
	if bad > 0 {
		var err error
		if got, out, err = q.quarantine(got, out, mode); err != nil && len(got) == 0 {
			return nil, err
		}
	}
	w := q.b.newWrite(mode == ReceiveAndDelete)
	defer w.abort()
	if mode == PeekLock {
		// The new counts: one delivery record for a pull of several
		// (pull.go), the state record of a single message.
		var p *pullRec
		if len(got) >= minPull {
			p = w.setPull(q, got)
		} else {
			for i := range got {
				w.setState(q, got[i].seq, &got[i].st)
			}
		}
		if err := w.commit(); err != nil {
			if !q.b.closed() {
				q.b.warnStorage("recording delivery counts failed; they are kept in memory and written with the next change of each message",
					zap.String("entity", q.path), zap.Error(err))
			}
			p = nil
		}
		// Only now may the locks expire (lock.go).
		q.delivered(got, p)
		q.noteDelivered(out, mode)
		return out, nil
	}
	for i := range got {
		t := &got[i]
		w.deleteRecords(q, t.seq, t.st.owner, t.shared)
	}
	w.holdTaken(q, got, mode)
	if err := w.commit(); err != nil {
		return nil, err
	}
	q.noteDelivered(out, mode)
	return out, nil
}

// message returns the delivered form of a taken record.
func (q *queue) message(t *taken) (*Message, error) {
	var m *Message
	switch {
	case t.loaded != nil:
		m = t.loaded
	case t.msg != nil && t.shared:
		m = t.msg.Clone() // a topic's message: its subscriptions' copies share it
	case t.msg != nil:
		// The receiver's alone: deliverLocked took it out of the cache,
		// and nothing else keeps a queue's cached message (cloning its
		// maps was 8 % of a delivery's allocations).
		m = t.msg
	default:
		var err error
		if m, _, err = q.loadBody(t.st.owner, t.seq); err != nil {
			return nil, err
		}
	}
	m.SequenceNumber = t.seq
	if m.EnqueuedSequenceNumber == 0 {
		m.EnqueuedSequenceNumber = t.seq
	}
	m.DeliveryCount = t.st.deliveryCount
	m.State = t.st.state
	if t.st.state == StateScheduled {
		m.State = StateActive
	}
	m.ExpiresAt = nanosToTime(t.st.expiresAt)
	reportTTL(m)
	m.LockToken = t.lock
	m.LockedUntil = nanosToTime(t.lockedUntil)
	return m, nil
}

// loadBody reads and decodes a message's body. A body that is gone or
// cannot be decoded fails with an error for which damaged is true; raw is
// then what the store gave back, if anything.
func (q *queue) loadBody(owner uint64, seq int64) (m *Message, raw []byte, err error) {
	v, err := q.b.store.Get(seqKey(tabBody, owner, seq))
	if err != nil {
		return nil, nil, storeError(fmt.Errorf("message %d of '%s': %w", seq, q.path, err))
	}
	if m, err = decodeBody(v); err != nil {
		return nil, v, storeError(fmt.Errorf("message %d of '%s': %w", seq, q.path, err))
	}
	return m, nil, nil
}

// untake returns messages whose hand-over failed, as if never delivered.
func (q *queue) untake(got []taken, mode ReceiveMode) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.untakeLocked(got, mode)
	q.serveWaitersLocked(q.b.Now())
}

func (q *queue) untakeLocked(got []taken, mode ReceiveMode) {
	now := q.b.Now()
	for i := range got {
		t := &got[i]
		r := t.r
		if mode == PeekLock {
			q.undeliverLocked(t)
			if r.lock != t.lock {
				continue // already ended (its session closed)
			}
			q.unlockLocked(r)
			r.deliveryCount--
			q.returnLocked(r)
		} else {
			r.deliveryCount--
			q.insertLocked(r, now)
		}
	}
}

// returnLocked puts an unlocked record back where it came from.
func (q *queue) returnLocked(r *msgRec) {
	if r.state == StateDeferred {
		return // deferred records stay in the deferred map while locked
	}
	q.makeAvailLocked(r)
}

// close fails every waiting receiver; used when the entity is deleted
// (deleted set) or the broker closes.
func (q *queue) close(deleted bool) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.mu.closed {
		// Its messages no longer count against its entity (a deleted
		// subscription's against its topic), nor its bodies against the
		// broker's cache budget.
		q.dropBytesLocked()
		q.closeCacheLocked()
	}
	q.mu.closed = true
	q.mu.deleted = q.mu.deleted || deleted
	for _, s := range q.mu.sessions.byID {
		s.endLock() // its holder is told: the lock is gone with the broker
	}
	for _, w := range q.mu.waiters {
		if w.claim == nil || w.claim.CompareAndSwap(false, true) {
			close(w.ch)
		}
	}
	q.mu.waiters = nil
	// A deleted queue's timers must not keep it (and its records) alive
	// until its furthest scheduled message falls due.
	q.b.timer.forget(q)
}

// closedErrLocked is what an operation finds on q once it is closed: its
// entity not found when it was deleted; server busy, retryable, when its
// broker was closed (a cluster node that stops leading the entity's group,
// or stops): the entity exists, and is served elsewhere or again soon. A
// receiver that waited on a group's leader as it stopped was told the
// entity did not exist (TestClusterGroupsSpreadFailover's "not found").
func (q *queue) closedErrLocked() error {
	if q.mu.deleted {
		return entityNotFound(q.path)
	}
	return &Error{Code: CodeServerBusy, Msg: fmt.Sprintf("The messaging entity '%s' is not served here now (its broker closed); retry", q.path)}
}

// closedErr is closedErrLocked for a caller not holding q.mu.
func (q *queue) closedErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closedErrLocked()
}

// reportTTL makes a delivered message's TimeToLive the one in force. The
// sender's TTL, already capped by the entity at send, stays exactly as
// sent; only a subscription copy whose own default is smaller than the
// topic's reports that smaller TTL.
func reportTTL(m *Message) {
	if m.ExpiresAt.IsZero() || m.EnqueuedTime.IsZero() {
		return
	}
	if ttl := m.ExpiresAt.Sub(m.EnqueuedTime); ttl > 0 && (m.TimeToLive <= 0 || ttl < m.TimeToLive) {
		m.TimeToLive = ttl
	}
}
