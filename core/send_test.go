package core_test

import (
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// A front may reuse its buffers and message structs once Send returns
// (an AMQP decoder's body slice aliases its read buffer): what a receiver
// gets must be what was sent, not what the sender's memory holds later.
func TestSendDoesNotAliasCallerMemory(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	body := []byte("original")
	m := &core.Message{Body: body, ApplicationProperties: map[string]any{"k": "v1"}, Subject: "s1"}
	env.MustSend(t, "q", m)
	copy(body, "CLOBBERD")
	m.ApplicationProperties["k"] = "v2"
	m.Subject = "s2"
	got := env.MustReceive(t, "q", core.PeekLock, 1)
	if len(got) != 1 {
		t.Fatalf("got %d messages", len(got))
	}
	if string(got[0].Body) != "original" || got[0].ApplicationProperties["k"] != "v1" || got[0].Subject != "s1" {
		t.Errorf("received body %q props %v subject %q; want the message as sent", got[0].Body, got[0].ApplicationProperties, got[0].Subject)
	}
	// And a receiver mutating what it got does not change a redelivery.
	got[0].Body[0] = 'X'
	got[0].ApplicationProperties["k"] = "v3"
	env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Abandon})
	again := env.MustReceive(t, "q", core.PeekLock, 1)
	if len(again) != 1 || string(again[0].Body) != "original" || again[0].ApplicationProperties["k"] != "v1" {
		t.Errorf("redelivered %q %v; want the message as sent", again[0].Body, again[0].ApplicationProperties)
	}
}

func TestSendStampsBrokerProperties(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	m := coretest.Text("x")
	seqs := env.MustSend(t, "q", m)
	if m.SequenceNumber != seqs[0] || !m.EnqueuedTime.Equal(coretest.Epoch) || m.State != core.StateActive {
		t.Errorf("stamped %d %v %v, want seq %d at epoch, active", m.SequenceNumber, m.EnqueuedTime, m.State, seqs[0])
	}
	for _, bad := range []string{"q/$DeadLetterQueue", "missing"} {
		if _, err := env.Broker.Send(t.Context(), bad, coretest.Text("x")); err == nil {
			t.Errorf("send to %q succeeded", bad)
		}
	}
	long := &core.Message{Body: []byte("x"), SessionID: "a", PartitionKey: "b"}
	if _, err := env.Broker.Send(t.Context(), "q", long); core.CodeOf(err) != core.CodeBadRequest {
		t.Errorf("session id != partition key: %v, want bad request", err)
	}
}

// SendAsync refuses an unplannable send at once, writing nothing, and
// otherwise reports the durable send to done with its sequence numbers,
// assigned in call order.
func TestSendAsync(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true})
	fail := func([]int64, error) { t.Error("done called for a refused send") }
	if err := env.Broker.SendAsync("missing", []*core.Message{coretest.Text("x")}, fail); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("send to a missing queue: %v, want not found", err)
	}
	mixed := []*core.Message{{Body: []byte("a"), SessionID: "s"}, {Body: []byte("b")}}
	if err := env.Broker.SendAsync("q", mixed, fail); core.CodeOf(err) != core.CodeBadRequest {
		t.Errorf("batch with a message without session id: %v, want bad request", err)
	}
	type result struct {
		seqs []int64
		err  error
	}
	got := make(chan result, 2)
	for _, body := range []string{"first", "second"} {
		m := &core.Message{Body: []byte(body), SessionID: "s"}
		if err := env.Broker.SendAsync("q", []*core.Message{m}, func(seqs []int64, err error) { got <- result{seqs, err} }); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []int64
	for range 2 {
		r := <-got
		if r.err != nil || len(r.seqs) != 1 {
			t.Fatalf("done(%v, %v), want one sequence number", r.seqs, r.err)
		}
		seqs = append(seqs, r.seqs[0])
	}
	if seqs[0]+seqs[1] != 3 {
		t.Errorf("sequence numbers %v, want 1 and 2", seqs)
	}
	sl, err := env.Broker.AcceptSession(t.Context(), "q", "s")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := env.Broker.Receive(t.Context(), "q", core.ReceiveOptions{Max: 10, Session: sl})
	if err != nil || len(msgs) != 2 || string(msgs[0].Body) != "first" || msgs[0].SequenceNumber != 1 {
		t.Fatalf("received %d messages (%v), want first and second in order", len(msgs), err)
	}
}
