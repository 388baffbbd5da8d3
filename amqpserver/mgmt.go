package amqpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/membudget"
	"github.com/omnibusmq/omnibus/core/sas"
)

// The $management node (amqp.md §6).
//
// Each entity has a request/response node at "<entity>/$management". The
// transport takes every complete request delivered on a sender link
// attached to it, settles the transfer (accepted), and calls
//
//	func (s *Server) handleManagement(ctx context.Context, c *conn, entity string, rights sas.Rights, req *frames.Message, linkSession string, txn *core.Txn) *frames.Message
//
// with the requesting connection, the entity path (the link target without
// "/$management"), the rights the connection holds for that entity,
// the session held by the receiver link the request names in
// associated-link-name ("" if none), and the transaction the request's
// transfer names in its transactional-state (nil if none; txn.go):
// update-disposition and renew-lock then run inside it. It sends the returned reply
// pre-settled on the link chosen by req.Properties.ReplyTo (§2.1). The reply
// is never nil: failures are replies too, with a non-2xx statusCode, an
// errorCondition and correlation-id = the request's message-id.
//
// Operations are in mgmt_messages.go (message locks, peek, schedule,
// deferred messages), mgmt_delete.go (batch delete), mgmt_sessions.go and
// mgmt_rules.go.

// Management operation names (application property "operation").
const (
	opRenewLock         = "com.microsoft:renew-lock"
	opPeek              = "com.microsoft:peek-message"
	opSchedule          = "com.microsoft:schedule-message"
	opCancelScheduled   = "com.microsoft:cancel-scheduled-message"
	opReceiveBySequence = "com.microsoft:receive-by-sequence-number"
	opUpdateDisposition = "com.microsoft:update-disposition"
	opRenewSessionLock  = "com.microsoft:renew-session-lock"
	opGetSessionState   = "com.microsoft:get-session-state"
	opSetSessionState   = "com.microsoft:set-session-state"
	opGetMessageSession = "com.microsoft:get-message-sessions"
	opAddRule           = "com.microsoft:add-rule"
	opRemoveRule        = "com.microsoft:remove-rule"
	opEnumerateRules    = "com.microsoft:enumerate-rules"
)

// Reply status codes (HTTP-style, DOC-RR).
const (
	statusOK        int32 = 200
	statusNoContent int32 = 204
)

// mgmtOp is one operation: the right it needs and its handler. A handler
// returns the reply body (nil for none) and statusOK, or statusNoContent
// with a nil body; errors become failure replies.
type mgmtOp struct {
	need sas.Rights
	run  func(s *mgmtNode, ctx context.Context, r *mgmtRequest) (body encoding.Map, status int32, err error)
}

var mgmtOps = map[string]mgmtOp{
	opRenewLock:         {sas.Listen, (*mgmtNode).mgmtRenewLock},
	opPeek:              {sas.Listen, (*mgmtNode).mgmtPeek},
	opSchedule:          {sas.Send, (*mgmtNode).mgmtSchedule},
	opCancelScheduled:   {sas.Send, (*mgmtNode).mgmtCancelScheduled},
	opReceiveBySequence: {sas.Listen, (*mgmtNode).mgmtReceiveBySequence},
	opUpdateDisposition: {sas.Listen, (*mgmtNode).mgmtUpdateDisposition},
	opRenewSessionLock:  {sas.Listen, (*mgmtNode).mgmtRenewSessionLock},
	opGetSessionState:   {sas.Listen, (*mgmtNode).mgmtGetSessionState},
	opSetSessionState:   {sas.Listen, (*mgmtNode).mgmtSetSessionState},
	opGetMessageSession: {sas.Listen, (*mgmtNode).mgmtGetMessageSessions},
	opAddRule:           {sas.Manage, (*mgmtNode).mgmtAddRule},
	opRemoveRule:        {sas.Manage, (*mgmtNode).mgmtRemoveRule},
	opEnumerateRules:    {sas.Listen, (*mgmtNode).mgmtEnumerateRules},
	opBatchDelete:       {sas.Listen, (*mgmtNode).mgmtBatchDelete},
}

// mgmtRequest is a decoded management request.
type mgmtRequest struct {
	entity string
	body   encoding.Map // the amqp-value map; empty if the body was not a map
}

// handleManagement runs one $management request against the broker and
// returns the reply to send. See the comment at the top of this file.
func (s *Server) handleManagement(ctx context.Context, c *conn, entity string, rights sas.Rights, req *frames.Message, linkSession string, txn *core.Txn) *frames.Message {
	if s.cfg.Memory.Over() {
		s.cfg.Memory.Refuse(membudget.AMQPReply)
		return mgmtFailure(req, 503, condServerBusy, memoryBusyText)
	}
	ns := c.namespace()
	n := mgmtNode{b: ns.Broker(), sessionLock: func(entity, id string) *core.SessionLock { return s.locks.get(ns, c, entity, id) }, linkSession: linkSession, txn: txn,
		mem: s.cfg.Memory, maxReply: s.cfg.Limits.MaxDeliveryBuffer}
	reply := n.handle(ctx, entity, rights, req)
	// The reply is encoded and counted again when it is queued (rpc.go).
	s.cfg.Memory.Release(int64(n.reserved))
	if v, ok := appProperty(reply, "statusCode"); ok {
		if code, ok := v.(int32); ok {
			s.stats.status(code)
		}
	}
	return reply
}

// mgmtNode is what the management operations need from the server: the
// broker and the session locks held by session receivers of the caller's
// connection (nil when it holds none for that entity and session: a
// session held by another client is not the caller's to renew or read).
type mgmtNode struct {
	b           *core.Broker
	sessionLock func(entity, sessionID string) *core.SessionLock
	// linkSession is the session held by the request's associated link,
	// the default session-id of operations scoped to a session.
	linkSession string
	// txn is the transaction the request runs in, nil for none.
	txn *core.Txn
	// mem is the memory budget the bodies a peek loads are taken from
	// (reserved, given back by handleManagement), and maxReply the most
	// bytes of messages one peek reply carries (at least one message).
	mem        *membudget.Budget
	maxReply   int
	reserved   int
	memRefused bool // the budget refused a body
}

// reserve takes a body of n bytes from the memory budget before a peek
// loads it (core.PeekOptions.Reserve).
func (s *mgmtNode) reserve(n int) bool {
	if !s.mem.TryAcquire(membudget.AMQPReply, int64(n)) {
		s.memRefused = true
		return false
	}
	s.reserved += n
	return true
}

// handle is [Server.handleManagement].
func (s *mgmtNode) handle(ctx context.Context, entity string, rights sas.Rights, req *frames.Message) *frames.Message {
	opName, _ := appProperty(req, "operation")
	name, _ := opName.(string)
	if sym, ok := opName.(encoding.Symbol); ok {
		name = string(sym)
	}
	op, ok := mgmtOps[name]
	if !ok {
		return mgmtFailure(req, 501, frames.CondNotImplemented,
			fmt.Sprintf("The operation '%s' is not supported on '%s/$management'.", name, entity))
	}
	if !rights.Has(op.need) {
		return mgmtFailure(req, 401, frames.CondUnauthorizedAccess,
			fmt.Sprintf("Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: '%s'.", op.need, entity))
	}
	r := &mgmtRequest{entity: entity}
	switch v := req.Value.(type) {
	case encoding.Map:
		r.body = v
	case nil:
	default:
		return mgmtFailure(req, 400, condArgumentError, fmt.Sprintf("The request body must be a map, not %T.", v))
	}
	body, status, err := op.run(s, ctx, r)
	if err != nil {
		var bad *badRequest
		if errors.As(err, &bad) {
			return mgmtFailure(req, 400, condArgumentError, bad.msg)
		}
		c := conditionOf(err)
		return mgmtFailure(req, c.status, c.cond, description(err))
	}
	return mgmtReply(req, status, statusText(status), "", body)
}

// mgmtReply builds a reply to req. body may be nil (no body section).
func mgmtReply(req *frames.Message, status int32, desc string, cond encoding.Symbol, body encoding.Map) *frames.Message {
	props := encoding.Map{
		{Key: "statusCode", Value: status},
		{Key: "statusDescription", Value: desc},
	}
	if cond != "" {
		props = append(props, encoding.KeyValue{Key: "errorCondition", Value: cond})
	}
	reply := &frames.Message{
		Properties:            &frames.MessageProperties{},
		ApplicationProperties: props,
	}
	if p := req.Properties; p != nil {
		reply.Properties.CorrelationID = p.MessageID
		if reply.Properties.CorrelationID == nil {
			reply.Properties.CorrelationID = p.CorrelationID
		}
		reply.Properties.To = p.ReplyTo
	}
	if body != nil {
		reply.BodyKind = frames.BodyValue
		reply.Value = body
	}
	return reply
}

// mgmtFailure builds a failure reply.
func mgmtFailure(req *frames.Message, status int32, cond encoding.Symbol, desc string) *frames.Message {
	return mgmtReply(req, status, desc, cond, nil)
}

func statusText(status int32) string {
	if status == statusNoContent {
		return "No Content"
	}
	return "OK"
}

// badRequest is a malformed request field; it becomes a 400 reply with
// com.microsoft:argument-error.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return "amqpserver: bad management request: " + e.msg }

func badf(format string, args ...any) error {
	return &badRequest{msg: fmt.Sprintf(format, args...)}
}

// appProperty returns the application property k of m.
func appProperty(m *frames.Message, k string) (any, bool) {
	return m.ApplicationProperties.GetString(k)
}

// field returns the request body entry k. The SDKs use string keys; symbol
// keys are accepted too.
func (r *mgmtRequest) field(k string) (any, bool) {
	return mapField(r.body, k)
}

func mapField(m encoding.Map, k string) (any, bool) {
	if v, ok := m.GetString(k); ok {
		return v, true
	}
	return m.GetSymbol(encoding.Symbol(k))
}

// str returns a string field; a missing or null field is "" unless
// required.
func (r *mgmtRequest) str(k string, required bool) (string, error) {
	return stringField(r.body, k, required)
}

func stringField(m encoding.Map, k string, required bool) (string, error) {
	v, ok := mapField(m, k)
	switch x := v.(type) {
	case string:
		return x, nil
	case encoding.Symbol:
		return string(x), nil
	case nil:
		if required {
			if ok {
				return "", badf("The field '%s' must not be null.", k)
			}
			return "", badf("The field '%s' is missing.", k)
		}
		return "", nil
	}
	return "", badf("The field '%s' must be a string, not %T.", k, v)
}

// integer returns an integer field of any AMQP integer type, or def when
// it is missing or null.
func (r *mgmtRequest) integer(k string, def int64) (int64, error) {
	v, _ := r.field(k)
	if v == nil {
		return def, nil
	}
	n, ok := asInt64(v)
	if !ok {
		return 0, badf("The field '%s' must be an integer, not %T.", k, v)
	}
	return n, nil
}

func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > 1<<63-1 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// elems returns the elements of a required array (or list) field.
func (r *mgmtRequest) elems(k string) ([]any, error) {
	v, ok := r.field(k)
	switch x := v.(type) {
	case encoding.Array:
		return x.Elems, nil
	case []any:
		return x, nil
	case nil:
		if !ok {
			return nil, badf("The field '%s' is missing.", k)
		}
		return nil, badf("The field '%s' must not be null.", k)
	}
	return nil, badf("The field '%s' must be an array, not %T.", k, v)
}

// longs returns a required array of sequence numbers.
func (r *mgmtRequest) longs(k string) ([]int64, error) {
	es, err := r.elems(k)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(es))
	for i, e := range es {
		n, ok := asInt64(e)
		if !ok {
			return nil, badf("The field '%s' must hold integers, not %T.", k, e)
		}
		out[i] = n
	}
	return out, nil
}

// lockTokens returns a required array of uuids.
func (r *mgmtRequest) lockTokens() ([]core.LockToken, error) {
	es, err := r.elems("lock-tokens")
	if err != nil {
		return nil, err
	}
	out := make([]core.LockToken, len(es))
	for i, e := range es {
		u, ok := e.(encoding.UUID)
		if !ok {
			return nil, badf("The field 'lock-tokens' must hold uuids, not %T.", e)
		}
		out[i] = core.LockToken(u)
	}
	return out, nil
}

// timestamp returns a timestamp field, zero if missing or null.
func (r *mgmtRequest) timestamp(k string) (time.Time, error) {
	v, _ := r.field(k)
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case nil:
		return time.Time{}, nil
	}
	return time.Time{}, badf("The field '%s' must be a timestamp, not %T.", k, v)
}

// page returns the skip/top window of a listing request.
func (r *mgmtRequest) page() (skip, top int, err error) {
	sk, err := r.integer("skip", 0)
	if err != nil {
		return 0, 0, err
	}
	tp, err := r.integer("top", 1<<31-1)
	if err != nil {
		return 0, 0, err
	}
	if sk < 0 || tp < 0 {
		return 0, 0, badf("'skip' and 'top' must not be negative.")
	}
	return int(min(sk, 1<<31-1)), int(min(tp, 1<<31-1)), nil
}

// window returns items[skip:skip+top], clamped.
func window[T any](items []T, skip, top int) []T {
	if skip >= len(items) {
		return nil
	}
	items = items[skip:]
	if top < len(items) {
		items = items[:top]
	}
	return items
}
