package core_test

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// The TTL in force is the smallest of the message's, the topic's and the
// subscription's, and the message reports it (seed 003).
func TestTTLTopicSubscriptionMessage(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t", DefaultMessageTimeToLive: 10 * time.Minute})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "long", DefaultMessageTimeToLive: time.Hour})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "short", DefaultMessageTimeToLive: time.Minute})
	for _, tc := range []struct {
		msgTTL time.Duration
		want   map[string]time.Duration
	}{
		{0, map[string]time.Duration{"long": 10 * time.Minute, "short": time.Minute}},
		{30 * time.Second, map[string]time.Duration{"long": 30 * time.Second, "short": 30 * time.Second}},
		{5 * time.Minute, map[string]time.Duration{"long": 5 * time.Minute, "short": time.Minute}},
	} {
		m := coretest.Text("x")
		m.TimeToLive = tc.msgTTL
		env.MustSend(t, "t", m)
		for sub, want := range tc.want {
			got := env.MustReceive(t, "t/Subscriptions/"+sub, core.ReceiveAndDelete, 1)
			if len(got) != 1 || !got[0].ExpiresAt.Equal(got[0].EnqueuedTime.Add(want)) || got[0].TimeToLive != want {
				t.Errorf("message TTL %v on %s: expires %v ttl %v, want TTL %v", tc.msgTTL, sub, got[0].ExpiresAt, got[0].TimeToLive, want)
			}
		}
	}
}

// Dead-lettered messages never expire, and expired session messages are
// dead-lettered rather than delivered.
func TestTTLDeadLetterAndSessions(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true, DeadLetteringOnMessageExpiration: true, DefaultMessageTimeToLive: time.Minute})
	env.MustSend(t, "q", &core.Message{Body: []byte("old"), SessionID: "s"})
	env.Clock.Advance(30 * time.Second)
	env.MustSend(t, "q", &core.Message{Body: []byte("new"), SessionID: "s"})
	env.Clock.Advance(31 * time.Second)
	sl, err := env.Broker.AcceptSession(coretest.Now(t), "q", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl, Max: 5, Mode: core.ReceiveAndDelete})
	if err != nil || len(got) != 1 || string(got[0].Body) != "new" {
		t.Fatalf("receive in session: %v %v, want only the unexpired message", coretest.Bodies(got), err)
	}
	core.Quiesce(env.Broker)
	env.Clock.Advance(24 * time.Hour)
	dl := env.MustReceive(t, "q/$DeadLetterQueue", core.ReceiveAndDelete, 5)
	if len(dl) != 1 || string(dl[0].Body) != "old" || !dl[0].ExpiresAt.IsZero() {
		t.Errorf("dead letters a day later: %v (expires %v), want the expired one, not expiring", coretest.Bodies(dl), dl)
	}
}
