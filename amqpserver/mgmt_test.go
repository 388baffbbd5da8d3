package amqpserver

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
)

// mgmtHarness runs management requests against a real broker on memstore,
// through the wire encoding in both directions.
type mgmtHarness struct {
	env  *coretest.Env
	node *mgmtNode
	held map[string]*core.SessionLock // entity + "|" + session id
}

func newMgmtHarness(t testing.TB) *mgmtHarness {
	t.Helper()
	h := &mgmtHarness{env: coretest.New(t), held: make(map[string]*core.SessionLock)}
	h.node = &mgmtNode{
		b:           h.env.Broker,
		sessionLock: func(entity, id string) *core.SessionLock { return h.held[entity+"|"+id] },
	}
	return h
}

func (h *mgmtHarness) queue(t testing.TB, name string, sessions bool) {
	t.Helper()
	h.env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: name, RequiresSession: sessions})
}

// mgmtReplyWire is a reply as the client decodes it, with its raw bytes.
type mgmtReplyWire struct {
	*frames.Message
	raw []byte
}

// call sends op with body to entity's management node holding every right.
func (h *mgmtHarness) call(t testing.TB, entity, op string, body encoding.Map) mgmtReplyWire {
	t.Helper()
	return h.callAs(t, entity, sas.Manage, op, body)
}

func (h *mgmtHarness) callAs(t testing.TB, entity string, rights sas.Rights, op string, body any) mgmtReplyWire {
	t.Helper()
	req := &frames.Message{
		Properties:            &frames.MessageProperties{MessageID: "req-1", ReplyTo: "reply-link"},
		ApplicationProperties: encoding.Map{{Key: "operation", Value: op}},
		BodyKind:              frames.BodyValue,
		Value:                 body,
	}
	wireReq, err := frames.UnmarshalMessage(mustMarshalMessage(t, req))
	if err != nil {
		t.Fatalf("request does not decode: %v", err)
	}
	reply := h.node.handle(t.Context(), entity, rights, wireReq)
	raw := mustMarshalMessage(t, reply)
	got, err := frames.UnmarshalMessage(raw)
	if err != nil {
		t.Fatalf("reply does not decode: %v", err)
	}
	if got.Properties == nil || got.Properties.CorrelationID != "req-1" {
		t.Fatalf("reply correlation-id = %#v, want the request message-id \"req-1\"", got.Properties)
	}
	return mgmtReplyWire{Message: got, raw: raw}
}

// status returns the reply's statusCode, failing unless it is an int.
func (r mgmtReplyWire) status(t testing.TB) int32 {
	t.Helper()
	v, _ := r.ApplicationProperties.GetString("statusCode")
	code, ok := v.(int32)
	if !ok {
		t.Fatalf("statusCode = %#v (%T), want an AMQP int", v, v)
	}
	return code
}

// condition returns the reply's errorCondition.
func (r mgmtReplyWire) condition() encoding.Symbol {
	v, _ := r.ApplicationProperties.GetString("errorCondition")
	c, _ := v.(encoding.Symbol)
	return c
}

// mustOK checks a 200 reply and returns its body map (nil if none).
func (r mgmtReplyWire) mustOK(t testing.TB) encoding.Map {
	t.Helper()
	if code := r.status(t); code != 200 {
		desc, _ := r.ApplicationProperties.GetString("statusDescription")
		t.Fatalf("status %d (%s: %v), want 200", code, r.condition(), desc)
	}
	if r.Value == nil {
		return nil
	}
	m, ok := r.Value.(encoding.Map)
	if !ok {
		t.Fatalf("reply body is %T, want a map", r.Value)
	}
	return m
}

// mustFail checks a failure reply's status and condition.
func (r mgmtReplyWire) mustFail(t testing.TB, status int32, cond encoding.Symbol) {
	t.Helper()
	if got := r.status(t); got != status || r.condition() != cond {
		desc, _ := r.ApplicationProperties.GetString("statusDescription")
		t.Fatalf("reply %d %s (%v), want %d %s", got, r.condition(), desc, status, cond)
	}
}

// get returns body[k] or fails.
func get(t testing.TB, body encoding.Map, k string) any {
	t.Helper()
	v, ok := body.GetString(k)
	if !ok {
		t.Fatalf("reply body %v lacks %q", body, k)
	}
	return v
}

// arrayOf asserts v is an AMQP array (not a list) of element type code.
func arrayOf(t testing.TB, v any, code byte) []any {
	t.Helper()
	a, ok := v.(encoding.Array)
	if !ok || a.Type != code {
		t.Fatalf("value %#v is not an array of type 0x%02x", v, code)
	}
	return a.Elems
}

// listOfMaps asserts v is an AMQP list (not an array) whose elements are
// maps, the shape Go reads as []any of map[string]any.
func listOfMaps(t testing.TB, v any) []encoding.Map {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("value %T is not a list", v)
	}
	out := make([]encoding.Map, len(l))
	for i, e := range l {
		if out[i], ok = e.(encoding.Map); !ok {
			t.Fatalf("list element %d is %T, want a map", i, e)
		}
	}
	return out
}

func TestManagementEnvelope(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "q", false)

	t.Run("unknown operation", func(t *testing.T) {
		h.call(t, "q", "com.microsoft:frobnicate", encoding.Map{}).mustFail(t, 501, frames.CondNotImplemented)
	})
	t.Run("missing rights", func(t *testing.T) {
		body := encoding.Map{{Key: "sequence-numbers", Value: longArray(1)}}
		h.callAs(t, "q", sas.Listen, opCancelScheduled, body).mustFail(t, 401, frames.CondUnauthorizedAccess)
	})
	t.Run("body not a map", func(t *testing.T) {
		h.callAs(t, "q", sas.Manage, opPeek, "x").mustFail(t, 400, condArgumentError)
	})
	t.Run("unknown entity", func(t *testing.T) {
		r := h.call(t, "nope", opPeek, encoding.Map{{Key: "from-sequence-number", Value: int64(1)}, {Key: "message-count", Value: int32(1)}})
		r.mustFail(t, 404, frames.CondNotFound)
		desc, _ := r.ApplicationProperties.GetString("statusDescription")
		if s, _ := desc.(string); !bytes.Contains([]byte(s), []byte("could not be found")) {
			t.Errorf("statusDescription %q lacks the phrase JS matches", desc)
		}
	})
	t.Run("core bad request", func(t *testing.T) {
		// Listing sessions of a queue without sessions violates a rule.
		h.call(t, "q", opGetMessageSession, encoding.Map{}).mustFail(t, 400, frames.CondNotAllowed)
	})
	t.Run("golden status encoding", func(t *testing.T) {
		r := h.call(t, "q", opPeek, encoding.Map{{Key: "from-sequence-number", Value: int64(1)}, {Key: "message-count", Value: int32(1)}})
		golden := append([]byte{0xa1, 10}, "statusCode\x71\x00\x00\x00\xcc"...) // str8 key, int 204
		if !bytes.Contains(r.raw, golden) {
			t.Errorf("reply % x lacks statusCode as int 204 (% x)", r.raw, golden)
		}
	})
}

func TestMgmtReplyWithoutRequestProperties(t *testing.T) {
	reply := mgmtReply(&frames.Message{}, 200, "OK", "", nil)
	if reply.Properties == nil || reply.Properties.CorrelationID != nil {
		t.Errorf("reply properties = %+v, want present with no correlation-id", reply.Properties)
	}
	var w buffer.Buffer
	if err := reply.MarshalAMQP(&w); err != nil {
		t.Fatal(err)
	}
}
