package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// A cancellation that fails to persist leaves the message scheduled.
func TestCancelScheduledFailureKeepsMessage(t *testing.T) {
	env, fs := newFailingEnv(t)
	m := coretest.Text("later")
	m.ScheduledEnqueueTime = coretest.Epoch.Add(time.Minute)
	seqs := env.MustSend(t, "q", m)
	fs.fail.Store(true)
	if err := env.Broker.CancelScheduled(t.Context(), "q", seqs); !errors.Is(err, errInjected) {
		t.Fatalf("cancel with a failing store: %v", err)
	}
	if c := env.MustCounts(t, "q"); c.Scheduled != 1 {
		t.Errorf("after a failed cancel: %+v, want it still scheduled", c)
	}
	env.Clock.Advance(time.Minute)
	if got := env.MustReceive(t, "q", core.ReceiveAndDelete, 1); len(got) != 1 {
		t.Errorf("message whose cancel failed did not activate: %v", got)
	}
}

// Scheduled messages on a topic: each subscription copy activates on
// time, and a cancel on the topic removes them all.
func TestScheduledOnTopic(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
	m1, m2 := coretest.Text("1"), coretest.Text("2")
	m1.ScheduledEnqueueTime = coretest.Epoch.Add(time.Minute)
	m2.ScheduledEnqueueTime = coretest.Epoch.Add(time.Minute)
	seqs := env.MustSend(t, "t", m1, m2)
	if err := env.Broker.CancelScheduled(t.Context(), "t", seqs[:1]); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(time.Minute)
	for _, s := range []string{"a", "b"} {
		got := env.MustReceive(t, "t/Subscriptions/"+s, core.ReceiveAndDelete, 5)
		if len(got) != 1 || string(got[0].Body) != "2" {
			t.Errorf("subscription %s got %v, want only the uncancelled message", s, coretest.Bodies(got))
		}
	}
	if n := countKeys(t, env.Store, 'B'); n != 0 {
		t.Errorf("%d bodies left after cancel and receive", n)
	}
}
