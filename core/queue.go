package core

import (
	"sync"
	"sync/atomic"
)

// msgRec is the in-memory index entry of one stored message. It lives in
// exactly one of its queue's structures: avail (deliverable), locked,
// deferred or scheduled. All fields are guarded by the queue's mutex.
type msgRec struct {
	seq int64
	stateRec
	lock        LockToken // zero when not locked
	lockedUntil int64     // unix nanos
	msg         *Message  // body kept in memory for hand-over, or nil
	pull        *pullRec  // the delivery record holding its count, or nil (pull.go)
	// idx is the position in a recHeap, -1 when not in one. An int32 (a
	// queue of 2^31 messages would need far more memory than a broker
	// has) so that it shares a word with tpos.
	idx  int32
	tpos int32 // 1 + index in the queue's timers; 0 when not there
}

func (r *msgRec) locked() bool { return r.lock != (LockToken{}) }

// queue holds the messages of a queue, a subscription or one of their
// dead-letter subqueues.
type queue struct {
	b    *Broker
	id   uint64
	ent  *entity // the queue or subscription this (sub)queue belongs to
	path string  // for messages: "q", "t/Subscriptions/s", "q/$DeadLetterQueue"

	dead *queue // the dead-letter subqueue; nil for a dead-letter subqueue
	main *queue // the main queue; nil unless this is a dead-letter subqueue

	// shared is the topic whose body records this queue's messages point
	// at (subscriptions only). Bodies with owner == shared.id are
	// reference counted by shared.refs; all others belong to one message.
	shared *entity

	cachedBytes  atomic.Int64  // cost of the messages held in msgRec.msg (cache.go)
	pullNo       atomic.Uint64 // the last delivery record's number (pull.go)
	readingAhead atomic.Bool   // a readAhead runs (bodies.go)

	wake wakeEntry // the queue's place in the broker timer; guarded by b.timer.mu

	mu struct {
		sync.Mutex // guards the fields below; never held across storage I/O
		avail      recHeap
		locked     map[LockToken]*msgRec
		deferred   map[int64]*msgRec
		scheduled  map[int64]*msgRec
		timers     timeHeap // lock expiries and scheduled activations (timer.go)
		wakeAt     int64    // earliest time asked of the broker timer since the last tick
		waiters    []*waiter
		expiring   []*msgRec // found expired while taking; see expireLoop
		expiryBusy bool      // an expireLoop is running
		sessions   sessionIndex
		activeN    int64 // avail + locked (Service Bus's ActiveMessageCount)
		deferredN  int64
		bytes      int64 // what this (sub)queue counts towards its entity's quota (quota.go)
		closed     bool
		deleted    bool // the entity was deleted (closed too); see write.abort
	}
}

func newQueue(b *Broker, id uint64, ent *entity, path string) *queue {
	q := &queue{b: b, id: id, ent: ent, path: path}
	q.mu.locked = make(map[LockToken]*msgRec)
	q.mu.deferred = make(map[int64]*msgRec)
	q.mu.scheduled = make(map[int64]*msgRec)
	q.mu.sessions.init()
	return q
}

func (q *queue) isDeadLetter() bool { return q.main != nil }

// desc returns the current description of the owning entity.
func (q *queue) desc() *Entity { return q.ent.desc.Load() }

// sharedBody reports whether r's body is shared with other subscriptions.
func (q *queue) sharedBody(r *msgRec) bool {
	return q.shared != nil && r.owner == q.shared.id
}

// insertLocked adds a record that has just become part of this queue
// (sent, recovered, moved here or released), in the structure its state
// says, and serves waiting receivers.
func (q *queue) insertLocked(r *msgRec, now int64) {
	switch r.state {
	case StateScheduled:
		q.mu.scheduled[r.seq] = r
		q.setTimerLocked(r, r.scheduledAt)
	case StateDeferred:
		q.mu.deferred[r.seq] = r
		q.mu.deferredN++
	default:
		q.makeAvailLocked(r)
		q.mu.activeN++
	}
	q.addBytesLocked(r.storedBytes())
	if s := q.sessionLocked(r); s != nil {
		s.count++
	}
}

// sessionLocked returns the session r belongs to on a session-enabled
// queue, nil otherwise.
func (q *queue) sessionLocked(r *msgRec) *session {
	if q.isDeadLetter() || !q.desc().RequiresSession {
		return nil
	}
	return q.mu.sessions.get(r.sessionID)
}

// makeAvailLocked puts an active record where receivers find it.
func (q *queue) makeAvailLocked(r *msgRec) {
	if q.desc().RequiresSession && !q.isDeadLetter() {
		q.mu.sessions.push(r)
		return
	}
	q.mu.avail.push(r)
}

// removeLocked forgets a record that leaves the queue (completed,
// received-and-deleted, dead-lettered, expired). It must not be in avail.
func (q *queue) removeLocked(r *msgRec) {
	switch r.state {
	case StateDeferred:
		q.mu.deferredN--
	case StateScheduled:
	default:
		q.mu.activeN--
	}
	q.addBytesLocked(-r.storedBytes())
	q.unpullLocked(r)
	q.dropTimerLocked(r) // a cancelled scheduled message's activation
	q.dropCacheLocked(r)
	if s := q.sessionLocked(r); s != nil {
		s.count--
		q.pruneSessionLocked(s)
	}
}
