package core

import (
	"github.com/omnibusmq/omnibus/storage"
)

// Writes.
//
// Every change the core makes durable goes through a write: the batch to
// apply, plus the reservations taken while planning it. The rule is that
// memory changes only after commit has returned nil. Until then the
// records a write concerns are kept out of everyone else's reach by a
// reservation:
//
//   - a settled message's lock, consumed so that a second settlement of
//     the same token fails (holdLock);
//   - a record taken out of avail to be moved or dropped: expired, out of
//     deliveries, with a damaged body (holdAside);
//   - a scheduled record being cancelled (holdScheduled);
//   - the records a receive took for a delivery (write.take);
//   - a reference to a topic's shared body, dropped by a write that
//     removes or moves a subscription's copy (write.refs, topic.go).
//
// A writer calls newWrite, defers abort at once and commits when the
// batch is complete. abort gives every reservation back unless commit
// succeeded, whatever path the writer left by; commit settles the body
// references either way. There is no other undo in the core.
type write struct {
	b     *Broker
	batch storage.Batch
	// bodies are the deletions of bodies deleteRecords plans, applied
	// after the rest of batch (commit): a run of increasing body keys
	// after the run of state keys, where alternating them made the
	// store's memtable search its whole skiplist for each.
	bodies storage.Batch
	holds  []hold
	refs   []bodyRelease
	refIdx map[refKey]refSum // sums of refs by body, once there are many (refsOf)
	take   struct {          // records a receive took; untaken if the write fails
		q    *queue
		got  []taken
		mode ReceiveMode
	}
	done bool // committed or aborted
	// room is what is left of the last allocation room made for the
	// keys and records the batch borrows until commit.
	room     []byte
	roomSize int // the size of that allocation
}

// settleWrite is a write with room for one hold and one reference, so
// that a single settlement allocates nothing beyond the write itself.
type settleWrite struct {
	write
	holdBuf [1]hold
	refBuf  [1]bodyRelease
}

// holdKind says how a held record is given back.
type holdKind uint8

const (
	holdLock      holdKind = iota + 1 // relock it with its token
	holdAside                         // return it where receivers find it
	holdScheduled                     // schedule it again
)

// hold is a reservation of one record of one queue.
type hold struct {
	kind holdKind
	q    *queue
	r    *msgRec
	tok  LockToken // holdLock: the consumed token
}

// bodyRelease is a reference to a shared topic body that a write dropped.
type bodyRelease struct {
	q       *queue // the subscription (or its dead-letter subqueue) whose copy it was
	seq     int64
	deleted bool // the write's batch deletes the body
}

// newWrite returns an empty write; with sync its batch is durable when
// commit returns.
func (b *Broker) newWrite(sync bool) *write {
	return &write{b: b, batch: storage.Batch{Sync: sync}}
}

// newSettleWrite is newWrite for settlements (Settle, CompleteMany): one
// message's needs come with the write.
func (b *Broker) newSettleWrite(sync bool) *write {
	sw := &settleWrite{write: write{b: b, batch: storage.Batch{Sync: sync}}}
	sw.holds, sw.refs = sw.holdBuf[:0], sw.refBuf[:0]
	return &sw.write
}

// hold records a reservation of r, which the caller has taken out of q's
// structures (under q.mu).
func (w *write) hold(kind holdKind, q *queue, r *msgRec, tok LockToken) {
	w.holds = append(w.holds, hold{kind: kind, q: q, r: r, tok: tok})
}

// holdTaken records the records a receive took, given back untouched if
// the write fails.
func (w *write) holdTaken(q *queue, got []taken, mode ReceiveMode) {
	w.take.q, w.take.got, w.take.mode = q, got, mode
}

// releaseRef drops q's reference to the shared body of message seq and
// deletes the body in this write when it was the last one.
func (w *write) releaseRef(q *queue, seq int64) {
	k := refKey{q.shared, seq}
	mine := w.refsOf(k).n // releases of the same body earlier in this write
	del := q.shared.beginRelease(seq, mine)
	if del {
		w.batch.DeleteOnce(seqKey(tabBody, q.shared.id, seq)) // see deleteRecords
	}
	w.refs = append(w.refs, bodyRelease{q: q, seq: seq, deleted: del})
	if w.refIdx != nil {
		c := w.refIdx[k]
		c.n++
		c.deleted = c.deleted || del
		w.refIdx[k] = c
	}
}

// refKey names a shared body.
type refKey struct {
	topic *entity
	seq   int64
}

// refSum is what a write did to one shared body: how many references it
// released, and whether it deletes the body.
type refSum struct {
	n       int32
	deleted bool
}

// refsOf sums the write's releases of one body. A write that releases
// many (a large CompleteMany) keeps an index instead of scanning.
func (w *write) refsOf(k refKey) refSum {
	const indexFrom = 16
	if w.refIdx == nil && len(w.refs) >= indexFrom {
		w.refIdx = make(map[refKey]refSum, 2*len(w.refs))
		for _, rr := range w.refs {
			rk := refKey{rr.q.shared, rr.seq}
			c := w.refIdx[rk]
			c.n++
			c.deleted = c.deleted || rr.deleted
			w.refIdx[rk] = c
		}
	}
	if w.refIdx != nil {
		return w.refIdx[k]
	}
	var c refSum
	for _, rr := range w.refs {
		if rr.seq == k.seq && rr.q.shared == k.topic {
			c.n++
			c.deleted = c.deleted || rr.deleted
		}
	}
	return c
}

// deleteRecords adds the deletion of a message's records of q: its state
// record, and its body unless the body is shared and still needed.
//
// A body is deleted with DeleteOnce (storage.Batch.DeleteOnce): a body
// record is set once, by the send, and deleted once, so the store may
// drop the deletion with the record instead of keeping a tombstone. The
// invariant is kept where a body is written again (rewriteBody: a
// dead-lettered or modified message), which deletes the record before
// setting it again. Sequence numbers are never reused within an owner
// (send.go reserves them durably), so no send sets a body key twice.
func (w *write) deleteRecords(q *queue, seq int64, owner uint64, shared bool) {
	if shared {
		w.batch.Delete(seqKey(tabState, q.id, seq))
		w.releaseRef(q, seq)
		return
	}
	// Both keys in one piece of room (a completion's only allocation).
	sk := appendSeqKey(w.alloc(2*seqKeyLen), tabState, q.id, seq)
	w.batch.Delete(sk[:len(sk):len(sk)])
	w.bodies.DeleteOnce(appendSeqKey(sk[len(sk):], tabBody, owner, seq))
}

// rewriteBody adds the write of body as the body record of message seq
// of owner, which may already hold one: the record is deleted first, in
// the same batch, so that the key again holds one value set once since
// its last deletion and the message's final DeleteOnce (deleteRecords)
// cannot bring the older body back.
func (w *write) rewriteBody(owner uint64, seq int64, body []byte) {
	k := seqKey(tabBody, owner, seq)
	w.batch.Delete(k)
	w.batch.Set(k, body)
}

// setState adds the write of st as q's state record of message seq, key
// and value in one piece of room (a delivery count's only allocation).
func (w *write) setState(q *queue, seq int64, st *stateRec) {
	k := appendSeqKey(w.alloc(seqKeyLen+maxStateRecLen+len(st.sessionID)), tabState, q.id, seq)
	w.batch.Set(k[:len(k):len(k)], st.encode(k[len(k):]))
}

// maxRoom is the most alloc allocates at once beyond what is asked.
const maxRoom = 4 << 10

// alloc returns an empty slice with room for n bytes, for keys and
// records the batch borrows until it is applied. A write of many
// messages (a batch of completions, of delivery counts) takes them from
// a few allocations, each twice the size of the one before up to
// maxRoom, rather than one per message; a write of one message still
// allocates only what it asks for.
func (w *write) alloc(n int) []byte {
	if cap(w.room) < n {
		w.roomSize = max(min(2*w.roomSize, maxRoom), n)
		w.room = make([]byte, 0, w.roomSize)
	}
	b := w.room[:0:n]
	w.room = w.room[n:n]
	return b
}

// commit applies the batch. On failure every reservation is given back
// and the store's error is returned as a core error (storeerr.go); on
// success the caller makes its in-memory change.
func (w *write) commit() error {
	w.batch.Ops = append(w.batch.Ops, w.bodies.Ops...)
	w.bodies.Ops = nil
	if len(w.batch.Ops) > 0 {
		// Delivery records no message needs go with any write (pull.go).
		n := w.b.takeDonePulls(&w.batch)
		if err := w.b.store.Apply(&w.batch); err != nil {
			w.b.putBackPulls(w.batch.Ops[len(w.batch.Ops)-n:])
			w.abort()
			return storeError(err)
		}
	}
	w.done = true
	w.b.retryOrphans() // earlier refusals first: the disk took this write
	w.endRefs()
	return nil
}

// abort gives back every reservation of a write that did not commit. It
// does nothing once the write is done, so writers defer it right after
// newWrite.
//
// Each queue's share is given back under its mutex, in one critical
// section with the check whether its entity was deleted meanwhile: the
// deletion (manage.go) releases the body references of the records it
// finds in the queue under the same mutex, so each record's reference is
// released exactly once, by the deletion or here.
func (w *write) abort() {
	if w.done {
		return
	}
	w.done = true
	var orphans storage.Batch
	now := w.b.Now()
	var seen [4]*queue
	queues := seen[:0]
	note := func(q *queue) {
		for _, x := range queues {
			if x == q {
				return
			}
		}
		queues = append(queues, q)
	}
	for i := range w.holds {
		note(w.holds[i].q)
	}
	for i := range w.refs {
		note(w.refs[i].q)
	}
	if w.take.q != nil {
		note(w.take.q)
	}
	for _, q := range queues {
		q.mu.Lock()
		gone := q.mu.deleted
		if !gone {
			for i := range w.holds {
				if w.holds[i].q == q {
					q.giveBackLocked(&w.holds[i])
				}
			}
			if w.take.q == q {
				q.untakeLocked(w.take.got, w.take.mode)
			}
		}
		for _, rr := range w.refs {
			if rr.q == q && q.shared.endRelease(rr.seq, gone, false) {
				orphans.Delete(seqKey(tabBody, q.shared.id, rr.seq))
			}
		}
		if !q.mu.closed {
			q.serveWaitersLocked(now)
		}
		q.mu.Unlock()
	}
	w.b.deleteOrphans(&orphans)
}

// giveBackLocked undoes one reservation.
func (q *queue) giveBackLocked(h *hold) {
	r := h.r
	switch h.kind {
	case holdLock:
		// A lock that expired during the write expires at once.
		q.relockLocked(r, h.tok)
	case holdAside:
		q.returnLocked(r)
	case holdScheduled:
		q.mu.scheduled[r.seq] = r
		q.setTimerLocked(r, r.scheduledAt)
	}
}

// endRefs ends the body references of a committed write. A body whose
// last reference went while another write releasing one was still in
// flight is deleted here, by whichever write finished last.
func (w *write) endRefs() {
	if len(w.refs) == 0 {
		return
	}
	var orphans storage.Batch
	for _, rr := range w.refs {
		if rr.q.shared.endRelease(rr.seq, true, w.deletesBody(rr)) {
			orphans.Delete(seqKey(tabBody, rr.q.shared.id, rr.seq))
		}
	}
	w.b.deleteOrphans(&orphans)
}

// deletesBody reports whether the write's batch deletes the shared body
// rr refers to.
func (w *write) deletesBody(rr bodyRelease) bool {
	return w.refsOf(refKey{rr.q.shared, rr.seq}).deleted
}
