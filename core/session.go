package core

import (
	"context"
	"sort"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage"
)

// Sessions.
//
// On a session-enabled queue or subscription every active message sits in
// its session's own heap instead of the queue's. A receiver first locks a
// session (AcceptSession); the session lock is an umbrella: while it is
// held only its holder receives that session's messages, in sequence
// order, including ones that arrive later. Message locks taken inside a
// session last as long as the session lock.
//
// sessions.ready orders the sessions that have deliverable messages and
// no holder by the sequence number of their first message, so accepting
// the next available session is O(log n) however many sessions exist.

// session is one message session of a queue. Guarded by the queue mutex.
type session struct {
	id          string
	avail       recHeap
	lock        LockToken // zero when no receiver holds the session
	lockedUntil int64
	locked      map[LockToken]*msgRec // message locks under the session lock
	state       []byte
	stateAt     int64         // when state was last set (unix nanos)
	count       int           // messages of this session stored in the queue
	readyIdx    int           // index in sessionIndex.ready, -1 when not there
	tpos        int           // 1 + index of the lock's expiry in the queue's timers; 0 when none
	delivering  int           // deliveries under the lock whose write is in flight (lock.go)
	ended       chan struct{} // the lock's: closed when it ends; nil when unlocked
	// closing is set while CloseSession waits for the deliveries under
	// the lock to be written (closeWhenDelivered): nothing more is taken
	// under it, and its holder has lost it.
	closing bool
	idle    chan struct{} // closed when delivering drops to 0; made by a closing CloseSession
}

// heldBy reports whether the lock tok holds s for its holder: it is the
// current lock and no CloseSession is taking it back (closing).
func (s *session) heldBy(tok LockToken) bool {
	return s.lock == tok && !s.closing
}

// SessionLock is a receiver's hold on a session.
type SessionLock struct {
	SessionID   string
	Token       LockToken
	LockedUntil time.Time
	ended       <-chan struct{}
}

// Ended returns a channel that is closed when the lock ends, whatever
// ends it: expiry (by the broker's clock), another receiver taking the
// session over, [Broker.CloseSession], or the broker closing (a cluster
// node that stops leading the entity's group). A front watches it to
// tell the holder at once, as Service Bus detaches a session receiver's
// link with com.microsoft:session-lock-lost, instead of letting the
// holder find out at its next settlement. For a lock handed out by a
// backend in another process it is what that backend set (SetEnded), nil
// (never ready) if none.
func (sl *SessionLock) Ended() <-chan struct{} { return sl.ended }

// SetEnded makes ended the lock's Ended channel: for a Backend whose
// locks live in another process, which closes ended once it learns the
// lock ended there (clusterrpc asks the process holding it,
// [Broker.SessionLockEnded]).
func (sl *SessionLock) SetEnded(ended <-chan struct{}) { sl.ended = ended }

// SessionLockEnded returns a channel that is closed when the session
// lock sl of the entity at path ends, as its Ended channel is (closed
// already if it has ended, or was never this broker's): what a node
// serving the lock's holder through another process waits on. Not for a
// routed broker.
func (b *Broker) SessionLockEnded(path string, sl *SessionLock) (<-chan struct{}, error) {
	if b.routed() {
		return nil, errf(CodeInternal, "SessionLockEnded on a routed broker")
	}
	q, err := b.sessionQueue(path, sl.SessionID)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.mu.sessions.byID[sl.SessionID]; s != nil && s.heldBy(sl.Token) && s.ended != nil {
		return s.ended, nil
	}
	ended := make(chan struct{})
	close(ended)
	return ended, nil
}

// sessionLock returns the SessionLock of s's current lock.
func (s *session) sessionLock() *SessionLock {
	return &SessionLock{SessionID: s.id, Token: s.lock, LockedUntil: nanosToTime(s.lockedUntil), ended: s.ended}
}

// endLock tells the holder of s's lock, if any, that it has ended.
func (s *session) endLock() {
	if s.ended != nil {
		close(s.ended)
		s.ended = nil
	}
}

type sessionIndex struct {
	byID    map[string]*session
	ready   []*session // min-heap by the head message's sequence number
	waiters []*acceptWaiter
}

type acceptWaiter struct {
	ch chan *session
	// claim and from serve a waiter on several queues (a partitioned
	// entity's), as waiter's do (receive_any.go).
	claim *atomic.Bool
	from  *queue
}

func (x *sessionIndex) init() { x.byID = make(map[string]*session) }

func (x *sessionIndex) get(id string) *session {
	s := x.byID[id]
	if s == nil {
		s = &session{id: id, readyIdx: -1}
		x.byID[id] = s
	}
	return s
}

// push makes r deliverable in its session.
func (x *sessionIndex) push(r *msgRec) {
	s := x.get(r.sessionID)
	s.avail.push(r)
	x.changed(s)
}

// changed restores the ready-heap invariant for s after its heap or lock
// changed.
func (x *sessionIndex) changed(s *session) {
	ready := len(s.avail) > 0 && s.lock == (LockToken{})
	switch {
	case ready && s.readyIdx < 0:
		s.readyIdx = len(x.ready)
		x.ready = append(x.ready, s)
		x.up(s.readyIdx)
	case ready:
		x.up(s.readyIdx)
		x.down(s.readyIdx)
	case s.readyIdx >= 0:
		x.remove(s.readyIdx)
	}
}

func (x *sessionIndex) less(i, j int) bool { return x.ready[i].avail[0].seq < x.ready[j].avail[0].seq }

func (x *sessionIndex) swap(i, j int) {
	x.ready[i], x.ready[j] = x.ready[j], x.ready[i]
	x.ready[i].readyIdx = i
	x.ready[j].readyIdx = j
}

func (x *sessionIndex) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !x.less(j, i) {
			break
		}
		x.swap(i, j)
		j = i
	}
}

func (x *sessionIndex) down(i int) {
	n := len(x.ready)
	for {
		j := 2*i + 1
		if j >= n {
			return
		}
		if r := j + 1; r < n && x.less(r, j) {
			j = r
		}
		if !x.less(j, i) {
			return
		}
		x.swap(i, j)
		i = j
	}
}

func (x *sessionIndex) remove(i int) {
	n := len(x.ready) - 1
	s := x.ready[i]
	if i != n {
		x.swap(i, n)
	}
	x.ready[n] = nil
	x.ready = x.ready[:n]
	if i != n {
		x.up(i)
		x.down(i)
	}
	s.readyIdx = -1
}

// sessionQueue resolves a path to the session-enabled queue that holds
// session id (on a partitioned entity, the partition id picks).
func (b *Broker) sessionQueue(path, id string) (*queue, error) {
	q, err := b.queueFor(path, func(e *entity) *entity { return e.partForSession(id) })
	if err != nil {
		return nil, err
	}
	if !q.desc().RequiresSession || q.isDeadLetter() {
		return nil, errf(CodeBadRequest, "It is not possible for an entity that does not require sessions to create a sessionful message receiver: '%s'.", q.path)
	}
	return q, nil
}

// sessionQueues resolves a path to its session-enabled queues: one, or a
// partitioned entity's, one per partition.
func (b *Broker) sessionQueues(path string) ([]*queue, error) {
	qs, err := b.queuesFor(path)
	if err != nil {
		return nil, err
	}
	if q := qs[0]; !q.desc().RequiresSession || q.isDeadLetter() {
		return nil, errf(CodeBadRequest, "It is not possible for an entity that does not require sessions to create a sessionful message receiver: '%s'.", q.path)
	}
	return qs, nil
}

// AcceptSession locks the session id of the entity at path for the
// caller, or, with id "", the next session that has deliverable messages
// and no holder, waiting until ctx is done ([ErrTimeout] then). A session
// held by another receiver fails with [ErrSessionCannotLock].
func (b *Broker) AcceptSession(ctx context.Context, path, id string) (*SessionLock, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.AcceptSession(ctx, path, id)
	}
	if id == "" {
		qs, err := b.sessionQueues(path)
		if err != nil {
			return nil, err
		}
		if len(qs) > 1 {
			return qs[0].ent.root().acceptAny(ctx, qs)
		}
	}
	q, err := b.sessionQueue(path, id)
	if err != nil {
		return nil, err
	}
	now := b.Now()
	q.mu.Lock()
	if id != "" {
		defer q.mu.Unlock()
		s := q.mu.sessions.get(id)
		if s.lock != (LockToken{}) && (s.lockedUntil > now || b.cfg.Faults.IgnoreLockExpiry) && !b.cfg.Faults.ShareSessionLocks {
			return nil, errf(CodeSessionCannotLock, "The requested session '%s' cannot be accepted. It may be locked by another receiver.", id)
		}
		return q.lockSessionLocked(s, now), nil
	}
	if len(q.mu.sessions.ready) > 0 {
		s := q.mu.sessions.ready[0]
		sl := q.lockSessionLocked(s, now)
		q.mu.Unlock()
		return sl, nil
	}
	w := &acceptWaiter{ch: make(chan *session, 1)}
	q.mu.sessions.waiters = append(q.mu.sessions.waiters, w)
	q.mu.Unlock()
	select {
	case s := <-w.ch:
		if s == nil {
			return nil, q.closedErr()
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		return s.sessionLock(), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.mu.sessions.waiters {
		if x == w {
			q.mu.sessions.waiters = append(q.mu.sessions.waiters[:i], q.mu.sessions.waiters[i+1:]...)
			return nil, errf(CodeTimeout, "No session available to accept on '%s' within the timeout.", q.path)
		}
	}
	// Served while timing out: give the session back.
	if s := <-w.ch; s != nil {
		q.unlockSessionLocked(s, false, b.Now())
	}
	return nil, errf(CodeTimeout, "No session available to accept on '%s' within the timeout.", q.path)
}

func (q *queue) lockSessionLocked(s *session, now int64) *SessionLock {
	if s.lock == (LockToken{}) {
		q.noteSessionLocked()
	}
	stale := s.lock != (LockToken{})
	s.lock = NewUUID()
	s.closing = false // a lapsed lock's close, overtaken: its CloseSession gives up
	if stale {
		q.dropSessionWaitersLocked(s) // receives under the replaced lock
		s.endLock()
	}
	s.ended = make(chan struct{})
	s.lockedUntil = now + int64(q.lockDuration())
	if s.locked == nil {
		s.locked = make(map[LockToken]*msgRec)
	}
	q.mu.sessions.changed(s)
	// An expired lock not yet ticked away is replaced: its entry moves.
	q.setSessionTimerLocked(s, s.lockedUntil)
	return s.sessionLock()
}

// serveAcceptersLocked gives ready sessions to waiting AcceptSession calls.
func (q *queue) serveAcceptersLocked(now int64) {
	x := &q.mu.sessions
	for len(x.waiters) > 0 && len(x.ready) > 0 {
		w := x.waiters[0]
		x.waiters = x.waiters[1:]
		if w.claim != nil && !w.claim.CompareAndSwap(false, true) {
			continue // served by another of its queues, or cancelled
		}
		s := x.ready[0]
		q.lockSessionLocked(s, now)
		w.from = q
		w.ch <- s
	}
}

func errSessionLockLost() error {
	return errf(CodeSessionLockLost, "The session lock has expired on the MessageSession. Accept a new MessageSession.")
}

// heldSession checks that sl is the live lock of its session.
func (q *queue) heldSession(sl *SessionLock) (*session, error) {
	now := q.b.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.mu.sessions.byID[sl.SessionID]
	if s == nil || !s.heldBy(sl.Token) || (s.lockedUntil <= now && !q.b.cfg.Faults.IgnoreLockExpiry) {
		return nil, errSessionLockLost()
	}
	return s, nil
}

// RenewSessionLock extends a session lock by the entity's lock duration.
func (b *Broker) RenewSessionLock(ctx context.Context, path string, sl *SessionLock) (time.Time, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return time.Time{}, err
		}
		return be.RenewSessionLock(ctx, path, sl)
	}
	q, err := b.sessionQueue(path, sl.SessionID)
	if err != nil {
		return time.Time{}, err
	}
	s, err := q.heldSession(sl)
	if err != nil {
		return time.Time{}, err
	}
	now := b.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	s.lockedUntil = now + int64(q.lockDuration())
	for _, r := range s.locked {
		r.lockedUntil = s.lockedUntil
	}
	q.setSessionTimerLocked(s, s.lockedUntil) // the entry moves: one per session lock
	sl.LockedUntil = nanosToTime(s.lockedUntil)
	return sl.LockedUntil, nil
}

// CloseSession releases a session lock cleanly: messages locked under it
// become available again without counting the delivery. A receive under
// the lock whose delivery is still being written is waited for, within a
// bound (closeWhenDelivered).
func (b *Broker) CloseSession(path string, sl *SessionLock) error {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return err
		}
		return be.CloseSession(path, sl)
	}
	q, err := b.sessionQueue(path, sl.SessionID)
	if err != nil {
		return err
	}
	q.mu.Lock()
	s := q.mu.sessions.byID[sl.SessionID]
	if s == nil || s.lock != sl.Token || (s.delivering > 0 && !q.closeWhenDelivered(s, sl.Token)) {
		q.mu.Unlock()
		return nil
	}
	released := make([]*msgRec, 0, len(s.locked))
	for _, r := range s.locked {
		released = append(released, r)
	}
	q.unlockSessionLocked(s, false, b.Now())
	// The deliveries taken back are taken back in the store too, like a
	// release's, without waiting for fsync.
	// A delivery record's entry for them is cancelled (pull.go); the
	// record deletes the cancellation with itself, written or not.
	var batch storage.Batch
	pulled := make([]*pullRec, len(released))
	for i, r := range released {
		batch.Set(seqKey(tabState, q.id, r.seq), r.stateRec.encode(nil))
		if p := r.pull; p != nil {
			batch.Set(cancelKey(p.key, r.seq), nil)
			p.cancelled = append(p.cancelled, r.seq)
			pulled[i] = p
		}
	}
	q.mu.Unlock()
	if len(batch.Ops) > 0 {
		if err := b.store.Apply(&batch); err != nil {
			b.warnStorage("recording the delivery counts of a closed session failed", zap.String("entity", q.path), zap.Error(err))
			return nil
		}
		q.mu.Lock()
		for i, r := range released {
			// Unless a later delivery depends on a newer record already.
			if p := pulled[i]; p != nil && r.pull == p {
				q.unpullLocked(r)
			}
		}
		q.mu.Unlock()
	}
	return nil
}

// closeSessionWait bounds how long CloseSession waits for the delivery
// writes in flight under the lock. Such a write is one unsynced Apply, so
// a wait this long means a stalled store.
const closeSessionWait = 5 * time.Second

// closeWhenDelivered waits, with q.mu held (dropped meanwhile), until the
// deliveries under s's lock tok that are being written are done, and
// reports whether CloseSession may now take back the messages locked
// under it: tok still holds s and none is in flight.
//
// The messages cannot be taken back before: finish writes each one's new
// delivery count from what it was when taken, so a write landing after
// the close's would record the delivery the close undid (the store's
// count above memory's, or a delivery record the messages no longer
// depend on) and could bring back the state record of a message the next
// holder completed meanwhile. Nor can the lock end and leave them
// behind: the next holder would get the messages after them first (FIFO
// in the session broken). So CloseSession waits; the holder, who is
// closing, loses the lock at once (closing), and nothing more is taken
// under it.
//
// The wait is bounded on the broker's clock, so a stalled store does not
// hold a front's goroutine for as long as it stalls. Past the bound the
// close becomes an expiry: the lock's time is cut to now, and it ends,
// counting the delivery as any lost lock does, once the last write is
// done (undeliverLocked arms its expiry), never before.
func (q *queue) closeWhenDelivered(s *session, tok LockToken) bool {
	s.closing = true
	q.dropSessionWaitersLocked(s) // receives waiting under the lock take nothing more
	bound := make(chan struct{})
	tm := q.b.clk.AfterFunc(closeSessionWait, func() { close(bound) })
	defer tm.Stop()
	for s.delivering > 0 {
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		idle := s.idle
		q.mu.Unlock()
		timedOut := false
		select {
		case <-idle:
		case <-bound:
			timedOut = true
		}
		q.mu.Lock()
		if s.lock != tok {
			return false // expired meanwhile, or accepted over its lapsed time
		}
		if timedOut && s.delivering > 0 {
			s.closing = false
			if now := q.b.Now(); s.lockedUntil > now {
				s.lockedUntil = now
				for _, r := range s.locked {
					r.lockedUntil = now
				}
			}
			q.dropSessionTimerLocked(s)
			return false
		}
	}
	return true
}

// expireSessionLockLocked runs when a session lock's timer falls due. It
// returns the messages that were locked under it and are now out of
// deliveries, for the caller to dead-letter once it drops the mutex.
//
// While deliveries under the lock are being written it does not expire:
// the last one's end (undeliverLocked) arms its expiry again.
func (q *queue) expireSessionLockLocked(s *session, now int64) []*msgRec {
	if s.lock == (LockToken{}) || q.b.cfg.Faults.IgnoreLockExpiry || s.delivering > 0 {
		return nil
	}
	return q.unlockSessionLocked(s, true, now)
}

// unlockSessionLocked ends a session lock. Messages locked under it go
// back to the session; expired means the delivery counts (lock expiry),
// otherwise it does not (clean close). After an expiry, messages out of
// deliveries are returned instead (to be dead-lettered) and expired ones
// are set aside for expireLoop, as a message lock expiry does.
func (q *queue) unlockSessionLocked(s *session, expired bool, now int64) []*msgRec {
	var late []*msgRec
	maxDC := q.desc().MaxDeliveryCount
	for tok, r := range s.locked {
		delete(q.mu.locked, tok)
		r.lock = LockToken{}
		if !expired {
			r.deliveryCount--
		}
		switch {
		case r.state == StateDeferred:
		case expired && r.deliveryCount >= maxDC:
			late = append(late, r)
		case expired && q.pastExpiry(r, now):
			q.mu.expiring = append(q.mu.expiring, r)
		default:
			s.avail.push(r)
		}
	}
	clear(s.locked)
	q.dropSessionTimerLocked(s)
	if s.lock != (LockToken{}) {
		q.noteSessionUnlocked(expired)
	}
	s.lock = LockToken{}
	s.lockedUntil = 0
	s.closing = false
	s.endLock()
	q.dropSessionWaitersLocked(s)
	q.mu.sessions.changed(s)
	q.serveAcceptersLocked(now)
	q.pruneSessionLocked(s)
	return late
}

func (q *queue) pruneSessionLocked(s *session) {
	if s.count == 0 && s.state == nil && s.lock == (LockToken{}) && len(s.avail) == 0 {
		delete(q.mu.sessions.byID, s.id)
	}
}

// GetSessionState returns the session's state, nil if none. The caller
// must hold the session lock.
func (b *Broker) GetSessionState(ctx context.Context, path string, sl *SessionLock) ([]byte, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.GetSessionState(ctx, path, sl)
	}
	q, err := b.sessionQueue(path, sl.SessionID)
	if err != nil {
		return nil, err
	}
	s, err := q.heldSession(sl)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]byte(nil), s.state...), nil
}

// SetSessionState stores the session's state durably; nil clears it. The
// state outlives the session's messages and restarts.
func (b *Broker) SetSessionState(ctx context.Context, path string, sl *SessionLock, state []byte) error {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return err
		}
		return be.SetSessionState(ctx, path, sl, state)
	}
	q, err := b.sessionQueue(path, sl.SessionID)
	if err != nil {
		return err
	}
	if max := q.desc().MaxMessageSizeInKilobytes * 1024; int64(len(state)) > max {
		return errf(CodeMessageTooLarge, "The session state (size %d bytes) exceeds the limit (%d bytes).", len(state), max)
	}
	s, err := q.heldSession(sl)
	if err != nil {
		return err
	}
	q.mu.Lock()
	old := int64(len(s.state))
	err = q.checkStateQuotaLocked(int64(len(state)) - old)
	q.mu.Unlock()
	if err != nil {
		return err
	}
	now := b.Now()
	batch := storage.Batch{Sync: true}
	key := nameKey(tabSession, q.id, sl.SessionID)
	if state == nil {
		batch.Delete(key)
	} else {
		batch.Set(key, encodeSessionState(now, state))
	}
	if err := b.apply(&batch); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addBytesLocked(int64(len(state)) - int64(len(s.state)))
	if state == nil {
		s.state = nil
	} else {
		s.state = append([]byte{}, state...)
	}
	s.stateAt = now
	return nil
}

func encodeSessionState(at int64, state []byte) []byte {
	return append(u64(uint64(at)), state...)
}

// ListSessions returns the ids of the entity's sessions: with since zero,
// those with messages or state; otherwise those whose state was set after
// since. Ids are sorted.
func (b *Broker) ListSessions(ctx context.Context, path string, since time.Time) ([]string, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.ListSessions(ctx, path, since)
	}
	qs, err := b.sessionQueues(path)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, q := range qs {
		q.mu.Lock()
		for id, s := range q.mu.sessions.byID {
			if since.IsZero() {
				if s.count > 0 || s.state != nil {
					ids = append(ids, id)
				}
			} else if s.stateAt > since.UnixNano() {
				ids = append(ids, id)
			}
		}
		q.mu.Unlock()
	}
	sort.Strings(ids)
	return ids, nil
}
