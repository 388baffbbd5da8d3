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
