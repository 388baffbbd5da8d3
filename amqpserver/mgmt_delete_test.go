package amqpserver

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
)

// deleteBody is a batch-delete request body as the JS SDK builds it: an
// int count, a timestamp cutoff and, from a session receiver, a string
// session id.
func deleteBody(count any, before any, session string) encoding.Map {
	body := encoding.Map{{Key: "message-count", Value: count}, {Key: "enqueued-time-utc", Value: before}}
	if session != "" {
		body = append(body, encoding.KeyValue{Key: "session-id", Value: session})
	}
	return body
}

// deletedCount checks a batch-delete reply and returns its count, which
// must be an AMQP int: the SDKs reject anything else.
func deletedCount(t *testing.T, r mgmtReplyWire) int32 {
	t.Helper()
	v := get(t, r.mustOK(t), "message-count")
	n, ok := v.(int32)
	if !ok {
		t.Fatalf("message-count = %#v (%T), want an AMQP int", v, v)
	}
	return n
}

func TestMgmtBatchDelete(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "q", false)
	h.queue(t, "sq", true)
	h.env.MustSend(t, "q", coretest.Text("old-1"), coretest.Text("old-2"))
	h.env.Clock.Advance(time.Minute)
	cutoff := h.env.Clock.Now()
	// The wire's cutoff is a millisecond: a message enqueued within it
	// counts as before it (a purge right after a send must take it).
	h.env.Clock.Advance(500 * time.Microsecond)
	h.env.MustSend(t, "q", coretest.Text("same-ms"))
	h.env.Clock.Advance(time.Millisecond)
	h.env.MustSend(t, "q", coretest.Text("new"))
	h.env.Clock.Advance(time.Minute)

	if n := deletedCount(t, h.call(t, "q", opBatchDelete, deleteBody(int32(500), cutoff, ""))); n != 3 {
		t.Fatalf("deleted %d up to the cutoff's millisecond, want 3", n)
	}
	if n := deletedCount(t, h.call(t, "q", opBatchDelete, deleteBody(int32(500), cutoff, ""))); n != 0 {
		t.Fatalf("nothing left before the cutoff, yet deleted %d (an empty batch is 200 with 0)", n)
	}
	// Without a cutoff (null, or no key at all) everything goes.
	if n := deletedCount(t, h.call(t, "q", opBatchDelete, deleteBody(int32(1), nil, ""))); n != 1 {
		t.Fatalf("delete without a cutoff removed %d, want 1", n)
	}

	// A session receiver's request names its session.
	for _, sid := range []string{"a", "b", "a"} {
		h.env.MustSend(t, "sq", &core.Message{SessionID: sid, Body: []byte(sid)})
	}
	if n := deletedCount(t, h.call(t, "sq", opBatchDelete, deleteBody(int32(10), h.env.Clock.Now().Add(time.Second), "a"))); n != 2 {
		t.Fatalf("deleted %d of session a, want 2", n)
	}
	if c := h.env.MustCounts(t, "sq"); c.Active != 1 {
		t.Fatalf("session queue counts %+v, want session b's message left", c)
	}

	// The dead-letter subqueue has its own node.
	h.env.MustSend(t, "q", coretest.Text("dl"))
	m := h.receiveLocked(t, "q", 1)[0]
	h.env.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.DeadLetter})
	if n := deletedCount(t, h.call(t, "q/$DeadLetterQueue", opBatchDelete, encoding.Map{{Key: "message-count", Value: int64(10)}})); n != 1 {
		t.Fatalf("deleted %d dead letters, want 1", n)
	}
}

func TestMgmtBatchDeleteRefusals(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "q", false)
	h.env.MustSend(t, "q", coretest.Text("kept"))
	now := h.env.Clock.Now().Add(time.Second)
	for name, body := range map[string]encoding.Map{
		"zero count":           deleteBody(int32(0), now, ""),
		"negative count":       deleteBody(int32(-5), now, ""),
		"count above 4000":     deleteBody(int32(4001), now, ""),
		"count as a string":    deleteBody("10", now, ""),
		"no count":             {{Key: "enqueued-time-utc", Value: now}},
		"cutoff not a time":    deleteBody(int32(10), "yesterday", ""),
		"session not a string": append(deleteBody(int32(10), now, ""), encoding.KeyValue{Key: "session-id", Value: int32(7)}),
	} {
		t.Run(name, func(t *testing.T) {
			h.call(t, "q", opBatchDelete, body).mustFail(t, 400, condArgumentError)
		})
	}
	// A session on a queue without sessions violates a rule of the core.
	h.call(t, "q", opBatchDelete, deleteBody(int32(10), now, "s")).mustFail(t, 400, frames.CondNotAllowed)
	h.callAs(t, "q", sas.Send, opBatchDelete, deleteBody(int32(10), now, "")).mustFail(t, 401, frames.CondUnauthorizedAccess)
	h.call(t, "nope", opBatchDelete, deleteBody(int32(10), now, "")).mustFail(t, 404, frames.CondNotFound)
	if c := h.env.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("a refused delete changed the queue: %+v", c)
	}
	// Listen is the right it needs.
	if n := deletedCount(t, h.callAs(t, "q", sas.Listen, opBatchDelete, deleteBody(int32(10), now, ""))); n != 1 {
		t.Fatalf("deleted %d with Listen, want 1", n)
	}
}

// Over a real socket with go-amqp, shaped like the SDKs' request-response
// links: the count as int, the cutoff as a timestamp.
func TestManagementBatchDelete(t *testing.T) {
	ts := newTestServer(t, nil)
	for range 5 {
		ts.MustSend(t, "q", coretest.Text("m"))
	}
	ts.Clock.Advance(time.Second)
	m := mgmtCall(t, ts.session(t), "q", opBatchDelete,
		map[string]any{"message-count": int32(3), "enqueued-time-utc": ts.Clock.Now()})
	if got := m.ApplicationProperties["statusCode"]; got != int32(200) {
		t.Fatalf("statusCode = %#v (%v), want 200", got, m.ApplicationProperties["statusDescription"])
	}
	body, ok := m.Value.(map[string]any)
	if !ok || body["message-count"] != int32(3) {
		t.Fatalf("reply body %#v, want message-count int32 3", m.Value)
	}
	if c := ts.MustCounts(t, "q"); c.Active != 2 {
		t.Fatalf("counts %+v after deleting 3 of 5", c)
	}
	m = mgmtCall(t, ts.session(t), "q", opBatchDelete, map[string]any{"message-count": int32(4001)})
	if got := m.ApplicationProperties["statusCode"]; got != int32(400) {
		t.Fatalf("a count above the limit: statusCode %#v, want 400", got)
	}
}
