package amqpserver

import (
	"context"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/core"
)

// Message operations of the $management node (amqp.md §6.2): lock renewal,
// peek, scheduling, deferred-message retrieval and settlement by lock
// token. Lock tokens travel as AMQP uuids in RFC byte order here, unlike
// delivery tags.

// maxPeekCount bounds one peek so a request for 2^31 messages cannot make
// the broker load a whole backlog into one reply.
const maxPeekCount = 1000

// mgmtRenewLock: lock-tokens (array of uuid) → expirations (array of
// timestamp, which the Go SDK reads as []time.Time).
func (s *mgmtNode) mgmtRenewLock(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	toks, err := r.lockTokens()
	if err != nil {
		return nil, 0, err
	}
	exp := encoding.Array{Type: encoding.TypeCodeTimestamp, Elems: make([]any, len(toks))}
	renew := s.b.RenewLock
	if s.txn != nil {
		renew = s.txn.RenewLock
	}
	for i, tok := range toks {
		until, err := renew(ctx, r.entity, tok)
		if err != nil {
			return nil, 0, err
		}
		exp.Elems[i] = until
	}
	return encoding.Map{{Key: "expirations", Value: exp}}, statusOK, nil
}

// mgmtPeek: from-sequence-number, message-count, optional session-id and
// omit-message-body → messages (a list of maps {message: binary}), or 204
// when there is nothing at or after from-sequence-number. Without a
// session-id, a request from a session receiver's link peeks its session.
func (s *mgmtNode) mgmtPeek(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	from, err := r.integer("from-sequence-number", 0)
	if err != nil {
		return nil, 0, err
	}
	count, err := r.integer("message-count", 1)
	if err != nil {
		return nil, 0, err
	}
	sid, err := r.str("session-id", false)
	if err != nil {
		return nil, 0, err
	}
	if sid == "" {
		sid = s.linkSession
	}
	omit, _ := r.field("omit-message-body")
	msgs, err := s.b.Peek(ctx, r.entity, core.PeekOptions{From: from, Max: int(min(max(count, 1), maxPeekCount)), SessionID: sid,
		MaxBytes: s.maxReply, Reserve: s.reserve})
	if err != nil {
		return nil, 0, err
	}
	if len(msgs) == 0 {
		if s.memRefused {
			return nil, 0, &core.Error{Code: core.CodeServerBusy, Msg: memoryBusyText}
		}
		return nil, statusNoContent, nil
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		if omit == true {
			m.Body = nil
		}
		raw, err := encodeDelivery(m, false)
		if err != nil {
			return nil, 0, err
		}
		list[i] = encoding.Map{{Key: "message", Value: raw}}
	}
	return encoding.Map{{Key: "messages", Value: list}}, statusOK, nil
}

// mgmtSchedule: messages (list of maps {message-id, message: binary,
// session-id?, partition-key?, via-partition-key?}) → sequence-numbers
// (array of long). Each encoded message carries its
// x-opt-scheduled-enqueue-time.
func (s *mgmtNode) mgmtSchedule(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	if s.txn != nil {
		return nil, 0, &core.Error{Code: core.CodeBadRequest, Msg: "Scheduling messages inside a transaction is not supported by omnibus; schedule them outside it."}
	}
	entries, err := r.elems("messages")
	if err != nil {
		return nil, 0, err
	}
	msgs := make([]*core.Message, len(entries))
	for i, e := range entries {
		em, ok := e.(encoding.Map)
		if !ok {
			return nil, 0, badf("Each entry of 'messages' must be a map, not %T.", e)
		}
		if msgs[i], err = scheduledMessage(em); err != nil {
			return nil, 0, err
		}
	}
	seqs, err := s.b.Send(ctx, r.entity, msgs...)
	if err != nil {
		return nil, 0, err
	}
	arr := encoding.Array{Type: encoding.TypeCodeLong, Elems: make([]any, len(seqs))}
	for i, n := range seqs {
		arr.Elems[i] = n
	}
	return encoding.Map{{Key: "sequence-numbers", Value: arr}}, statusOK, nil
}

// scheduledMessage decodes one entry of a schedule-message request. The
// map's session and partition keys fill in what the message lacks.
func scheduledMessage(em encoding.Map) (*core.Message, error) {
	raw, _ := mapField(em, "message")
	bin, ok := raw.([]byte)
	if !ok {
		return nil, badf("The field 'message' must be binary, not %T.", raw)
	}
	msgs, err := decodeMessage(bin, 0)
	if err != nil {
		return nil, badf("The scheduled message cannot be decoded: %v", err)
	}
	m := msgs[0]
	if m.ScheduledEnqueueTime.IsZero() {
		return nil, badf("The scheduled message has no x-opt-scheduled-enqueue-time.")
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"session-id", &m.SessionID}, {"partition-key", &m.PartitionKey}, {"via-partition-key", &m.ViaPartitionKey}} {
		v, err := stringField(em, f.key, false)
		if err != nil {
			return nil, err
		}
		if *f.dst == "" {
			*f.dst = v
		}
	}
	if m.MessageID == nil {
		if id, err := stringField(em, "message-id", false); err == nil && id != "" {
			m.MessageID = id
		}
	}
	return m, nil
}

// mgmtCancelScheduled: sequence-numbers (array of long) → 200.
func (s *mgmtNode) mgmtCancelScheduled(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	seqs, err := r.longs("sequence-numbers")
	if err != nil {
		return nil, 0, err
	}
	if err := s.b.CancelScheduled(ctx, r.entity, seqs); err != nil {
		return nil, 0, err
	}
	return nil, statusOK, nil
}

// mgmtReceiveBySequence: sequence-numbers, receiver-settle-mode (1 peek-lock,
// the default; 0 receive-and-delete) → messages (a list of maps
// {lock-token: uuid, message: binary}). The embedded message also carries
// the token as the x-opt-lock-token delivery annotation, which is where Go
// reads it. Unknown numbers fail with 404 message-not-found.
func (s *mgmtNode) mgmtReceiveBySequence(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	seqs, err := r.longs("sequence-numbers")
	if err != nil {
		return nil, 0, err
	}
	settle, err := r.integer("receiver-settle-mode", 1)
	if err != nil {
		return nil, 0, err
	}
	mode := core.PeekLock
	if settle == 0 {
		mode = core.ReceiveAndDelete
	}
	if sid, err := r.str("session-id", false); err != nil {
		return nil, 0, err
	} else if sid != "" && s.sessionLock(r.entity, sid) == nil {
		return nil, 0, sessionLockLost(sid)
	}
	msgs, err := s.b.ReceiveDeferred(ctx, r.entity, mode, seqs)
	if err != nil {
		return nil, 0, err
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		raw, err := encodeDelivery(m, mode == core.PeekLock)
		if err != nil {
			return nil, 0, err
		}
		entry := encoding.Map{}
		if mode == core.PeekLock {
			entry = append(entry, encoding.KeyValue{Key: "lock-token", Value: encoding.UUID(m.LockToken)})
		}
		list[i] = append(entry, encoding.KeyValue{Key: "message", Value: raw})
	}
	return encoding.Map{{Key: "messages", Value: list}}, statusOK, nil
}

// dispositions maps disposition-status to an outcome. Both SDKs spell
// deferral "defered"; the correct spelling is accepted too.
var dispositions = map[string]core.OutcomeKind{
	"completed": core.Complete,
	"abandoned": core.Abandon,
	"suspended": core.DeadLetter,
	"defered":   core.Defer,
	"deferred":  core.Defer,
}

// mgmtUpdateDisposition: disposition-status, lock-tokens, optional
// deadletter-reason, deadletter-description, properties-to-modify and
// session-id → 200. Settles every token, stopping at the first failure.
func (s *mgmtNode) mgmtUpdateDisposition(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	status, err := r.str("disposition-status", true)
	if err != nil {
		return nil, 0, err
	}
	kind, ok := dispositions[status]
	if !ok {
		return nil, 0, badf("The disposition-status '%s' is not one of completed, abandoned, suspended or defered.", status)
	}
	toks, err := r.lockTokens()
	if err != nil {
		return nil, 0, err
	}
	o := core.Outcome{Kind: kind}
	if o.DeadLetterReason, err = r.str("deadletter-reason", false); err != nil {
		return nil, 0, err
	}
	if o.DeadLetterDescription, err = r.str("deadletter-description", false); err != nil {
		return nil, 0, err
	}
	if v, _ := r.field("properties-to-modify"); v != nil {
		pm, ok := v.(encoding.Map)
		if !ok {
			return nil, 0, badf("The field 'properties-to-modify' must be a map, not %T.", v)
		}
		props, err := valueFromAMQP(pm)
		if err != nil {
			return nil, 0, badf("properties-to-modify: %v", err)
		}
		o.Properties = props.(map[string]any)
	}
	sid, err := r.str("session-id", false)
	if err != nil {
		return nil, 0, err
	}
	if sid != "" && s.sessionLock(r.entity, sid) == nil {
		return nil, 0, sessionLockLost(sid)
	}
	for _, tok := range toks {
		var err error
		if s.txn != nil {
			err = s.txn.Settle(r.entity, tok, o)
		} else {
			err = s.b.Settle(ctx, r.entity, tok, o)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	return nil, statusOK, nil
}
