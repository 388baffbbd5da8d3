package core

import (
	"fmt"
	"sync"
	"time"

	"github.com/omnibusmq/omnibus/core/clock"
)

// Timers.
//
// Each queue keeps its due times (message lock expiries, session lock
// expiries, scheduled activations) in its own timeHeap, one entry per
// lock or scheduled message that exists now: an entry leaves with its
// lock (settlement, release, session close) or its schedule
// (cancellation), and a renewal moves it in place. The broker timer
// multiplexes the queues onto one clock timer: it holds at most one entry
// per queue, that queue's earliest due time, and calls the queue's tick
// when it falls due. Memory for timers is therefore bounded by the locks
// and scheduled messages held now, not by the rate they came and went.

// brokerTimer is the one clock timer of a broker.
type brokerTimer struct {
	clk clock.Clock

	mu      sync.Mutex // guards the fields below and every queue's wake
	h       []*queue   // min-heap by queue.wake.at
	t       clock.Timer
	armedAt int64 // due time of t, 0 when unarmed
	closed  bool
}

// wakeEntry is a queue's place in the broker timer. Guarded by
// brokerTimer.mu.
type wakeEntry struct {
	at  int64 // when the queue's tick should run
	pos int   // 1 + index in brokerTimer.h; 0 when not there
}

// wake asks for q.tick to run at or before at (unix nanos). A queue
// already waiting for an earlier time keeps it.
func (bt *brokerTimer) wake(q *queue, at int64) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.closed {
		return
	}
	switch {
	case q.wake.pos == 0:
		q.wake.at = at
		bt.h = append(bt.h, q)
		q.wake.pos = len(bt.h)
		bt.up(len(bt.h) - 1)
	case at < q.wake.at:
		q.wake.at = at
		bt.up(q.wake.pos - 1)
	}
	bt.armLocked()
}

// forget drops q's entry (the queue is gone).
func (bt *brokerTimer) forget(q *queue) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if q.wake.pos != 0 {
		bt.removeLocked(q.wake.pos - 1)
	}
}

func (bt *brokerTimer) armLocked() {
	if len(bt.h) == 0 || bt.closed {
		return
	}
	next := bt.h[0].wake.at
	if bt.armedAt != 0 && bt.armedAt <= next {
		return
	}
	if bt.t != nil {
		bt.t.Stop()
	}
	bt.armedAt = next
	d := time.Duration(next - bt.clk.Now().UnixNano())
	if d < 0 {
		d = 0
	}
	bt.t = bt.clk.AfterFunc(d, bt.fire)
}

// fire runs every due queue's tick, then re-arms for the next.
func (bt *brokerTimer) fire() {
	now := bt.clk.Now().UnixNano()
	bt.mu.Lock()
	bt.armedAt = 0
	bt.t = nil
	var due []*queue
	for len(bt.h) > 0 && bt.h[0].wake.at <= now {
		due = append(due, bt.removeLocked(0))
	}
	bt.armLocked()
	bt.mu.Unlock()
	for _, q := range due {
		q.tick(now)
	}
}

func (bt *brokerTimer) close() {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	bt.closed = true
	if bt.t != nil {
		bt.t.Stop()
	}
	for _, q := range bt.h {
		q.wake.pos = 0
	}
	bt.h = nil
}

func (bt *brokerTimer) removeLocked(i int) *queue {
	n := len(bt.h) - 1
	if i != n {
		bt.swap(i, n)
	}
	q := bt.h[n]
	bt.h[n] = nil
	bt.h = bt.h[:n]
	if i != n && !bt.up(i) {
		bt.down(i)
	}
	q.wake.pos = 0
	return q
}

func (bt *brokerTimer) swap(i, j int) {
	h := bt.h
	h[i], h[j] = h[j], h[i]
	h[i].wake.pos = i + 1
	h[j].wake.pos = j + 1
}

func (bt *brokerTimer) up(j int) bool {
	moved := false
	for j > 0 {
		i := (j - 1) / 2
		if bt.h[i].wake.at <= bt.h[j].wake.at {
			break
		}
		bt.swap(i, j)
		j = i
		moved = true
	}
	return moved
}

func (bt *brokerTimer) down(i int) {
	n := len(bt.h)
	for {
		j := 2*i + 1
		if j >= n {
			return
		}
		if r := j + 1; r < n && bt.h[r].wake.at < bt.h[j].wake.at {
			j = r
		}
		if bt.h[i].wake.at <= bt.h[j].wake.at {
			return
		}
		bt.swap(i, j)
		i = j
	}
}

// setTimerLocked makes r's timer entry (its lock's expiry, or its
// scheduled activation) due at at, adding the entry or moving it.
func (q *queue) setTimerLocked(r *msgRec, at int64) {
	if r.tpos != 0 {
		q.mu.timers[r.tpos-1].at = at
		q.mu.timers.fix(int(r.tpos - 1))
	} else {
		q.mu.timers.push(timeItem{at: at, rec: r})
	}
	q.wakeLocked(at)
}

// dropTimerLocked removes r's timer entry, if it has one.
func (q *queue) dropTimerLocked(r *msgRec) {
	if r.tpos != 0 {
		q.mu.timers.remove(int(r.tpos - 1))
	}
}

// setSessionTimerLocked makes s's lock expire at at.
func (q *queue) setSessionTimerLocked(s *session, at int64) {
	if s.tpos != 0 {
		q.mu.timers[s.tpos-1].at = at
		q.mu.timers.fix(s.tpos - 1)
	} else {
		q.mu.timers.push(timeItem{at: at, sess: s})
	}
	q.wakeLocked(at)
}

// dropSessionTimerLocked removes s's lock expiry entry, if it has one.
func (q *queue) dropSessionTimerLocked(s *session) {
	if s.tpos != 0 {
		q.mu.timers.remove(s.tpos - 1)
	}
}

// wakeLocked makes sure the broker timer calls tick no later than at.
// Only a time earlier than the one already asked for takes the broker
// timer's mutex.
func (q *queue) wakeLocked(at int64) {
	if q.mu.wakeAt == 0 || at < q.mu.wakeAt {
		q.mu.wakeAt = at
		q.b.timer.wake(q, at)
	}
}

// timerFindingsLocked checks q's timers against its locks and schedule
// (for the consistency checker, on a quiet broker): every entry sits
// where its owner says, is due when its lock or schedule is, and belongs
// to a lock or scheduled message that still exists; and every message
// lock outside a session, every session lock and every scheduled message
// has its entry. An entry left behind would be a leak, a missing one a
// lock that never expires.
func (q *queue) timerFindingsLocked() []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	h := q.mu.timers
	for i, it := range h {
		if i > 0 && h[(i-1)/2].at > it.at {
			bad("timer entry %d is due before its parent", i)
		}
		switch r, s := it.rec, it.sess; {
		case s != nil:
			if s.tpos != i+1 {
				bad("session %q: timer entry %d says it is at %d", s.id, i, s.tpos-1)
			}
			if s.lock == (LockToken{}) || s.lockedUntil != it.at {
				bad("session %q: a timer entry for a lock it does not hold", s.id)
			}
		case r.tpos != int32(i+1):
			bad("message %d: timer entry %d says it is at %d", r.seq, i, r.tpos-1)
		case r.locked():
			if r.lockedUntil != it.at || q.mu.locked[r.lock] != r {
				bad("message %d: a timer entry that is not its lock's expiry", r.seq)
			}
		case q.mu.scheduled[r.seq] != r || r.scheduledAt != it.at:
			bad("message %d: a timer entry for neither a lock nor its schedule", r.seq)
		}
	}
	if q.b.cfg.Faults.IgnoreLockExpiry {
		return out // expired locks stay, without their entries
	}
	for _, r := range q.mu.locked {
		if s := q.sessionLocked(r); s != nil && s.locked[r.lock] == r {
			continue // the session lock's entry covers it
		}
		if r.tpos == 0 {
			bad("message %d is locked without a timer entry", r.seq)
		}
	}
	for _, r := range q.mu.scheduled {
		if r.tpos == 0 {
			bad("message %d is scheduled without a timer entry", r.seq)
		}
	}
	for _, s := range q.mu.sessions.byID {
		if s.lock != (LockToken{}) && s.tpos == 0 {
			bad("session %q is locked without a timer entry", s.id)
		}
	}
	return out
}
