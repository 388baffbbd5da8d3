package core

import (
	"context"
	"time"
)

// Batch delete.
//
// DeleteMessages is what the SDKs' DeleteMessages and PurgeMessages call
// (com.microsoft:batch-delete-messages): delete up to N messages enqueued
// before a cutoff, oldest first, without receiving them. Like Service Bus
// it deletes only messages a receive-and-delete could take right now:
// active and unlocked. Locked messages stay with their lock holders,
// deferred messages stay set aside for whoever deferred them, scheduled
// messages are not enqueued yet. A dead-letter subqueue is purged through
// its own path ("q/$DeadLetterQueue").
//
// A message's enqueue time is not kept in memory, only in its body
// record, so the call works in three steps:
//
//  1. under the queue mutex, find the oldest available messages (lowest
//     sequence numbers, without taking them: candidates);
//  2. with no lock held, decide which were enqueued before the cutoff,
//     reading as few bodies as it can (eligible below);
//  3. under the mutex again, take those still available (a receiver may
//     have taken some meanwhile) into a write as held-aside records,
//     delete their records in that write and commit it with fsync.
//
// Nothing changes in memory before the commit succeeds: a failed commit
// gives every record back where it was (write.abort), so a storage fault
// loses nothing and deletes nothing.

// MaxDeleteMessages is the most messages one batch delete may ask for:
// Service Bus's Premium limit (Standard's is 500, which every SDK's purge
// loop stays under).
const MaxDeleteMessages = 4000

// maxDeleteRounds bounds how often one call looks further along a queue
// when messages it examined turned out not to be eligible.
const maxDeleteRounds = 8

// DeleteOptions parameterise [Broker.DeleteMessages].
type DeleteOptions struct {
	// Max is how many messages to delete at most: 1 to MaxDeleteMessages.
	Max int
	// Before is the cutoff: only messages enqueued strictly before it are
	// deleted. Zero means no cutoff: every message enqueued so far.
	Before time.Time
	// SessionID restricts the delete to one session's messages; only on a
	// session-enabled queue or subscription. Empty: every session.
	SessionID string
}

// DeleteMessages deletes up to opts.Max active, unlocked messages of the
// queue, subscription or dead-letter subqueue at path that were enqueued
// before opts.Before, lowest sequence number first, and returns how many
// it deleted once that is durable. It deletes fewer than asked only when
// fewer are eligible, or when receivers take some of them concurrently.
func (b *Broker) DeleteMessages(ctx context.Context, path string, opts DeleteOptions) (int, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return 0, err
		}
		return be.DeleteMessages(ctx, path, opts)
	}
	if err := ctx.Err(); err != nil {
		return 0, ctxErr(ctx)
	}
	if opts.Max < 1 || opts.Max > MaxDeleteMessages {
		return 0, errf(CodeBadRequest, "The message count of a batch delete must be between 1 and %d, not %d.", MaxDeleteMessages, opts.Max)
	}
	qs, err := b.queuesFor(path)
	if err != nil {
		return 0, err
	}
	q := qs[0]
	d := q.desc()
	if d.Status == StatusDisabled || d.Status == StatusReceiveDisabled {
		return 0, errf(CodeEntityDisabled, "Messaging entity '%s' is currently disabled for receiving.", q.path)
	}
	sessions := d.RequiresSession && !q.isDeadLetter()
	if opts.SessionID != "" && !sessions {
		return 0, errf(CodeBadRequest, "'%s' does not require sessions: a batch delete there cannot name a session.", q.path)
	}
	cutoff := b.Now() + 1
	if !opts.Before.IsZero() {
		cutoff = opts.Before.UnixNano()
	}
	if opts.SessionID != "" {
		// A session lives in one partition.
		e := q.ent.root().partForSession(opts.SessionID)
		if q.isDeadLetter() {
			return e.q.dead.deleteMessages(opts.Max, opts.SessionID, cutoff)
		}
		return e.q.deleteMessages(opts.Max, opts.SessionID, cutoff)
	}
	// Partitions in order: their sequence numbers are.
	n := 0
	for _, q := range qs {
		k, err := q.deleteMessages(opts.Max-n, "", cutoff)
		n += k
		if err != nil {
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
		if n == opts.Max {
			break
		}
	}
	return n, nil
}

// deleteMessages is DeleteMessages on one queue.
func (q *queue) deleteMessages(max int, sessionID string, cutoff int64) (int, error) {
	b := q.b
	w := b.newWrite(true)
	defer w.abort()
	var taken []*msgRec
	after := int64(-1 << 63) // candidates of later rounds come after this sequence number
	for round := 0; round < maxDeleteRounds && len(taken) < max; round++ {
		cands, err := q.deleteCandidates(max-len(taken), sessionID, cutoff, after)
		if err != nil || len(cands) == 0 {
			if err != nil {
				return 0, err
			}
			break
		}
		after = cands[len(cands)-1].seq
		elig, boundary, err := q.eligible(cands, cutoff)
		if err != nil {
			return 0, err
		}
		taken = append(taken, q.takeForDelete(w, elig)...)
		// Past the first message sent at or after the cutoff nothing is
		// eligible any more (enqueue times follow sequence numbers, see
		// eligible); a round with nothing eligible ends the search too.
		if boundary || len(elig) == 0 {
			break
		}
	}
	if len(taken) == 0 {
		return 0, nil
	}
	for _, r := range taken {
		q.mu.Lock()
		owner, shared := r.owner, q.sharedBody(r)
		q.mu.Unlock()
		w.deleteRecords(q, r.seq, owner, shared)
	}
	if err := w.commit(); err != nil {
		return 0, err
	}
	q.forget(taken)
	return len(taken), nil
}

// takeForDelete takes the records of cands that are still available out
// of their heaps and holds them aside in w, which gives them back unless
// it commits. It returns the records taken.
func (q *queue) takeForDelete(w *write, cands []deleteCand) []*msgRec {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return nil
	}
	taken := make([]*msgRec, 0, len(cands))
	for _, c := range cands {
		r := c.r
		if r.idx < 0 || r.locked() || r.state != StateActive {
			continue // taken by a receiver (or set aside) since it was found
		}
		if s := q.sessionLocked(r); s != nil {
			s.avail.remove(int(r.idx))
			q.mu.sessions.changed(s)
		} else {
			q.mu.avail.remove(int(r.idx))
		}
		w.hold(holdAside, q, r, LockToken{})
		taken = append(taken, r)
	}
	return taken
}
