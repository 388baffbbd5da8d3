package amqpserver

import (
	"bytes"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// receiveLocked peek-locks n messages from entity.
func (h *mgmtHarness) receiveLocked(t testing.TB, entity string, n int) []*core.Message {
	t.Helper()
	msgs, err := h.env.Broker.Receive(t.Context(), entity, core.ReceiveOptions{Mode: core.PeekLock, Max: n})
	if err != nil || len(msgs) != n {
		t.Fatalf("receive %d from %s: got %d, %v", n, entity, len(msgs), err)
	}
	return msgs
}

func uuidArray(toks ...core.LockToken) encoding.Array {
	a := encoding.Array{Type: encoding.TypeCodeUUID}
	for _, tok := range toks {
		a.Elems = append(a.Elems, encoding.UUID(tok))
	}
	return a
}

func longArray(ns ...int64) encoding.Array {
	a := encoding.Array{Type: encoding.TypeCodeLong}
	for _, n := range ns {
		a.Elems = append(a.Elems, n)
	}
	return a
}

func TestMgmtRenewLock(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "q", false)
	h.env.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"))
	msgs := h.receiveLocked(t, "q", 2)
	h.env.Clock.Advance(10 * time.Second)

	body := h.call(t, "q", opRenewLock, encoding.Map{{Key: "lock-tokens", Value: uuidArray(msgs[0].LockToken, msgs[1].LockToken)}}).mustOK(t)
	exps := arrayOf(t, get(t, body, "expirations"), encoding.TypeCodeTimestamp)
	if len(exps) != 2 {
		t.Fatalf("expirations has %d entries, want 2", len(exps))
	}
	for i, e := range exps {
		if !e.(time.Time).After(msgs[i].LockedUntil) {
			t.Errorf("expiration %d = %v, not after the old lock %v", i, e, msgs[i].LockedUntil)
		}
	}

	// JS sends the tokens the same way; an unknown token is lock lost.
	h.call(t, "q", opRenewLock, encoding.Map{{Key: "lock-tokens", Value: uuidArray(core.NewUUID())}}).
		mustFail(t, 410, condMessageLockLost)
	h.call(t, "q", opRenewLock, encoding.Map{{Key: "lock-tokens", Value: []any{"not-a-uuid"}}}).
		mustFail(t, 400, condArgumentError)
}

func TestMgmtPeek(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "q", false)
	h.env.MustSend(t, "q", coretest.Text("one"), coretest.Text("two"), coretest.Text("three"))
	later := &core.Message{Body: []byte("later"), ScheduledEnqueueTime: coretest.Epoch.Add(time.Hour)}
	h.env.MustSend(t, "q", later)

	peek := func(from int64, count int32) mgmtReplyWire {
		return h.call(t, "q", opPeek, encoding.Map{
			{Key: "from-sequence-number", Value: from},
			{Key: "message-count", Value: count},
		})
	}
	entries := listOfMaps(t, get(t, peek(2, 10).mustOK(t), "messages"))
	if len(entries) != 3 {
		t.Fatalf("peek from 2 returned %d messages, want 3", len(entries))
	}
	wantBodies := []string{"two", "three", "later"}
	for i, e := range entries {
		raw, ok := get(t, e, "message").([]byte)
		if !ok {
			t.Fatalf("entry %d message is not binary", i)
		}
		am, err := frames.UnmarshalMessage(raw)
		if err != nil {
			t.Fatalf("peeked message %d: %v", i, err)
		}
		if !bytes.Equal(am.Data[0], []byte(wantBodies[i])) {
			t.Errorf("peeked body %d = %q, want %q", i, am.Data[0], wantBodies[i])
		}
		seq, _ := am.MessageAnnotations.GetSymbol(annSequenceNumber)
		if seq != int64(i+2) {
			t.Errorf("peeked message %d has sequence number %#v, want %d", i, seq, i+2)
		}
		if _, ok := am.MessageAnnotations.GetSymbol(annLockedUntil); ok {
			t.Errorf("peeked message %d carries x-opt-locked-until", i)
		}
		state, _ := am.MessageAnnotations.GetSymbol(annMessageState)
		if want := int32(map[bool]int{true: 2, false: 0}[i == 2]); state != want {
			t.Errorf("peeked message %d state = %#v, want int %d", i, state, want)
		}
	}
	if n := len(listOfMaps(t, get(t, peek(1, 2).mustOK(t), "messages"))); n != 2 {
		t.Errorf("peek with message-count 2 returned %d", n)
	}
	if code := peek(100, 5).status(t); code != 204 {
		t.Errorf("peek past the end: status %d, want 204", code)
	}
}

func TestMgmtScheduleAndCancel(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "q", false)
	at := coretest.Epoch.Add(time.Hour)
	entry := func(id string) encoding.Map {
		raw := mustMarshalMessage(t, &frames.Message{
			Properties:         &frames.MessageProperties{MessageID: id},
			MessageAnnotations: encoding.Map{{Key: annScheduledEnqueueTime, Value: at}},
			Data:               [][]byte{[]byte(id)},
		})
		return encoding.Map{{Key: "message-id", Value: id}, {Key: "message", Value: raw}}
	}
	body := h.call(t, "q", opSchedule, encoding.Map{{Key: "messages", Value: []any{entry("a"), entry("b")}}}).mustOK(t)
	seqs := arrayOf(t, get(t, body, "sequence-numbers"), encoding.TypeCodeLong)
	if len(seqs) != 2 || seqs[0].(int64) >= seqs[1].(int64) {
		t.Fatalf("sequence-numbers = %v, want two increasing longs", seqs)
	}
	peeked, err := h.env.Broker.Peek(t.Context(), "q", core.PeekOptions{From: 1, Max: 10})
	if err != nil || len(peeked) != 2 || peeked[0].State != core.StateScheduled || !peeked[0].ScheduledEnqueueTime.Equal(at) {
		t.Fatalf("after schedule, peek = %v, %v; want 2 scheduled messages", peeked, err)
	}

	h.call(t, "q", opCancelScheduled, encoding.Map{{Key: "sequence-numbers", Value: longArray(seqs[0].(int64))}}).mustOK(t)
	peeked, _ = h.env.Broker.Peek(t.Context(), "q", core.PeekOptions{From: 1, Max: 10})
	if len(peeked) != 1 || peeked[0].SequenceNumber != seqs[1].(int64) {
		t.Errorf("after cancel, %d messages remain, want only %v", len(peeked), seqs[1])
	}

	noTime := mustMarshalMessage(t, &frames.Message{Data: [][]byte{nil}})
	h.call(t, "q", opSchedule, encoding.Map{{Key: "messages", Value: []any{encoding.Map{{Key: "message", Value: noTime}}}}}).
		mustFail(t, 400, condArgumentError)
}

// deferOne sends a message, receives it and defers it; it returns its
// sequence number.
func (h *mgmtHarness) deferOne(t testing.TB, entity, body string) int64 {
	t.Helper()
	h.env.MustSend(t, entity, coretest.Text(body))
	m := h.receiveLocked(t, entity, 1)[0]
	if err := h.env.Broker.Settle(t.Context(), entity, m.LockToken, core.Outcome{Kind: core.Defer}); err != nil {
		t.Fatalf("defer: %v", err)
	}
	return m.SequenceNumber
}

func TestMgmtReceiveBySequenceNumber(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "q", false)
	seq := h.deferOne(t, "q", "deferred")

	receive := func(mode uint32, seqs ...int64) mgmtReplyWire {
		return h.call(t, "q", opReceiveBySequence, encoding.Map{
			{Key: "sequence-numbers", Value: longArray(seqs...)},
			{Key: "receiver-settle-mode", Value: mode},
		})
	}
	h.call(t, "q", opReceiveBySequence, encoding.Map{{Key: "sequence-numbers", Value: longArray(999)}}).
		mustFail(t, 404, condMessageNotFound)

	entries := listOfMaps(t, get(t, receive(1, seq).mustOK(t), "messages"))
	if len(entries) != 1 {
		t.Fatalf("got %d messages, want 1", len(entries))
	}
	tok, ok := get(t, entries[0], "lock-token").(encoding.UUID)
	if !ok || tok == (encoding.UUID{}) {
		t.Fatalf("lock-token = %#v, want a uuid", get(t, entries[0], "lock-token"))
	}
	am, err := frames.UnmarshalMessage(get(t, entries[0], "message").([]byte))
	if err != nil {
		t.Fatal(err)
	}
	if da, _ := am.DeliveryAnnotations.GetSymbol(annLockToken); da != tok {
		t.Errorf("x-opt-lock-token = %#v, want the reply's lock-token %v", da, tok)
	}
	if lu, ok := am.MessageAnnotations.GetSymbol(annLockedUntil); !ok || !lu.(time.Time).After(coretest.Epoch) {
		t.Errorf("x-opt-locked-until = %#v, want a fresh timestamp", lu)
	}
	if st, _ := am.MessageAnnotations.GetSymbol(annMessageState); st != int32(core.StateDeferred) {
		t.Errorf("x-opt-message-state = %#v, want 1", st)
	}

	// Complete it through update-disposition with the returned token.
	h.call(t, "q", opUpdateDisposition, encoding.Map{
		{Key: "disposition-status", Value: "completed"},
		{Key: "lock-tokens", Value: uuidArray(core.LockToken(tok))},
	}).mustOK(t)
	if c, _ := h.env.Broker.Counts("q"); c.Total != 0 {
		t.Errorf("after completing the deferred message %d remain", c.Total)
	}

	// Receive-and-delete returns no lock token and removes the message.
	seq = h.deferOne(t, "q", "again")
	entries = listOfMaps(t, get(t, receive(0, seq).mustOK(t), "messages"))
	if _, ok := entries[0].GetString("lock-token"); ok || len(entries) != 1 {
		t.Errorf("receive-and-delete entry %v carries a lock-token", entries[0])
	}
	receive(0, seq).mustFail(t, 404, condMessageNotFound)
}

func TestMgmtUpdateDisposition(t *testing.T) {
	h := newMgmtHarness(t)
	h.queue(t, "q", false)
	settle := func(status string, tok core.LockToken, extra ...encoding.KeyValue) mgmtReplyWire {
		body := encoding.Map{{Key: "disposition-status", Value: status}, {Key: "lock-tokens", Value: uuidArray(tok)}}
		return h.call(t, "q", opUpdateDisposition, append(body, extra...))
	}

	h.env.MustSend(t, "q", coretest.Text("m"))
	m := h.receiveLocked(t, "q", 1)[0]
	settle("abandoned", m.LockToken, encoding.KeyValue{Key: "properties-to-modify", Value: encoding.Map{{Key: "tries", Value: int32(1)}}}).mustOK(t)
	m = h.receiveLocked(t, "q", 1)[0]
	if m.DeliveryCount != 2 || m.ApplicationProperties["tries"] != int32(1) {
		t.Errorf("after abandon: delivery count %d, properties %v", m.DeliveryCount, m.ApplicationProperties)
	}

	settle("defered", m.LockToken).mustOK(t)
	peeked, _ := h.env.Broker.Peek(t.Context(), "q", core.PeekOptions{From: 1})
	if len(peeked) != 1 || peeked[0].State != core.StateDeferred {
		t.Fatalf("after defered: %v, want one deferred message", peeked)
	}
	d, err := h.env.Broker.ReceiveDeferred(t.Context(), "q", core.PeekLock, []int64{peeked[0].SequenceNumber})
	if err != nil {
		t.Fatal(err)
	}
	settle("suspended", d[0].LockToken,
		encoding.KeyValue{Key: "deadletter-reason", Value: "bad"},
		encoding.KeyValue{Key: "deadletter-description", Value: "very bad"}).mustOK(t)
	dl, err := h.env.Broker.Peek(t.Context(), "q/$DeadLetterQueue", core.PeekOptions{From: 1})
	if err != nil || len(dl) != 1 {
		t.Fatalf("dead-letter queue: %v, %v", dl, err)
	}
	if dl[0].ApplicationProperties["DeadLetterReason"] != "bad" || dl[0].ApplicationProperties["DeadLetterErrorDescription"] != "very bad" {
		t.Errorf("dead-lettered properties %v", dl[0].ApplicationProperties)
	}

	settle("completed", d[0].LockToken).mustFail(t, 410, condMessageLockLost)
	settle("exploded", d[0].LockToken).mustFail(t, 400, condArgumentError)
	settle("completed", d[0].LockToken, encoding.KeyValue{Key: "session-id", Value: "s"}).mustFail(t, 410, condSessionLockLost)
}
