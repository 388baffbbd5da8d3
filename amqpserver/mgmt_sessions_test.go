package amqpserver

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// acceptSession locks a session as a session receiver link would and
// registers it where sessionLock finds it.
func (h *mgmtHarness) acceptSession(t testing.TB, entity, id string) *core.SessionLock {
	t.Helper()
	sl, err := h.env.Broker.AcceptSession(t.Context(), entity, id)
	if err != nil {
		t.Fatalf("accept session %q: %v", id, err)
	}
	h.held[entity+"|"+id] = sl
	return sl
}

func sessionMessage(id, body string) *core.Message {
	m := coretest.Text(body)
	m.SessionID = id
	return m
}

func TestMgmtSessionLockAndState(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "sq", true)
	h.env.MustSend(t, "sq", sessionMessage("s1", "x"))
	sid := encoding.Map{{Key: "session-id", Value: "s1"}}

	// Nobody holds s1 yet.
	h.call(t, "sq", opRenewSessionLock, sid).mustFail(t, 410, condSessionLockLost)
	h.call(t, "sq", opGetSessionState, sid).mustFail(t, 410, condSessionLockLost)

	sl := h.acceptSession(t, "sq", "s1")
	h.env.Clock.Advance(5 * time.Second)
	body := h.call(t, "sq", opRenewSessionLock, sid).mustOK(t)
	exp, ok := get(t, body, "expiration").(time.Time)
	if !ok || !exp.After(sl.LockedUntil.Add(-time.Millisecond)) || !exp.After(coretest.Epoch.Add(5*time.Second)) {
		t.Errorf("expiration = %#v, want a timestamp after the renewal time", get(t, body, "expiration"))
	}

	// No state: the key is present with a null value.
	body = h.call(t, "sq", opGetSessionState, sid).mustOK(t)
	if v, ok := body.GetString("session-state"); !ok || v != nil {
		t.Errorf("session-state = %#v (present %v), want a present null", v, ok)
	}

	set := func(v any) {
		h.call(t, "sq", opSetSessionState, append(encoding.Map{{Key: "session-state", Value: v}}, sid...)).mustOK(t)
	}
	set([]byte("state-1"))
	body = h.call(t, "sq", opGetSessionState, sid).mustOK(t)
	if v := get(t, body, "session-state"); !bytes.Equal(v.([]byte), []byte("state-1")) {
		t.Errorf("session-state = %#v, want binary state-1", v)
	}
	set([]byte{}) // how Go clears state
	if v := get(t, h.call(t, "sq", opGetSessionState, sid).mustOK(t), "session-state"); v != nil {
		t.Errorf("after clearing with empty binary, session-state = %#v", v)
	}
	set([]byte("s"))
	set(nil)
	if v := get(t, h.call(t, "sq", opGetSessionState, sid).mustOK(t), "session-state"); v != nil {
		t.Errorf("after clearing with null, session-state = %#v", v)
	}
	h.call(t, "sq", opSetSessionState, append(encoding.Map{{Key: "session-state", Value: "text"}}, sid...)).
		mustFail(t, 400, condArgumentError)
	h.call(t, "sq", opGetSessionState, encoding.Map{}).mustFail(t, 400, condArgumentError)

	// A session lock that has expired in core is lost even if the
	// transport still holds it.
	h.env.Clock.Advance(10 * time.Minute)
	h.call(t, "sq", opRenewSessionLock, sid).mustFail(t, 410, condSessionLockLost)
}

func TestMgmtGetMessageSessions(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "sq", true)
	list := func(since time.Time, skip, top int32) mgmtReplyWire {
		return h.call(t, "sq", opGetMessageSession, encoding.Map{
			{Key: "last-updated-time", Value: since},
			{Key: "skip", Value: skip},
			{Key: "top", Value: top},
		})
	}
	if code := list(listAllSessions, 0, 10).status(t); code != 204 {
		t.Errorf("no sessions: status %d, want 204", code)
	}
	for _, id := range []string{"c", "a", "b"} {
		h.env.MustSend(t, "sq", sessionMessage(id, id))
	}

	page := func(skip, top int32) ([]string, int32) {
		body := list(listAllSessions, skip, top).mustOK(t)
		elems := arrayOf(t, get(t, body, "sessions-ids"), encoding.TypeCodeStr32)
		ids := make([]string, len(elems))
		for i, e := range elems {
			ids[i] = e.(string)
		}
		next, ok := get(t, body, "skip").(int32)
		if !ok {
			t.Fatalf("skip is %T, want int", get(t, body, "skip"))
		}
		return ids, next
	}
	ids, next := page(0, 2)
	if !slices.Equal(ids, []string{"a", "b"}) || next != 2 {
		t.Errorf("first page %v next %d, want [a b] and 2", ids, next)
	}
	ids, next = page(2, 2)
	if !slices.Equal(ids, []string{"c"}) || next != 3 {
		t.Errorf("second page %v next %d, want [c] and 3", ids, next)
	}
	if code := list(listAllSessions, 3, 2).status(t); code != 204 {
		t.Errorf("past the end: status %d, want 204", code)
	}

	// With a real time, only sessions whose state changed after it.
	h.acceptSession(t, "sq", "b")
	h.env.Clock.Advance(time.Second)
	h.call(t, "sq", opSetSessionState, encoding.Map{{Key: "session-id", Value: "b"}, {Key: "session-state", Value: []byte("x")}}).mustOK(t)
	body := list(coretest.Epoch, 0, 10).mustOK(t)
	if got := arrayOf(t, get(t, body, "sessions-ids"), encoding.TypeCodeStr32); !slices.Equal(got, []any{"b"}) {
		t.Errorf("sessions updated since epoch = %v, want [b]", got)
	}
	h.call(t, "sq", opGetMessageSession, encoding.Map{{Key: "skip", Value: int32(-1)}}).mustFail(t, 400, condArgumentError)
}
