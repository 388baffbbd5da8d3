package core

import (
	"cmp"
	"slices"
)

// Reading bodies for a delivery.
//
// A receive that finds a backlog hands out up to its credit of messages
// whose bodies are only on disk, usually with consecutive sequence
// numbers. loadBodies reads them with one ordered scan per body owner
// instead of one point lookup each, which costs an iterator set-up per
// message.

// scanDensity is how sparse a run of wanted sequence numbers may be (span
// per wanted message) for one scan to beat point lookups.
const scanDensity = 4

// loadBodies fills got[i].loaded for every taken message without a body
// in memory, as far as it can: it is only a faster way to read them.
// Messages a scan does not find or cannot decode, and every message after
// a scan fails, are left for message() to read one by one (and report).
func (q *queue) loadBodies(got []taken) {
	byOwner := make(map[uint64][]int)
	for i := range got {
		if got[i].msg == nil {
			byOwner[got[i].st.owner] = append(byOwner[got[i].st.owner], i)
		}
	}
	for owner, idx := range byOwner {
		if len(idx) < 2 {
			continue
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(got[a].seq, got[b].seq) })
		lo, hi := got[idx[0]].seq, got[idx[len(idx)-1]].seq
		if hi-lo+1 > int64(len(idx))*scanDensity {
			continue
		}
		want := make(map[int64]int, len(idx))
		for _, i := range idx {
			want[got[i].seq] = i
		}
		found := 0
		keys := make(keyCache) // the run's messages mostly share their property keys
		err := q.b.store.Scan(idKey(tabBody, owner), seqKey(tabBody, owner, lo), func(k, v []byte) (bool, error) {
			seq := seqFromKey(k)
			if seq > hi {
				return false, nil
			}
			i, ok := want[seq]
			if !ok {
				return true, nil
			}
			m, err := decodeBodyKeys(v, keys)
			if err != nil {
				return true, nil // message() reads it again and reports it
			}
			got[i].loaded = m
			found++
			return found < len(idx), nil
		})
		if err != nil {
			return // message() reads the rest one by one
		}
	}
}

// Reading ahead.
//
// A receiver working through a backlog takes a batch, settles it and asks
// for the next; reading the next batch's bodies only when it asks puts
// the store's latency between every two batches. When a receive leaves a
// message at the head of the queue whose body is only on disk, the queue
// reads the bodies of the messages next in line into the hand-over cache
// in the background, so the next receive finds them in memory. At most
// one read-ahead runs per queue, within the cache's byte budget; a
// message taken meanwhile is simply not cached.

// maxReadAhead caps the messages one read-ahead loads.
const maxReadAhead = 256

// headUncachedLocked reports whether the next deliverable message has no
// body in memory.
func (q *queue) headUncachedLocked() bool {
	r := q.mu.avail.peek()
	return r != nil && r.msg == nil
}

// startReadAhead reads ahead up to n messages unless a read-ahead is
// already running or the queue has sessions (whose messages go out per
// session, not in queue order).
func (q *queue) startReadAhead(n int) {
	if q.desc().RequiresSession && !q.isDeadLetter() {
		return
	}
	if !q.readingAhead.CompareAndSwap(false, true) {
		return
	}
	q.b.run(func() {
		defer q.readingAhead.Store(false)
		q.readAhead(min(n, maxReadAhead))
	})
}

// readAhead loads the bodies of up to n deliverable messages at the head
// of the queue that have none in memory, and keeps those still waiting
// for a receiver.
func (q *queue) readAhead(n int) {
	q.mu.Lock()
	var head []*msgRec
	for len(head) < n && len(q.mu.avail) > 0 {
		head = append(head, q.mu.avail.pop())
	}
	var want []taken
	room := q.cacheRoomLocked() // what the cache could keep (cache.go)
	for _, r := range head {
		q.mu.avail.push(r)
		if r.msg == nil && room >= cacheCost(r) {
			want = append(want, taken{r: r, st: r.stateRec, seq: r.seq})
			room -= cacheCost(r)
		}
	}
	q.mu.Unlock()
	if len(want) < 2 {
		return
	}
	q.loadBodies(want) // what it cannot read, a receive reads (and reports) itself
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, t := range want {
		r := t.r
		if t.loaded == nil || r.idx < 0 || r.msg != nil || q.mu.closed {
			continue // taken, or gone, meanwhile
		}
		if !q.cacheLocked(r, t.loaded) {
			return // the cache's budgets are spent (cache.go)
		}
	}
}
