package amqpserver

import (
	"context"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/core"
)

// Batch delete on the $management node: what the SDKs' DeleteMessages and
// PurgeMessages send (JS @azure/service-bus 7.10, .NET 7.18, Python 7.13).

// opBatchDelete deletes messages without receiving them.
const opBatchDelete = "com.microsoft:batch-delete-messages"

// mgmtBatchDelete: message-count (int, 1 to core.MaxDeleteMessages),
// enqueued-time-utc (timestamp; only messages enqueued before it; absent:
// no cutoff), session-id (optional string; a request from a session
// receiver's link defaults to its session) → message-count (int): how
// many were deleted, 0 included. The SDKs' purge loops call again while
// a full batch comes back.
//
// An AMQP timestamp is precise to the millisecond, and the SDKs default
// the cutoff to the client's clock at the call: a message sent a moment
// earlier, in the same millisecond, would be enqueued "after" the
// truncated cutoff and survive a purge right after a send. The cutoff
// therefore covers its whole millisecond: what every client sees as
// enqueued at or before it is deleted.
func (s *mgmtNode) mgmtBatchDelete(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	if v, _ := r.field("message-count"); v == nil {
		return nil, 0, badf("The field 'message-count' is missing.")
	}
	count, err := r.integer("message-count", 0)
	if err != nil {
		return nil, 0, err
	}
	if count < 1 || count > core.MaxDeleteMessages {
		return nil, 0, badf("The field 'message-count' must be between 1 and %d, not %d.", core.MaxDeleteMessages, count)
	}
	before, err := r.timestamp("enqueued-time-utc")
	if err != nil {
		return nil, 0, err
	}
	if !before.IsZero() {
		before = before.Add(time.Millisecond)
	}
	sid, err := r.str("session-id", false)
	if err != nil {
		return nil, 0, err
	}
	if sid == "" {
		sid = s.linkSession
	}
	n, err := s.b.DeleteMessages(ctx, r.entity, core.DeleteOptions{Max: int(count), Before: before, SessionID: sid})
	if err != nil {
		return nil, 0, err
	}
	return encoding.Map{{Key: "message-count", Value: int32(n)}}, statusOK, nil
}
