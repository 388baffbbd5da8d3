package core

import (
	"encoding/binary"
	"time"
)

// dedupIndex is an entity's duplicate-detection history: the message ids
// seen within the window, oldest first. It is guarded by the inlet mutex
// and mirrored in 'D' records so it survives restarts.
type dedupIndex struct {
	seen  map[string]int64 // message id → first seen (unix nanos)
	order []dedupEntry
}

type dedupEntry struct {
	id string
	at int64
}

// seenLocked reports whether id is a duplicate; if not it records it in
// memory and in the plan's batch.
func (d *dedupIndex) seenLocked(p *sendPlan, e *entity, id string) bool {
	if id == "" {
		return false
	}
	if _, ok := d.seen[id]; ok {
		return true
	}
	if d.seen == nil {
		d.seen = make(map[string]int64)
	}
	d.seen[id] = p.now
	d.order = append(d.order, dedupEntry{id: id, at: p.now})
	p.batch.Set(nameKey(tabDedup, e.id, id), binary.BigEndian.AppendUint64(nil, uint64(p.now)))
	return false
}

// evictLocked forgets ids older than the window, deleting their records
// in the plan's batch.
func (d *dedupIndex) evictLocked(p *sendPlan, e *entity, window time.Duration) {
	cut := p.now - int64(window)
	n := 0
	for n < len(d.order) && d.order[n].at <= cut {
		id := d.order[n].id
		if d.seen[id] == d.order[n].at {
			delete(d.seen, id)
			p.batch.Delete(nameKey(tabDedup, e.id, id))
		}
		n++
	}
	if n > 0 {
		clear(d.order[:n])
		d.order = d.order[n:]
	}
}

// forgetLocked removes ids recorded by a send that failed, so that the
// client's retry is not mistaken for a duplicate of a message never stored.
func (d *dedupIndex) forgetLocked(ids []string, at int64) {
	for _, id := range ids {
		if d.seen[id] == at {
			delete(d.seen, id)
		}
	}
}

// restore adds a recovered history entry.
func (d *dedupIndex) restore(id string, at int64) {
	if d.seen == nil {
		d.seen = make(map[string]int64)
	}
	d.seen[id] = at
	d.order = append(d.order, dedupEntry{id: id, at: at})
}
