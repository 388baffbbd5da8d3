package metrics

import (
	"github.com/omnibusmq/omnibus/core"
)

// Bounded labels.
//
// An entity keeps the label it got when a scrape first saw it: its own
// path while fewer than MaxEntities entities have one, else "other". The
// assignment is stable, so a series never changes meaning between
// scrapes; a deleted entity frees its slot for the next new one. The
// "other" series of each kind sum the folded entities, and stay monotonic
// when one of those is deleted: its last counts move into a retired sum
// that is added to every later scrape.

// entityLabels assigns labels and keeps the folded sums. Only the
// collector's Collect uses it, under collector.mu.
type entityLabels struct {
	max     int
	own     map[entityKey]bool          // entity → has a label of its own
	folded  map[entityKey]*foldedEntity // entity → last seen, for retiring
	retired map[retiredKey]*tally       // counts of folded entities gone, by namespace and kind
}

// entityKey names an entity: its namespace and its id there (ids are
// per namespace).
type entityKey struct {
	ns string
	id uint64
}

// retiredKey names an "other" series: a namespace and a kind.
type retiredKey struct {
	ns   string
	kind core.EntityKind
}

// foldedEntity is what the last scrape saw of a folded entity.
type foldedEntity struct {
	kind core.EntityKind
	last tally
}

// tally is the monotonic part of an entity's statistics.
type tally struct {
	counters [numCounters]int64
	send     histogramTally
	e2e      histogramTally
}

// histogramTally is a histogram's bucket counts and sum, not cumulative.
type histogramTally struct {
	counts []uint64
	sum    float64 // seconds
}

func (h *histogramTally) add(counts []uint64, sum float64) {
	if len(h.counts) < len(counts) {
		h.counts = append(h.counts, make([]uint64, len(counts)-len(h.counts))...)
	}
	for i, c := range counts {
		h.counts[i] += c
	}
	h.sum += sum
}

func (t *tally) add(o *tally) {
	for i := range t.counters {
		t.counters[i] += o.counters[i]
	}
	t.send.add(o.send.counts, o.send.sum)
	t.e2e.add(o.e2e.counts, o.e2e.sum)
}

// set copies the statistics of s into t, reusing t's slices.
func (t *tally) set(s *core.EntityStats) {
	t.counters = countersOf(s)
	t.send.counts = append(t.send.counts[:0], s.SendLatency.Counts...)
	t.send.sum = s.SendLatency.Sum.Seconds()
	t.e2e.counts = append(t.e2e.counts[:0], s.EndToEnd.Counts...)
	t.e2e.sum = s.EndToEnd.Sum.Seconds()
}

func newEntityLabels(max int) *entityLabels {
	return &entityLabels{max: max, own: map[entityKey]bool{}, folded: map[entityKey]*foldedEntity{},
		retired: map[retiredKey]*tally{}}
}

// label returns the entity label of snap of namespace ns, assigning one
// to an entity not seen before. A folded entity's statistics are noted
// for retiring.
func (l *entityLabels) label(ns string, snap *core.EntitySnapshot, seen map[entityKey]bool) string {
	k := entityKey{ns, snap.ID}
	seen[k] = true
	if l.own[k] {
		return snap.Path
	}
	f := l.folded[k]
	if f == nil {
		if len(l.own) < l.max {
			l.own[k] = true
			return snap.Path
		}
		f = &foldedEntity{kind: snap.Kind}
		l.folded[k] = f
	}
	f.last.set(&snap.Stats)
	return OtherEntity
}

// sweep forgets the entities the scrape did not see (deleted): their
// slots are free again, and folded ones' counts move to the retired sums.
// The retired sums of a namespace that is gone go too: its series end
// with it.
func (l *entityLabels) sweep(seen map[entityKey]bool, live map[string]bool) {
	for k := range l.own {
		if !seen[k] {
			delete(l.own, k)
		}
	}
	for k, f := range l.folded {
		if seen[k] {
			continue
		}
		rk := retiredKey{k.ns, f.kind}
		r := l.retired[rk]
		if r == nil {
			r = &tally{}
			l.retired[rk] = r
		}
		r.add(&f.last)
		delete(l.folded, k)
	}
	for rk := range l.retired {
		if !live[rk.ns] {
			delete(l.retired, rk)
		}
	}
}
