package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// A chain of forwarding queues delivers to its end; chains longer than the
// hop limit are refused at creation.
func TestForwardChain(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q0"})
	for i := 1; i <= 4; i++ {
		env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: fmt.Sprintf("q%d", i), ForwardTo: fmt.Sprintf("q%d", i-1)})
	}
	env.MustSend(t, "q4", coretest.Text("hop"))
	if got := env.MustReceive(t, "q0", core.ReceiveAndDelete, 1); len(got) != 1 {
		t.Errorf("message did not reach the end of the chain")
	}
	for i := 1; i <= 4; i++ {
		if c := env.MustCounts(t, fmt.Sprintf("q%d", i)); c.Total != 0 {
			t.Errorf("q%d kept %d messages", i, c.Total)
		}
	}
	var err error
	last := 4
	for i := 5; i <= 8 && err == nil; i++ {
		_, err = env.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: fmt.Sprintf("q%d", i), ForwardTo: fmt.Sprintf("q%d", i-1)})
		if err == nil {
			last = i
		}
	}
	if core.CodeOf(err) != core.CodeBadRequest {
		t.Errorf("an over-long forwarding chain was accepted: %v", err)
	}
	// Every chain accepted at creation must carry messages.
	if _, err := env.Broker.Send(t.Context(), fmt.Sprintf("q%d", last), coretest.Text("x")); err != nil {
		t.Errorf("send into the longest accepted chain (q%d): %v", last, err)
	}
}

// A subscription's dead letters (here: expired messages) go to the entity
// named by ForwardDeadLetteredMessagesTo, marked with their source.
func TestForwardDeadLettersFromSubscription(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "graveyard"})
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s",
		DeadLetteringOnMessageExpiration: true, ForwardDeadLetteredMessagesTo: "graveyard"})
	m := coretest.Text("short")
	m.TimeToLive = time.Second
	env.MustSend(t, "t", m)
	env.Clock.Advance(2 * time.Second)
	if got := env.MustReceive(t, "t/Subscriptions/s", core.PeekLock, 1); len(got) != 0 {
		t.Fatalf("expired message delivered: %v", got)
	}
	core.Quiesce(env.Broker)
	got := env.MustReceive(t, "graveyard", core.ReceiveAndDelete, 1)
	if len(got) != 1 || got[0].DeadLetterSource != "t/Subscriptions/s" || got[0].ApplicationProperties["DeadLetterReason"] != core.ReasonTTLExpired {
		t.Fatalf("forwarded dead letter: %+v", got)
	}
	if c := env.MustCounts(t, "t/Subscriptions/s"); c.Total != 0 {
		t.Errorf("subscription kept %+v", c)
	}
	if n := countKeys(t, env.Store, 'B'); n != 0 {
		t.Errorf("%d bodies left", n)
	}
}
