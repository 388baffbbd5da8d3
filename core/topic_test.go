package core_test

import (
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// countKeys counts the store's keys in a table (the first key byte; see
// core/keys.go: 'B' bodies, 'Q' state records).
func countKeys(t testing.TB, st storage.Store, table byte) int {
	t.Helper()
	n := 0
	if err := st.Scan([]byte{table}, nil, func(k, v []byte) (bool, error) { n++; return true, nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func corrRule(name, subject string) core.Rule {
	return core.Rule{Name: name, Filter: core.Filter{Kind: core.FilterCorrelation, Correlation: &core.CorrelationFilter{Subject: subject}}}
}

// A topic stores a message's body once for every subscription that keeps
// it unchanged, and deletes it with the last copy.
func TestTopicBodyStoredOnce(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	for _, s := range []string{"s1", "s2", "s3"} {
		env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: s, Rules: []core.Rule{corrRule("r", "yes")}})
	}
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "other", Rules: []core.Rule{corrRule("r", "no")}})
	m := coretest.Text("payload")
	m.Subject = "yes"
	env.MustSend(t, "t", m)
	if b, q := countKeys(t, env.Store, 'B'), countKeys(t, env.Store, 'Q'); b != 1 || q != 3 {
		t.Fatalf("after fan-out to 3 of 4 subscriptions: %d bodies, %d state records; want 1 and 3", b, q)
	}
	// Removing copies keeps the body until the last one goes, across a restart.
	env.MustReceive(t, "t/Subscriptions/s1", core.ReceiveAndDelete, 1)
	env.Restart(t)
	got := env.MustReceive(t, "t/Subscriptions/s2", core.PeekLock, 1)
	env.MustSettle(t, "t/Subscriptions/s2", got[0].LockToken, core.Outcome{Kind: core.Complete})
	if b := countKeys(t, env.Store, 'B'); b != 1 {
		t.Fatalf("with one copy left: %d bodies, want 1", b)
	}
	// Dead-lettering the last copy gives it a body of its own.
	got = env.MustReceive(t, "t/Subscriptions/s3", core.PeekLock, 1)
	env.MustSettle(t, "t/Subscriptions/s3", got[0].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "x"})
	if b, q := countKeys(t, env.Store, 'B'), countKeys(t, env.Store, 'Q'); b != 1 || q != 1 {
		t.Fatalf("after dead-lettering the last copy: %d bodies, %d state records; want 1 and 1", b, q)
	}
	env.MustReceive(t, "t/Subscriptions/s3/$DeadLetterQueue", core.ReceiveAndDelete, 1)
	if b, q := countKeys(t, env.Store, 'B'), countKeys(t, env.Store, 'Q'); b != 0 || q != 0 {
		t.Errorf("after the last copy went: %d bodies, %d state records; want none", b, q)
	}
}

// Deleting a subscription releases its references to shared bodies;
// abandoning with properties copies the body for that subscription only.
func TestTopicSharedBodyOnDeleteAndModify(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
	env.MustSend(t, "t", coretest.Text("m"))
	got := env.MustReceive(t, "t/Subscriptions/a", core.PeekLock, 1)
	env.MustSettle(t, "t/Subscriptions/a", got[0].LockToken, core.Outcome{Kind: core.Abandon, Properties: map[string]any{"seen": true}})
	if b := countKeys(t, env.Store, 'B'); b != 2 {
		t.Fatalf("after a modifying abandon: %d bodies, want 2 (shared + a's own)", b)
	}
	peekB, err := env.Broker.Peek(t.Context(), "t/Subscriptions/b", core.PeekOptions{Max: 1})
	if err != nil || len(peekB) != 1 || peekB[0].ApplicationProperties["seen"] != nil {
		t.Errorf("b's copy changed with a's abandon: %v %v", err, peekB)
	}
	if err := env.Broker.DeleteEntity(t.Context(), "t/Subscriptions/b"); err != nil {
		t.Fatal(err)
	}
	if b := countKeys(t, env.Store, 'B'); b != 1 {
		t.Errorf("after deleting b: %d bodies, want 1 (a's own)", b)
	}
	if err := env.Broker.DeleteEntity(t.Context(), "t"); err != nil {
		t.Fatal(err)
	}
	for _, tab := range []byte{'B', 'Q', 'E', 'R', 'N'} {
		if n := countKeys(t, env.Store, tab); n != 0 {
			t.Errorf("after deleting the topic: %d keys in table %c", n, tab)
		}
	}
}

func TestTopicSessionSubscriptionWithoutSessionId(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s", RequiresSession: true})
	env.MustSend(t, "t", coretest.Text("no session"))
	if c := env.MustCounts(t, "t/Subscriptions/s"); c.Active != 0 || c.DeadLetter != 1 {
		t.Errorf("counts %+v: a message without SessionId goes to the dead-letter subqueue", c)
	}
}

// A completion that fails to persist must not drop its reference to the
// shared body, or the retry would delete the body another subscription
// still needs.
func TestTopicFailedCompleteKeepsSharedBody(t *testing.T) {
	fs := &failingStore{}
	env := coretest.NewWith(t, func(t testing.TB, prev storage.Store) storage.Store {
		if fs.Store == nil {
			fs.Store = coretest.MemOpener(t, nil)
		}
		return fs
	})
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
	env.MustSend(t, "t", coretest.Text("shared"))
	m := env.MustReceive(t, "t/Subscriptions/a", core.PeekLock, 1)[0]
	fs.fail.Store(true)
	if err := env.Broker.Settle(t.Context(), "t/Subscriptions/a", m.LockToken, core.Outcome{Kind: core.Complete}); err == nil {
		t.Fatal("complete did not fail")
	}
	env.MustSettle(t, "t/Subscriptions/a", m.LockToken, core.Outcome{Kind: core.Complete})
	got, err := env.Broker.Receive(coretest.Now(t), "t/Subscriptions/b", core.ReceiveOptions{Mode: core.ReceiveAndDelete})
	if err != nil || len(got) != 1 || string(got[0].Body) != "shared" {
		t.Fatalf("b's copy after a's failed and retried complete: %v %v", got, err)
	}
	if n := countKeys(t, env.Store, 'B'); n != 0 {
		t.Errorf("%d bodies left", n)
	}
}
