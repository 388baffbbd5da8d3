package core

import (
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// Damaged bodies.
//
// A message's body record can be missing or unreadable: a damaged or
// truncated file, or (before issue 14) a shared topic body deleted while
// a subscription still needed it. Such a message must not fail every
// receive that meets it, nor go back to the head of its queue and block
// the messages behind it. The receive that meets it moves it to the
// dead-letter subqueue instead (quarantine), with DeadLetterReason
// [ReasonBodyUnreadable] and a description naming the error; its body
// there is whatever the store gave back (the damaged record's bytes, for
// an operator to salvage), empty when nothing could be read. A message
// already in a dead-letter subqueue has its body replaced in place the
// same way. A store that cannot read right now (storage.ErrUnavailable)
// is not damage: the receive fails with server-busy and nothing moves.

// ReasonBodyUnreadable is the DeadLetterReason of a message whose body
// the store could not give back intact.
const ReasonBodyUnreadable = "MessageBodyUnreadable"

// stubBody is the message that stands in for a body that cannot be read:
// what the state record knows (session), an id, the reason as
// dead-letter properties and, as its body, the bytes the store returned.
func stubBody(q *queue, seq int64, st stateRec, raw []byte, cause error) *Message {
	return &Message{
		MessageID:    "unreadable-body-" + strconv.FormatInt(seq, 10),
		SessionID:    st.sessionID,
		EnqueuedTime: time.Unix(0, q.b.Now()).UTC(),
		Body:         append([]byte(nil), raw...),
		ApplicationProperties: map[string]any{
			"DeadLetterReason": ReasonBodyUnreadable,
			"DeadLetterErrorDescription": fmt.Sprintf("The message body could not be read from the store (%v); "+
				"the message was moved here so that the rest of its queue keeps flowing. Its body is what remained readable.", cause),
		},
	}
}

// bodyForMove returns a copy of r's message to store elsewhere (the
// dead-letter subqueue, a forwarding target, a rewrite): the cached body
// or the stored one, with its properties decoded to be changed, or a stub
// when the stored one is damaged (stubbed then reports it). r is held by
// the caller.
func (q *queue) bodyForMove(r *msgRec) (m *Message, stubbed bool, err error) {
	q.mu.Lock()
	st, seq, cached := r.stateRec, r.seq, r.msg
	q.mu.Unlock()
	if cached != nil {
		m = cached.Clone()
	} else {
		var raw []byte
		if m, raw, err = q.loadBody(st.owner, seq); err != nil {
			if !damaged(err) {
				return nil, false, err
			}
			q.b.warnStorage("a message body cannot be read; the message goes to the dead-letter subqueue",
				zap.String("entity", q.path), zap.Int64("seq", seq), zap.Error(err))
			return stubBody(q, seq, st, raw, err), true, nil
		}
	}
	if err := m.ownProperties(); err != nil { // the move adds properties
		err = fmt.Errorf("message %d of '%s': %w", seq, q.path, err)
		q.b.warnStorage("a message's properties cannot be read; the message goes to the dead-letter subqueue",
			zap.String("entity", q.path), zap.Int64("seq", seq), zap.Error(err))
		return stubBody(q, seq, st, m.Body, err), true, nil
	}
	return m, false, nil
}

// quarantine takes the messages whose body could not be read (t.bad) out
// of a delivery and dead-letters them; it returns the rest. A taken
// message goes back to the state it had before it was taken, then is set
// aside for the move, which gives it back to its queue if it fails. The
// error is that of a failed move, reported only when nothing else is left
// to deliver.
func (q *queue) quarantine(got []taken, out []*Message, mode ReceiveMode) ([]taken, []*Message, error) {
	w := q.b.newWrite(true)
	defer w.abort()
	now := q.b.Now()
	var recs []*msgRec
	n := 0
	q.mu.Lock()
	if q.mu.closed {
		// Deleted meanwhile: its records are the deletion's.
		q.mu.Unlock()
		return got[:0], out[:0], entityNotFound(q.path)
	}
	for i := range got {
		t := got[i]
		if t.bad == nil {
			got[n], out[n] = t, out[i]
			n++
			continue
		}
		r := t.r
		if mode == PeekLock {
			q.undeliverLocked(&t)
			if r.lock != t.lock {
				continue // its session closed meanwhile; whoever takes it next meets the damage
			}
			q.unlockLocked(r) // its timer entry goes with it (lock.go)
		} else {
			q.insertLocked(r, now)
			if r.state != StateDeferred {
				q.takeBackLocked(r)
			}
		}
		r.deliveryCount-- // it was never delivered
		w.hold(holdAside, q, r, LockToken{})
		recs = append(recs, r)
	}
	q.mu.Unlock()
	clear(got[n:])
	got, out = got[:n], out[:n]
	if len(recs) == 0 {
		return got, out, nil
	}
	if err := q.deadLetter(w, recs, ReasonBodyUnreadable, "", nil); err != nil {
		q.b.warnStorage("moving messages whose body cannot be read to the dead-letter subqueue failed; they stay in their queue",
			zap.String("entity", q.path), zap.Error(err))
		return got, out, err
	}
	return got, out, nil
}
