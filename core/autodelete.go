package core

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/omnibusmq/omnibus/core/clock"
)

// AutoDeleteOnIdle.
//
// An entity whose AutoDeleteOnIdle is finite is deleted once it has been
// idle that long. Idle follows the Service Bus table (seed 003):
//
//	queue         no send, receive, update, scheduled message or peek
//	topic         no send, update or scheduled message, and every one of
//	              its subscriptions idle by the row below
//	subscription  no receive, update, new rule or peek
//
// Use is recorded by entity.touch (lastUsed). A queue or subscription
// with a blocked receiver, or holding scheduled messages, counts as in use,
// and one that forwards (ForwardTo) never idles: forwarding is a receiver.
//
// One clock timer (idleReaper) is armed for the earliest deadline of any
// such entity. When it fires, reapIdle deletes the entities that are idle
// now and re-arms for the next deadline; entities used meanwhile simply
// have a later deadline by then. Idleness restarts with the broker: the
// last use is not persisted.

// idleReaper owns the AutoDeleteOnIdle timer.
type idleReaper struct {
	mu     sync.Mutex // guards the fields below
	t      clock.Timer
	at     int64 // due time of t (unix nanos), 0 when unarmed
	closed bool
}

// autoDeletes reports whether e is subject to AutoDeleteOnIdle.
func autoDeletes(d *Entity) bool {
	return d.AutoDeleteOnIdle > 0 && d.AutoDeleteOnIdle < DefaultAutoDeleteOnIdle && d.ForwardTo == ""
}

// idleSince returns when e was last used (unix nanos), counting a topic's
// subscriptions as part of it. An entity busy right now (waiting receivers,
// scheduled messages) is touched and counts as used now.
func (e *entity) idleSince(now int64) int64 {
	if e.busy() {
		e.touch(now)
	}
	last := e.lastUsed.Load()
	if subs := e.subs.Load(); subs != nil {
		for _, s := range *subs {
			if s.busy() {
				s.touch(now)
			}
			last = max(last, s.lastUsed.Load())
		}
	}
	return last
}

// busy reports whether any queue of a queue or subscription (of any of
// its partitions) is busy.
func (e *entity) busy() bool {
	for _, u := range e.units() {
		if u.q != nil && u.q.busy() {
			return true
		}
	}
	return false
}

// busy reports whether a queue has a receiver waiting or scheduled
// messages, either of which keeps it from idling.
func (q *queue) busy() bool {
	for _, x := range []*queue{q, q.dead} {
		x.mu.Lock()
		busy := len(x.mu.waiters) > 0 || len(x.mu.sessions.waiters) > 0 || len(x.mu.scheduled) > 0
		x.mu.Unlock()
		if busy {
			return true
		}
	}
	return false
}

// armIdle arms the reaper for the earliest idle deadline, or stops it when
// no entity auto-deletes. Called after recovery, after each create and
// update, and by reapIdle itself.
func (b *Broker) armIdle() {
	now := b.Now()
	var next int64
	for _, e := range b.entities() {
		d := e.desc.Load()
		if !autoDeletes(d) {
			continue
		}
		due := e.idleSince(now) + int64(d.AutoDeleteOnIdle)
		if next == 0 || due < next {
			next = due
		}
	}

	r := &b.idle
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if next == 0 || (r.at != 0 && r.at <= next) {
		return // nothing to do, or the armed check comes first and re-arms
	}
	if r.t != nil {
		r.t.Stop()
	}
	r.at = next
	r.t = b.clk.AfterFunc(max(0, time.Duration(next-now)), b.reapIdle)
}

// reapIdle deletes every entity idle for its AutoDeleteOnIdle, then
// re-arms.
func (b *Broker) reapIdle() {
	b.idle.mu.Lock()
	b.idle.at, b.idle.t = 0, nil
	closed := b.idle.closed
	b.idle.mu.Unlock()
	if closed {
		return
	}
	now := b.Now()
	var victims []string
	for _, e := range b.entities() {
		d := e.desc.Load()
		if autoDeletes(d) && now-e.idleSince(now) >= int64(d.AutoDeleteOnIdle) {
			victims = append(victims, d.Path())
		}
	}
	for _, path := range victims {
		err := b.DeleteEntity(context.Background(), path)
		if err != nil && !errors.Is(err, ErrNotFound) && !b.closed() {
			b.log.Warn("auto-delete of an idle entity failed; retrying at the next check")
		}
	}
	b.armIdle()
}

// entities returns a snapshot of the registry, so callers can take queue
// mutexes without holding Broker.mu (which is taken alone).
func (b *Broker) entities() []*entity {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*entity, 0, len(b.mu.entities))
	for _, e := range b.mu.entities {
		out = append(out, e)
	}
	return out
}

func (r *idleReaper) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.t != nil {
		r.t.Stop()
	}
}
