package core

import (
	"sort"
	"time"
)

// What a person looking at the broker (the web console) reads beyond the
// clients' view: sessions with their holders, and whether per-entity
// statistics are kept.

// StatsOn reports whether the broker keeps per-entity statistics
// ([Config.Stats]): without them [Broker.EntityStats] answers zeros.
func (b *Broker) StatsOn() bool { return b.cfg.Stats }

// SessionInfo describes one message session of an entity, for people
// looking at the broker (the web console): what it holds and whether a
// receiver has it locked. The broker does not know who a holder is beyond
// its lock, so the lock's expiry stands for the holder.
type SessionInfo struct {
	ID       string
	Messages int // messages of the session stored in the entity
	// StateSize is the length of the session state; StatePrefix holds its
	// first bytes (at most [SessionStatePrefix]). StateSetAt is zero when
	// the session has no state.
	StateSize   int
	StatePrefix []byte
	StateSetAt  time.Time
	// Locked tells whether a receiver holds the session, until LockedUntil.
	Locked      bool
	LockedUntil time.Time
}

// SessionStatePrefix is how many bytes of a session's state
// [Broker.Sessions] copies out.
const SessionStatePrefix = 1024

// Sessions lists the sessions of the session-enabled queue or
// subscription at path that have messages, state or a holder, sorted by
// id: at most max of them (1 to 1000) with ids after the id after, and the
// number of such sessions in all.
func (b *Broker) Sessions(path, after string, max int) ([]SessionInfo, int, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, 0, err
		}
		return be.Sessions(path, after, max)
	}
	if max < 1 || max > 1000 {
		return nil, 0, errf(CodeBadRequest, "list at most 1 to 1000 sessions, not %d", max)
	}
	qs, err := b.sessionQueues(path)
	if err != nil {
		return nil, 0, err
	}
	// The ids are sorted outside the queue mutex: senders and receivers
	// wait on it.
	var ids []string
	for _, q := range qs {
		q.mu.Lock()
		for id, s := range q.mu.sessions.byID {
			if s.count > 0 || s.state != nil || s.lock != (LockToken{}) {
				ids = append(ids, id)
			}
		}
		q.mu.Unlock()
	}
	sort.Strings(ids)
	total := len(ids)
	i := sort.SearchStrings(ids, after)
	if i < len(ids) && ids[i] == after {
		i++
	}
	ids = ids[i:min(i+max, len(ids))]
	out := make([]SessionInfo, 0, len(ids))
	e := qs[0].ent.root()
	for _, id := range ids {
		q := e.partForSession(id).q
		q.mu.Lock()
		s := q.mu.sessions.byID[id]
		if s == nil {
			q.mu.Unlock()
			continue // gone meanwhile
		}
		info := SessionInfo{ID: id, Messages: s.count, StateSize: len(s.state)}
		if s.state != nil {
			info.StatePrefix = append([]byte{}, s.state[:min(len(s.state), SessionStatePrefix)]...)
			info.StateSetAt = nanosToTime(s.stateAt)
		}
		if s.lock != (LockToken{}) {
			info.Locked = true
			info.LockedUntil = nanosToTime(s.lockedUntil)
		}
		q.mu.Unlock()
		out = append(out, info)
	}
	return out, total, nil
}

// Waiting reports whether a receiver (or an AcceptSession) waits on the
// queue, subscription or dead-letter subqueue at path now.
func (b *Broker) Waiting(path string) bool {
	a := ParseAddress(path)
	e, err := b.lookup(a)
	if err != nil {
		return false
	}
	for _, q := range e.mainQueues(a.DeadLetter) {
		q.mu.Lock()
		n := len(q.mu.waiters) + len(q.mu.sessions.waiters)
		q.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}
