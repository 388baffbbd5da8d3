package core

import (
	"context"
	"errors"

	"github.com/omnibusmq/omnibus/storage"
)

// PeekOptions parameterise [Broker.Peek].
type PeekOptions struct {
	From      int64  // first sequence number to consider
	Max       int    // at most this many; values < 1 mean 1
	SessionID string // only this session's messages, when set
}

// Peek browses the messages of a queue, subscription or dead-letter
// subqueue from a sequence number, in sequence order, without locking
// them: active (locked or not), deferred and scheduled messages, each
// with its State. Expired messages not yet removed are included, as in
// Service Bus.
func (b *Broker) Peek(ctx context.Context, path string, opts PeekOptions) ([]*Message, error) {
	q, err := b.queueFor(path)
	if err != nil {
		return nil, err
	}
	if opts.Max < 1 {
		opts.Max = 1
	}
	type hit struct {
		seq int64
		st  stateRec
	}
	var hits []hit
	start := seqKey(tabState, q.id, max(opts.From, 0))
	err = b.store.Scan(idKey(tabState, q.id), start, func(k, v []byte) (bool, error) {
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
		return nil, err
	}
	out := make([]*Message, 0, len(hits))
	for _, h := range hits {
		m, err := q.loadBody(h.st.owner, h.seq)
		if err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue // completed while we looked
			}
			return nil, err
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
	return out, nil
}

// CancelScheduled removes scheduled messages from a queue or topic by
// sequence number. Numbers of messages no longer scheduled are ignored.
func (b *Broker) CancelScheduled(ctx context.Context, path string, seqs []int64) error {
	a := ParseAddress(path)
	if a.DeadLetter || a.Sub != "" {
		return errf(CodeBadRequest, "cancel scheduled messages on the queue or topic, not on '%s'", a.String())
	}
	e, err := b.lookup(a)
	if err != nil {
		return err
	}
	if e.q != nil {
		return e.q.cancelScheduled(seqs)
	}
	if subs := e.subs.Load(); subs != nil {
		for _, s := range *subs {
			if err := s.q.cancelScheduled(seqs); err != nil {
				return err
			}
		}
	}
	return nil
}

func (q *queue) cancelScheduled(seqs []int64) error {
	q.mu.Lock()
	var recs []*msgRec
	for _, s := range seqs {
		if r := q.mu.scheduled[s]; r != nil {
			delete(q.mu.scheduled, s)
			recs = append(recs, r)
		}
	}
	q.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	batch := storage.Batch{Sync: true}
	for _, r := range recs {
		q.deleteRecords(&batch, r.seq, r.owner, q.sharedBody(r))
	}
	if err := q.b.store.Apply(&batch); err != nil {
		// Still scheduled: put them back, timers included.
		q.mu.Lock()
		for _, r := range recs {
			q.restoreRef(r.seq, q.sharedBody(r))
			q.mu.scheduled[r.seq] = r
			q.addTimerLocked(timeItem{at: r.scheduledAt, rec: r})
		}
		q.mu.Unlock()
		return err
	}
	q.mu.Lock()
	for _, r := range recs {
		q.removeLocked(r)
	}
	q.mu.Unlock()
	return nil
}
