package core

import (
	"cmp"
	"encoding/binary"
	"slices"
	"time"

	"go.uber.org/zap"
)

// dedupIndex is an entity's duplicate-detection history: the message ids
// seen within the window, oldest first. It is guarded by the inlet mutex
// and mirrored in 'D' records so it survives restarts.
//
// The history holds at most Limits.DedupHistoryMax ids: past the cap the
// oldest is forgotten before its window ends, its record deleted in the
// same batch, and the early evictions are logged at most once a minute.
type dedupIndex struct {
	seen  map[string]int64 // message id → first seen (unix nanos)
	order []dedupEntry     // oldest first; may hold ids since forgotten
	// unsorted is set by restore (recovery scans ids in key order, not
	// time order); the next eviction sorts order first.
	unsorted bool
	early    int   // ids evicted by the cap since the last report
	warnedAt int64 // when early evictions were last reported (unix nanos)
}

type dedupEntry struct {
	id string
	at int64
}

// dedupWarnEvery is how often early evictions are reported per entity.
const dedupWarnEvery = int64(time.Minute)

// seenLocked reports whether id is a duplicate; if not it records it in
// memory and in the plan's batch, evicting the oldest id if the history
// is full.
func (d *dedupIndex) seenLocked(p *sendPlan, e *entity, id string) bool {
	if id == "" {
		return false
	}
	if _, ok := d.seen[id]; ok {
		return !p.b.cfg.Faults.IgnoreDuplicates
	}
	if d.seen == nil {
		d.seen = make(map[string]int64)
	}
	if max := p.b.cfg.Limits.DedupHistoryMax; len(d.order) >= max {
		d.evictEarlyLocked(p, e, len(d.order)-max+1)
	}
	d.seen[id] = p.now
	d.order = append(d.order, dedupEntry{id: id, at: p.now})
	p.batch.Set(nameKey(tabDedup, e.id, id), binary.BigEndian.AppendUint64(nil, uint64(p.now)))
	return false
}

// evictLocked forgets ids older than the window, deleting their records
// in the plan's batch.
func (d *dedupIndex) evictLocked(p *sendPlan, e *entity, window time.Duration) {
	d.sortLocked()
	cut := p.now - int64(window)
	n := 0
	for n < len(d.order) && d.order[n].at <= cut {
		n++
	}
	d.dropLocked(p, e, n)
}

// evictEarlyLocked forgets the n oldest entries although their window
// has not ended, and reports it now and then.
func (d *dedupIndex) evictEarlyLocked(p *sendPlan, e *entity, n int) {
	d.sortLocked()
	d.dropLocked(p, e, n)
	d.early += n
	if p.now-d.warnedAt >= dedupWarnEvery {
		p.b.log.Warn("duplicate detection history is full: forgetting the oldest message ids before their window ends",
			zap.String("entity", e.desc.Load().Path()),
			zap.Int("cap", p.b.cfg.Limits.DedupHistoryMax),
			zap.Int("evicted", d.early))
		d.warnedAt = p.now
		d.early = 0
	}
}

// dropLocked removes the first n entries of order, deleting the records
// of those still current.
func (d *dedupIndex) dropLocked(p *sendPlan, e *entity, n int) {
	if n <= 0 {
		return
	}
	for _, x := range d.order[:n] {
		if at, ok := d.seen[x.id]; ok && at == x.at {
			delete(d.seen, x.id)
			p.batch.Delete(nameKey(tabDedup, e.id, x.id))
		}
	}
	clear(d.order[:n])
	d.order = d.order[n:]
}

func (d *dedupIndex) sortLocked() {
	if d.unsorted {
		slices.SortStableFunc(d.order, func(a, b dedupEntry) int { return cmp.Compare(a.at, b.at) })
		d.unsorted = false
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
	d.unsorted = true
}

// size is how many entries the history holds (tests).
func (d *dedupIndex) size() (ids, entries int) { return len(d.seen), len(d.order) }
