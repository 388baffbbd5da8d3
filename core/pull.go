package core

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/omnibusmq/omnibus/storage"
)

// Delivery records.
//
// A peek-lock delivery raises a message's delivery count, and the count
// must outlive a crash: a message locked when the broker stopped comes
// back with the count its delivery gave it (decisions.md, "Lock tokens").
// One message at a time that is a rewrite of its state record, and in
// the store's memtable every rewrite is an insert with a full skiplist
// search. A pull of several messages (one takeLocked) instead writes one
// delivery record ('L' queue-id pull-number, keys.go) holding each
// message's sequence number and new count; the state records keep the
// count they had. Whoever reads counts from the store (recovery, peek)
// takes, per message, the larger of its state record's count and the
// counts the delivery records give it.
//
// A record stays as long as some message still depends on it for its
// count: each msgRec delivered under it points at it (msgRec.pull) and
// the record counts them (live). A message stops depending on it when it
// leaves the queue (removeLocked: completed, dead-lettered, expired,
// received and deleted, purged), when a later pull records its newer
// count, when a settlement writes its state record with its count
// (defer, abandon with properties, a dead letter dead-lettered again),
// or when its delivery is taken back (a release, a session closed
// cleanly), which lowers the count below the record's: that write also
// writes a cancellation of the message's entry ('L' queue-id
// pull-number seq, empty), which the readers honour. An abandon without
// properties and a lock expiry write nothing: the message depends on the
// record until it is delivered again, settled or gone. When no message
// depends on a record any more, its deletion (and its cancellations')
// rides along the broker's next write (takeDonePulls). The records in
// memory and on disk are thus bounded by the messages that were
// delivered in a pull and are neither settled nor delivered since: in a
// queue with receivers, those of the pulls in flight.
//
// The max rule is sound because a message's count only grows, except by
// a take-back, which lowers it by one below its latest delivery's count
// and cancels that delivery's entry; every older entry is lower still.
// Sequence numbers are never reused within a queue, so an entry of a
// message that left the queue names no state record and is ignored.
//
// After a restart, recovery (recoverMessages) rebuilds the records'
// counts of live dependants from the store and deletes the ones no
// message needs; pull numbers continue past the highest found. Stores
// written before delivery records existed hold none; their state
// records carry every count, as before.

// minPull is the smallest pull that writes a delivery record. A record
// costs two memtable inserts (its set and, later, its deletion) against
// one state rewrite per message, so it pays from three messages; a
// single delivery (the REST gateway's, an SDK's receive of one) rewrites
// the state record as before.
const minPull = 4

// pullVersion is the first byte of a delivery record's value.
const pullVersion = 1

// pullRec is a stored delivery record of one queue.
type pullRec struct {
	key []byte // 'L' queue-id pull-number
	// Guarded by the queue's mutex:
	live      int32   // messages depending on it (msgRec.pull == this)
	cancelled []int64 // sequence numbers whose entry a cancellation voids
}

// pulls holds the delivery records no message depends on any more,
// deleted by the broker's next write.
type pulls struct {
	mu   sync.Mutex // guards done; taken alone or under a queue's mutex, last
	done []storage.Op
	n    atomic.Int32 // len(done), read without the mutex
}

// pullKeyLen is the length of a delivery record's key; a cancellation's
// key is that key and a sequence number.
const pullKeyLen = 17

// appendPullKey appends the key of delivery record n of queue id to b.
func appendPullKey(b []byte, id, n uint64) []byte {
	b = append(b, tabPull)
	b = binary.BigEndian.AppendUint64(b, id)
	return binary.BigEndian.AppendUint64(b, n)
}

// cancelKey returns the key of the cancellation of message seq's entry in
// the record with key pk.
func cancelKey(pk []byte, seq int64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, len(pk)+8), pk...), uint64(seq))
}

// setPull adds the write of one delivery record for the messages of got,
// each with the delivery count it was given, and returns the record.
func (w *write) setPull(q *queue, got []taken) *pullRec {
	b := w.alloc(pullKeyLen + 1 + binary.MaxVarintLen32 + len(got)*(binary.MaxVarintLen64+binary.MaxVarintLen32))
	b = appendPullKey(b, q.id, q.pullNo.Add(1))
	k := b[:pullKeyLen:pullKeyLen]
	v := b[pullKeyLen:]
	v = append(v, pullVersion)
	v = binary.AppendUvarint(v, uint64(len(got)))
	prev := int64(0)
	for i := range got {
		v = binary.AppendVarint(v, got[i].seq-prev)
		v = binary.AppendUvarint(v, uint64(got[i].st.deliveryCount))
		prev = got[i].seq
	}
	w.batch.Set(k, v)
	return &pullRec{key: k}
}

// cancelPull adds to w the cancellation of r's entry in the delivery
// record r depends on, if any: the caller writes r's state with a count
// below the record's (a take-back). The caller holds r (a consumed lock,
// or q.mu) and calls unpullLocked once w committed.
func (w *write) cancelPull(r *msgRec) {
	if p := r.pull; p != nil {
		w.batch.Set(cancelKey(p.key, r.seq), nil)
	}
}

// pullLocked makes r depend on p, dropping its older record.
func (q *queue) pullLocked(r *msgRec, p *pullRec) {
	q.unpullLocked(r)
	r.pull = p
	p.live++
}

// unpullLocked ends r's dependence on its delivery record. A record
// whose entry for r the caller cancelled (cancelPull) remembers it, so
// that its deletion takes the cancellation along.
func (q *queue) unpullLocked(r *msgRec) {
	p := r.pull
	if p == nil {
		return
	}
	r.pull = nil
	q.dropPullLocked(p)
}

// dropPullLocked drops one dependant of p; the last one's drop queues
// p's deletion.
func (q *queue) dropPullLocked(p *pullRec) {
	p.live--
	if p.live > 0 {
		return
	}
	b := q.b
	b.pulls.mu.Lock()
	// A record's key is set once and deleted once (pull numbers are
	// never reused), so DeleteOnce holds; a cancellation whose write was
	// retried may have been set twice, and gets a plain Delete.
	b.pulls.done = append(b.pulls.done, storage.Op{Kind: storage.OpDeleteOnce, Key: p.key})
	for _, seq := range p.cancelled {
		b.pulls.done = append(b.pulls.done, storage.Op{Kind: storage.OpDelete, Key: cancelKey(p.key, seq)})
	}
	b.pulls.n.Store(int32(len(b.pulls.done)))
	b.pulls.mu.Unlock()
}

// cancelledLocked ends r's dependence on its delivery record after a
// committed write cancelled r's entry there (cancelPull).
func (q *queue) cancelledLocked(r *msgRec) {
	if p := r.pull; p != nil {
		p.cancelled = append(p.cancelled, r.seq)
		q.unpullLocked(r)
	}
}

// takeDonePulls moves the pending deletions of delivery records into
// batch; putBackPulls returns them when batch failed. It costs an atomic
// load when none are pending.
func (b *Broker) takeDonePulls(batch *storage.Batch) int {
	if b.pulls.n.Load() == 0 {
		return 0
	}
	b.pulls.mu.Lock()
	ops := b.pulls.done
	b.pulls.done = nil
	b.pulls.n.Store(0)
	b.pulls.mu.Unlock()
	batch.Ops = append(batch.Ops, ops...)
	return len(ops)
}

func (b *Broker) putBackPulls(ops []storage.Op) {
	if len(ops) == 0 {
		return
	}
	b.pulls.mu.Lock()
	b.pulls.done = append(b.pulls.done, ops...)
	b.pulls.n.Store(int32(len(b.pulls.done)))
	b.pulls.mu.Unlock()
}

// pullEntry is the count a delivery record gives a message.
type pullEntry struct {
	count int32
	p     *pullRec // the record
}

// storedPulls is what q's delivery records say.
type storedPulls struct {
	best    map[int64]pullEntry // per message, the highest count an entry not cancelled gives it
	recs    []*pullRec          // every record, with its cancellations
	orphans [][]byte            // cancellations whose record is gone (a lost race, pull.go)
	last    uint64              // the highest pull number
}

// readPulls reads q's delivery records.
func (q *queue) readPulls() (*storedPulls, error) {
	sp := &storedPulls{}
	var cur *pullRec
	var entries []pullEntryAt
	flush := func() {
		for _, e := range entries {
			if e.cancelled {
				continue
			}
			if sp.best == nil {
				sp.best = make(map[int64]pullEntry)
			}
			if old, ok := sp.best[e.seq]; !ok || e.count > old.count {
				sp.best[e.seq] = pullEntry{count: e.count, p: cur}
			}
		}
		entries = entries[:0]
	}
	err := q.b.store.Scan(idKey(tabPull, q.id), nil, func(k, v []byte) (bool, error) {
		switch len(k) {
		case pullKeyLen:
			flush()
			cur = &pullRec{key: append([]byte(nil), k...)}
			sp.recs = append(sp.recs, cur)
			sp.last = max(sp.last, binary.BigEndian.Uint64(k[len(k)-8:]))
			var err error
			if entries, err = decodePull(v, entries); err != nil {
				return false, errf(CodeInternal, "core: the delivery record %x of '%s' cannot be read: %v", k, q.path, err)
			}
		case pullKeyLen + 8:
			seq := seqFromKey(k)
			if cur == nil || string(k[:pullKeyLen]) != string(cur.key) {
				sp.orphans = append(sp.orphans, append([]byte(nil), k...))
				return true, nil
			}
			cur.cancelled = append(cur.cancelled, seq)
			for i := range entries {
				if entries[i].seq == seq {
					entries[i].cancelled = true
				}
			}
		}
		return true, nil
	})
	flush()
	if err != nil {
		return nil, err
	}
	return sp, nil
}

// count returns the delivery count of message seq whose state record
// says stored, and the record it comes from (nil: the state record).
func (sp *storedPulls) count(seq int64, stored int32) (int32, *pullRec) {
	if e, ok := sp.best[seq]; ok && e.count > stored {
		return e.count, e.p
	}
	return stored, nil
}

// recovered makes the records no recovered message depends on, and the
// orphaned cancellations, deleted by the broker's next write, and lets
// pull numbers continue past the last one. The caller holds q.mu.
func (q *queue) recoveredPullsLocked(sp *storedPulls) {
	q.pullNo.Store(max(q.pullNo.Load(), sp.last))
	for _, p := range sp.recs {
		if p.live == 0 {
			p.live = 1
			q.dropPullLocked(p)
		}
	}
	if len(sp.orphans) > 0 {
		ops := make([]storage.Op, len(sp.orphans))
		for i, k := range sp.orphans {
			ops[i] = storage.Op{Kind: storage.OpDelete, Key: k}
		}
		q.b.putBackPulls(ops)
	}
}

// pullEntryAt is one entry of a delivery record as read.
type pullEntryAt struct {
	seq       int64
	count     int32
	cancelled bool
}

var errPullRecord = errors.New("malformed delivery record")

func decodePull(v []byte, out []pullEntryAt) ([]pullEntryAt, error) {
	if len(v) < 2 || v[0] != pullVersion {
		return out, errPullRecord
	}
	v = v[1:]
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)) {
		return out, errPullRecord
	}
	v = v[w:]
	prev := int64(0)
	for range n {
		d, w := binary.Varint(v)
		if w <= 0 {
			return out, errPullRecord
		}
		v = v[w:]
		c, w2 := binary.Uvarint(v)
		if w2 <= 0 || c > 1<<31-1 {
			return out, errPullRecord
		}
		v = v[w2:]
		prev += d
		out = append(out, pullEntryAt{seq: prev, count: int32(c)})
	}
	if len(v) != 0 {
		return out, errPullRecord
	}
	return out, nil
}

// delivered ends the peek-lock delivery of got once its write is done:
// with p, the delivery record that write committed, the messages depend
// on it; and their locks may expire from now on (lock.go).
func (q *queue) delivered(got []taken, p *pullRec) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p != nil {
		q.notePulledLocked(got, p)
	}
	for i := range got {
		q.deliveredLocked(&got[i])
	}
}

// notePulledLocked records, once the delivery record p committed, that
// the messages of got depend on it. Their locks cannot have ended
// meanwhile: neither expired (lock.go) nor taken back by their session's
// CloseSession, which waits for this write (closeWhenDelivered). A
// delivery taken back all the same would have a lower count in memory
// than p gives it, and not depend on p.
// A message delivered with its state record rewritten (a pull too small
// for a record) keeps the older record it may depend on: that entry's
// count is below the new one, and the message lets go of it when it
// leaves the queue.
func (q *queue) notePulledLocked(got []taken, p *pullRec) {
	p.live++ // held while noting, so that it cannot end half-way
	for i := range got {
		if t := &got[i]; t.r.deliveryCount == t.st.deliveryCount {
			q.pullLocked(t.r, p)
		}
	}
	q.dropPullLocked(p) // the hold
}
