package core

import (
	"container/heap"
	"math"
)

// Finding what a batch delete deletes (purge.go).
//
// Which messages were enqueued before the cutoff is known in memory for
// two kinds only: a message that was scheduled is enqueued at its
// scheduled time (stateRec.scheduledAt), and a message whose body is in
// the hand-over cache carries its EnqueuedTime. Every other message was
// enqueued when it was sent, and sends take sequence numbers in the order
// they happen, so among those the enqueue time grows with the sequence
// number (to the clock's resolution: two sends racing within the same
// instant may swap). eligible therefore finds the first such message
// enqueued at or after the cutoff by bisection, reading O(log n) bodies
// instead of n. A message scheduled before the cutoff always has a lower
// sequence number than one sent at or after it, so once that boundary is
// met nothing further along the queue is eligible.
//
// Dead-letter subqueues break that order (a dead-lettered scheduled
// message keeps its enqueue time but not its scheduledAt), so there every
// uncached candidate's body is read, with the ordered scans receives use.

// deleteCand is a message found for a batch delete, with what deciding
// about it needs, copied under the queue mutex.
type deleteCand struct {
	r     *msgRec
	seq   int64
	owner uint64
	sched int64    // scheduledAt: the enqueue time of a message that was scheduled
	msg   *Message // the cached body, if any
}

// visitsPerCandidate bounds the records deleteCandidates looks at for
// each candidate it returns: messages it passes over (earlier rounds',
// scheduled ones enqueued after the cutoff) cost a visit each.
const visitsPerCandidate = 16

// deleteCandidates returns up to n available messages with sequence
// numbers above after, lowest first, leaving out those known to be
// enqueued at or after cutoff: of one session (sessionID) or of every
// session on a session-enabled queue, of the queue's own heap otherwise.
// Nothing is taken: the heaps are walked in order through a frontier.
func (q *queue) deleteCandidates(n int, sessionID string, cutoff, after int64) ([]deleteCand, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return nil, entityNotFound(q.path)
	}
	var f frontier
	switch {
	case !q.desc().RequiresSession || q.isDeadLetter():
		f.add(&q.mu.avail, 0)
	case sessionID != "":
		if s := q.mu.sessions.byID[sessionID]; s != nil {
			f.add(&s.avail, 0)
		}
	default:
		for _, s := range q.mu.sessions.byID {
			f.add(&s.avail, 0)
		}
	}
	heap.Init(&f)
	var out []deleteCand
	for visits := 0; len(f) > 0 && len(out) < n && visits < n*visitsPerCandidate; visits++ {
		it := heap.Pop(&f).(frontierItem)
		for _, child := range [2]int{2*it.i + 1, 2*it.i + 2} {
			if child < len(*it.h) {
				heap.Push(&f, frontierItem{it.h, child})
			}
		}
		r := (*it.h)[it.i]
		if r.seq <= after || (r.scheduledAt != 0 && r.scheduledAt >= cutoff) {
			continue
		}
		out = append(out, deleteCand{r: r, seq: r.seq, owner: r.owner, sched: r.scheduledAt, msg: r.msg})
	}
	return out, nil
}

// eligible returns the candidates enqueued before cutoff. boundary
// reports that a candidate sent at or after the cutoff was met, past
// which (outside dead-letter subqueues) none is eligible. The candidates
// are in sequence order; those with sched set are known to be eligible.
func (q *queue) eligible(cands []deleteCand, cutoff int64) (out []deleteCand, boundary bool, err error) {
	var sent []int // indexes of the candidates enqueued when sent
	for i, c := range cands {
		if c.sched == 0 {
			sent = append(sent, i)
		}
	}
	first := len(sent) // index in sent of the first one at or after the cutoff
	if !q.isDeadLetter() {
		if first, err = q.firstNotBefore(cands, sent, cutoff); err != nil {
			return nil, false, err
		}
	} else if err = q.enqueueTimes(cands, sent); err != nil {
		return nil, false, err
	}
	late := make(map[int]bool, len(sent)-first)
	for k, i := range sent {
		if k >= first || (q.isDeadLetter() && enqueuedAt(cands[i]) >= cutoff) {
			late[i] = true
		}
	}
	for i, c := range cands {
		if !late[i] {
			out = append(out, c)
		}
	}
	return out, first < len(sent), nil
}

// firstNotBefore bisects sent (indexes into cands, enqueue times rising)
// for the first candidate enqueued at or after cutoff, len(sent) if none.
func (q *queue) firstNotBefore(cands []deleteCand, sent []int, cutoff int64) (int, error) {
	lo, hi := 0, len(sent)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if lo == 0 && hi == len(sent) {
			mid = hi - 1 // the common case, a cutoff after everything: one read
		}
		if err := q.loadEnqueueTime(&cands[sent[mid]]); err != nil {
			return 0, err
		}
		if enqueuedAt(cands[sent[mid]]) < cutoff {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// enqueueTimes loads the bodies of the candidates sent indexes that are
// not cached, with the ordered scans of a delivery where they are dense.
func (q *queue) enqueueTimes(cands []deleteCand, sent []int) error {
	var got []taken
	var at []int
	for _, i := range sent {
		if cands[i].msg == nil {
			got = append(got, taken{seq: cands[i].seq, st: stateRec{owner: cands[i].owner}})
			at = append(at, i)
		}
	}
	q.loadBodies(got)
	for k, i := range at {
		if got[k].loaded != nil {
			cands[i].msg = got[k].loaded
		} else if err := q.loadEnqueueTime(&cands[i]); err != nil {
			return err
		}
	}
	return nil
}

// loadEnqueueTime reads c's body unless it is known. A body that is gone
// (completed meanwhile) or damaged counts as enqueued long ago: deleting
// it is what a purge is for, and one that is gone is skipped when taken.
func (q *queue) loadEnqueueTime(c *deleteCand) error {
	if c.msg != nil || c.sched != 0 {
		return nil
	}
	m, _, err := q.loadBody(c.owner, c.seq)
	switch {
	case err == nil:
		c.msg = m
	case damaged(err):
		c.msg = &Message{}
	default:
		return err
	}
	return nil
}

// enqueuedAt is c's enqueue time in unix nanos once it is known.
func enqueuedAt(c deleteCand) int64 {
	if c.sched != 0 {
		return c.sched
	}
	if c.msg == nil || c.msg.EnqueuedTime.IsZero() {
		return math.MinInt64
	}
	return c.msg.EnqueuedTime.UnixNano()
}

// frontier is a min-heap, by sequence number, of positions in record
// heaps: the next records of an in-order walk of one or more heaps.
type frontier []frontierItem

type frontierItem struct {
	h *recHeap
	i int
}

// add puts position i of h on the frontier if h has it, before
// heap.Init orders it.
func (f *frontier) add(h *recHeap, i int) {
	if i < len(*h) {
		*f = append(*f, frontierItem{h, i})
	}
}

func (f frontier) Len() int           { return len(f) }
func (f frontier) Less(a, b int) bool { return (*f[a].h)[f[a].i].seq < (*f[b].h)[f[b].i].seq }
func (f frontier) Swap(a, b int)      { f[a], f[b] = f[b], f[a] }
func (f *frontier) Push(x any)        { *f = append(*f, x.(frontierItem)) }
func (f *frontier) Pop() any {
	old := *f
	it := old[len(old)-1]
	*f = old[:len(old)-1]
	return it
}
