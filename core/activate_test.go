package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// ActivateScheduled makes a scheduled message available at once, on a
// queue and in every subscription of a topic, and leaves the others
// scheduled.
func TestActivateScheduled(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	later := coretest.Epoch.Add(time.Hour)
	m1, m2, m3 := coretest.Text("now"), coretest.Text("later"), coretest.Text("queued")
	m1.ScheduledEnqueueTime, m2.ScheduledEnqueueTime, m3.ScheduledEnqueueTime = later, later, later
	seqs := env.MustSend(t, "t", m1, m2)
	qseqs := env.MustSend(t, "q", m3)

	n, err := env.Broker.ActivateScheduled(t.Context(), "t", seqs[:1])
	if err != nil || n != 2 {
		t.Fatalf("ActivateScheduled on the topic = %d, %v; want 2 copies", n, err)
	}
	if n, err := env.Broker.ActivateScheduled(t.Context(), "q", append(qseqs, 999)); err != nil || n != 1 {
		t.Fatalf("ActivateScheduled on the queue with an unknown number = %d, %v; want 1", n, err)
	}
	env.Clock.Advance(0) // the broker's timer runs the activation
	for _, s := range []string{"a", "b"} {
		got := env.MustReceive(t, "t/Subscriptions/"+s, core.ReceiveAndDelete, 5)
		if len(got) != 1 || string(got[0].Body) != "now" {
			t.Errorf("subscription %s got %v, want only the activated message", s, coretest.Bodies(got))
		}
		if c := env.MustCounts(t, "t/Subscriptions/"+s); c.Scheduled != 1 {
			t.Errorf("subscription %s: %+v, want the other message still scheduled", s, c)
		}
	}
	if got := env.MustReceive(t, "q", core.ReceiveAndDelete, 5); len(got) != 1 {
		t.Errorf("queue got %v, want the activated message", coretest.Bodies(got))
	}
	if _, err := env.Broker.ActivateScheduled(t.Context(), "t/Subscriptions/a", seqs); !errors.Is(err, core.ErrBadRequest) {
		t.Errorf("ActivateScheduled on a subscription: %v, want ErrBadRequest", err)
	}
	if _, err := env.Broker.ActivateScheduled(t.Context(), "nope", seqs); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("ActivateScheduled on a missing entity: %v, want ErrNotFound", err)
	}
}
