package core

import (
	"context"
)

// PeekOptions parameterise [Broker.Peek].
type PeekOptions struct {
	From      int64  // first sequence number to consider
	Max       int    // at most this many; values < 1 mean 1
	SessionID string // only this session's messages, when set
	// MaxBytes, when positive, ends the peek before the message that
	// would take the messages' sizes (Message.Size) past it; the first
	// message is returned whatever its size.
	MaxBytes int
	// Reserve, when set, is called with each message's size before its
	// body is loaded; when it returns false the peek ends there, with
	// the messages before it (none, if it refuses the first). The caller
	// gives back what it reserved once it lets go of the messages: a
	// fronts' memory budget takes the bodies this way before they are
	// read.
	Reserve func(size int) bool
}

// Peek browses the messages of a queue, subscription or dead-letter
// subqueue from a sequence number, in sequence order, without locking
// them: active (locked or not), deferred and scheduled messages, each
// with its State. Expired messages not yet removed are included, as in
// Service Bus.
//
// On a partitioned entity the messages come in sequence-number order
// across the partitions too: partition 0's, then partition 1's (see
// partition.go), so paging from the last number seen plus one visits
// every message once. A session's messages are all in one partition.
func (b *Broker) Peek(ctx context.Context, path string, opts PeekOptions) ([]*Message, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return nil, err
		}
		return be.Peek(ctx, path, opts)
	}
	qs, err := b.queuesFor(path)
	if err != nil {
		return nil, err
	}
	if opts.Max < 1 {
		opts.Max = 1
	}
	if len(qs) == 1 {
		out, _, err := qs[0].peek(opts, 0)
		return out, err
	}
	e := qs[0].ent.root()
	if opts.SessionID != "" {
		p := e.partForSession(opts.SessionID).part
		out, _, err := qs[p].peek(opts, 0)
		return out, err
	}
	var out []*Message
	total := 0
	for p := min(PartitionOfSequence(max(opts.From, 0)), len(qs)); p < len(qs) && len(out) < opts.Max; p++ {
		o := opts
		o.From = max(opts.From, partitionBase(p))
		o.Max = opts.Max - len(out)
		msgs, n, err := qs[p].peek(o, total)
		if err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		out = append(out, msgs...)
		total = n
		if n < 0 {
			break // the byte budget or the reservation ended it
		}
	}
	return out, nil
}

// peek is Peek on one queue, with total bytes already returned by
// earlier queues of the same peek (a partitioned entity's). It returns
// the bytes returned so far, or -1 when the byte budget or opts.Reserve
// stopped it before its queue's messages ran out.
func (q *queue) peek(opts PeekOptions, total int) ([]*Message, int, error) {
	b := q.b
	type hit struct {
		seq int64
		st  stateRec
	}
	var hits []hit
	start := seqKey(tabState, q.id, max(opts.From, 0))
	err := b.store.Scan(idKey(tabState, q.id), start, func(k, v []byte) (bool, error) {
		st, err := decodeState(v)
		if err != nil {
			return false, err
		}
		if opts.SessionID != "" && st.sessionID != opts.SessionID {
			return true, nil
		}
		hits = append(hits, hit{seq: seqFromKey(k), st: st})
		return len(hits) < opts.Max, nil
	})
	if err != nil {
		return nil, 0, storeError(err)
	}
	if len(hits) > 0 {
		// Counts given by pulls are in delivery records (pull.go).
		pulls, err := q.readPulls()
		if err != nil {
			return nil, 0, storeError(err)
		}
		for i := range hits {
			hits[i].st.deliveryCount, _ = pulls.count(hits[i].seq, hits[i].st.deliveryCount)
		}
	}
	out := make([]*Message, 0, len(hits))
	first := total == 0
	for _, h := range hits {
		size := int(h.st.size)
		if opts.MaxBytes > 0 && (len(out) > 0 || !first) && total+size > opts.MaxBytes {
			return out, -1, nil
		}
		if opts.Reserve != nil && !opts.Reserve(size) {
			return out, -1, nil
		}
		total += size
		m, _, err := q.loadBody(h.st.owner, h.seq)
		if err != nil {
			if damaged(err) {
				// Completed while we looked, or unreadable: a receive
				// moves the latter to the dead-letter subqueue.
				continue
			}
			return nil, 0, err
		}
		m.SequenceNumber = h.seq
		if m.EnqueuedSequenceNumber == 0 {
			m.EnqueuedSequenceNumber = h.seq
		}
		m.DeliveryCount = h.st.deliveryCount
		m.State = h.st.state
		m.ExpiresAt = nanosToTime(h.st.expiresAt)
		reportTTL(m)
		if h.st.scheduledAt != 0 {
			m.ScheduledEnqueueTime = nanosToTime(h.st.scheduledAt)
		}
		out = append(out, m)
	}
	return out, total, nil
}

// CancelScheduled removes scheduled messages from a queue or topic by
// sequence number. Numbers of messages no longer scheduled are ignored.
func (b *Broker) CancelScheduled(ctx context.Context, path string, seqs []int64) error {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return err
		}
		return be.CancelScheduled(ctx, path, seqs)
	}
	a := ParseAddress(path)
	if a.DeadLetter || a.Sub != "" {
		return errf(CodeBadRequest, "cancel scheduled messages on the queue or topic, not on '%s'", a.String())
	}
	e, err := b.lookup(a)
	if err != nil {
		return err
	}
	// One write for every copy, so a topic's message is cancelled in all
	// its subscriptions or in none.
	// A partitioned entity's numbers are each in one partition; the
	// others have none of them to cancel.
	var qs []*queue
	for _, u := range e.units() {
		if u.q != nil {
			qs = append(qs, u.q)
		} else if subs := u.subs.Load(); subs != nil {
			for _, s := range *subs {
				qs = append(qs, s.q)
			}
		}
	}
	w := b.newWrite(true)
	defer w.abort()
	var held [][]*msgRec
	for _, q := range qs {
		held = append(held, q.unschedule(w, seqs))
	}
	for i, q := range qs {
		for _, r := range held[i] {
			w.deleteRecords(q, r.seq, r.owner, q.sharedBody(r))
		}
	}
	if err := w.commit(); err != nil {
		return err
	}
	for i, q := range qs {
		q.mu.Lock()
		for _, r := range held[i] {
			q.removeLocked(r)
		}
		q.mu.Unlock()
	}
	return nil
}

// unschedule takes the scheduled records with the given sequence
// numbers out of q's schedule for a cancellation planned in w, which
// schedules them again if it fails.
func (q *queue) unschedule(w *write, seqs []int64) []*msgRec {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return nil
	}
	var recs []*msgRec
	for _, s := range seqs {
		if r := q.mu.scheduled[s]; r != nil {
			delete(q.mu.scheduled, s)
			w.hold(holdScheduled, q, r, LockToken{})
			recs = append(recs, r)
		}
	}
	return recs
}
