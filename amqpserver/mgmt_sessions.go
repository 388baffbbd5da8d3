package amqpserver

import (
	"context"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/core"
)

// Session operations of the $management node (amqp.md §6.2). All but
// get-message-sessions act on a session the caller holds: the lock comes
// from s.sessionLock(entity, session-id), which the transport keeps for the
// session receivers of every connection. A session nobody holds fails with
// 410 com.microsoft:session-lock-lost, as Service Bus answers.

// listAllSessions is the last-updated-time the Go SDK sends by default
// (.NET DateTime.MaxValue rounded up, 10000-01-01): list every session with
// messages or state, not only those whose state changed after a time.
var listAllSessions = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// sessionLockLost is the error for a session the caller does not hold.
func sessionLockLost(id string) error {
	return &core.Error{Code: core.CodeSessionLockLost,
		Msg: "The session lock has expired on the MessageSession. Accept a new MessageSession. Session: '" + id + "'."}
}

// heldSession returns the caller's lock on the request's session-id.
func (s *mgmtNode) heldSession(r *mgmtRequest) (*core.SessionLock, error) {
	sid, err := r.str("session-id", true)
	if err != nil {
		return nil, err
	}
	sl := s.sessionLock(r.entity, sid)
	if sl == nil {
		return nil, sessionLockLost(sid)
	}
	return sl, nil
}

// mgmtRenewSessionLock: session-id → expiration (timestamp).
func (s *mgmtNode) mgmtRenewSessionLock(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	sl, err := s.heldSession(r)
	if err != nil {
		return nil, 0, err
	}
	until, err := s.b.RenewSessionLock(ctx, r.entity, sl)
	if err != nil {
		return nil, 0, err
	}
	return encoding.Map{{Key: "expiration", Value: until}}, statusOK, nil
}

// mgmtGetSessionState: session-id → session-state (binary, or null when
// none). The key is always present: Go cannot read an empty map.
func (s *mgmtNode) mgmtGetSessionState(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	sl, err := s.heldSession(r)
	if err != nil {
		return nil, 0, err
	}
	state, err := s.b.GetSessionState(ctx, r.entity, sl)
	if err != nil {
		return nil, 0, err
	}
	var v any
	if state != nil {
		v = state
	}
	return encoding.Map{{Key: "session-state", Value: v}}, statusOK, nil
}

// mgmtSetSessionState: session-id, session-state (binary; null or empty
// clears it, which is how Go sends a nil state) → 200.
func (s *mgmtNode) mgmtSetSessionState(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	sl, err := s.heldSession(r)
	if err != nil {
		return nil, 0, err
	}
	v, _ := r.field("session-state")
	var state []byte
	switch x := v.(type) {
	case []byte:
		if len(x) > 0 {
			state = x
		}
	case nil:
	default:
		return nil, 0, badf("The field 'session-state' must be binary, not %T.", v)
	}
	if err := s.b.SetSessionState(ctx, r.entity, sl, state); err != nil {
		return nil, 0, err
	}
	return nil, statusOK, nil
}

// mgmtGetMessageSessions: last-updated-time, skip, top → skip (the skip
// to ask for next) and sessions-ids (array of string), or 204 when the
// page is empty.
func (s *mgmtNode) mgmtGetMessageSessions(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	since, err := r.timestamp("last-updated-time")
	if err != nil {
		return nil, 0, err
	}
	if !since.Before(listAllSessions) {
		since = time.Time{}
	}
	skip, top, err := r.page()
	if err != nil {
		return nil, 0, err
	}
	ids, err := s.b.ListSessions(ctx, r.entity, since)
	if err != nil {
		return nil, 0, err
	}
	ids = window(ids, skip, top)
	if len(ids) == 0 {
		return nil, statusNoContent, nil
	}
	return encoding.Map{
		{Key: "skip", Value: int32(skip + len(ids))},
		{Key: "sessions-ids", Value: ids},
	}, statusOK, nil
}
