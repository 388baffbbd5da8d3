package core_test

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestStatsCountEveryOutcome drives each path that bumps a statistic a
// known number of times and checks the counters and gauges moved by
// exactly that.
func TestStatsCountEveryOutcome(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", MaxDeliveryCount: 2})
	env.MustSend(t, "q", coretest.Text("1"), coretest.Text("2"), coretest.Text("3"), coretest.Text("4"), coretest.Text("5"), coretest.Text("6"))
	env.Clock.Advance(3 * time.Second) // the end-to-end latency of the first deliveries

	got := env.MustReceive(t, "q", core.PeekLock, 5)
	env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Complete})
	if errs := env.Broker.CompleteMany("q", []core.LockToken{got[1].LockToken}, true); errs[0] != nil {
		t.Fatal(errs[0])
	}
	env.MustSettle(t, "q", got[2].LockToken, core.Outcome{Kind: core.Abandon})
	env.MustSettle(t, "q", got[3].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "bad"})
	env.MustSettle(t, "q", got[4].LockToken, core.Outcome{Kind: core.Defer})
	// Message 3 again (its second delivery), then its lock lapses: out of
	// deliveries, it is dead-lettered.
	again := env.MustReceive(t, "q", core.PeekLock, 1)
	env.Clock.Advance(2 * time.Minute)
	core.Quiesce(env.Broker)
	if c := env.MustCounts(t, "q"); c.DeadLetter != 2 {
		t.Fatalf("counts %+v: want 2 dead letters", c)
	}
	// One receive-and-delete, and one from the dead-letter subqueue.
	env.MustReceive(t, "q", core.ReceiveAndDelete, 1)
	env.MustReceive(t, "q/$DeadLetterQueue", core.ReceiveAndDelete, 1)

	st, err := env.Broker.EntityStats("q")
	if err != nil {
		t.Fatal(err)
	}
	// Completed: two completions and the two receive-and-deletes.
	want := core.EntityStats{Incoming: 6, Outgoing: 5 + 1 + 1 + 1, Completed: 2 + 2, Abandoned: 1, DeadLettered: 2, Deferred: 1, LockExpiries: 1}
	if len(again) != 1 || st.Incoming != want.Incoming || st.Outgoing != want.Outgoing || st.Completed != want.Completed ||
		st.Abandoned != want.Abandoned || st.DeadLettered != want.DeadLettered || st.Deferred != want.Deferred ||
		st.LockExpiries != want.LockExpiries || st.Expired != 0 {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if n := st.SendLatency.Count(); n != 6 {
		t.Fatalf("send latency observations %d, want 6 (one per message)", n)
	}
	// First deliveries only: the five of the first receive, after 3 s, and
	// message 6's receive-and-delete after 2 more minutes.
	e2e := st.EndToEnd
	if n := e2e.Count(); n != 6 || e2e.Sum != 5*3*time.Second+(3*time.Second+2*time.Minute) {
		t.Fatalf("end-to-end: %d observations, sum %v", n, e2e.Sum)
	}
	if i := bucketOf(e2e.Bounds, 3*time.Second); e2e.Counts[i] != 5 {
		t.Fatalf("end-to-end buckets %v: want 5 in the one holding 3s", e2e.Counts)
	}
}

func TestStatsTopicSessionsAndExpiry(t *testing.T) {
	env := coretest.New(t)
	ctx := t.Context()
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "all"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "red",
		Rules: []core.Rule{{Name: "red", Filter: core.Filter{Kind: core.FilterSQL, SQL: "color = 'red'"}}}})
	red := coretest.Text("r")
	red.ApplicationProperties = map[string]any{"color": "red"}
	env.MustSend(t, "t", red, coretest.Text("x"), coretest.Text("y"))
	for path, n := range map[string]int64{"t": 3, "t/Subscriptions/all": 3, "t/Subscriptions/red": 1} {
		if st, _ := env.Broker.EntityStats(path); st.Incoming != n {
			t.Errorf("%s: incoming %d, want %d", path, st.Incoming, n)
		}
	}

	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "s", RequiresSession: true})
	a, b := coretest.Text("a"), coretest.Text("b")
	a.SessionID, b.SessionID = "A", "B"
	env.MustSend(t, "s", a, b)
	sa, err := env.Broker.AcceptSession(ctx, "s", "A")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Broker.AcceptSession(ctx, "s", "B"); err != nil {
		t.Fatal(err)
	}
	if st, _ := env.Broker.EntityStats("s"); st.SessionsHeld != 2 {
		t.Fatalf("sessions held %d, want 2", st.SessionsHeld)
	}
	if err := env.Broker.CloseSession("s", sa); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(2 * time.Minute) // B's lock lapses
	if st, _ := env.Broker.EntityStats("s"); st.SessionsHeld != 0 || st.SessionLockExpiries != 1 {
		t.Fatalf("sessions held %d, session lock expiries %d; want 0 and 1", st.SessionsHeld, st.SessionLockExpiries)
	}

	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "ttl", DeadLetteringOnMessageExpiration: true})
	m := coretest.Text("old")
	m.TimeToLive = time.Minute
	env.MustSend(t, "ttl", m, coretest.Text("new"))
	env.Clock.Advance(2 * time.Minute)
	if got := env.MustReceive(t, "ttl", core.PeekLock, 2); len(got) != 1 || string(got[0].Body) != "new" {
		t.Fatalf("received %v", coretest.Bodies(got))
	}
	core.Quiesce(env.Broker)
	if st, _ := env.Broker.EntityStats("ttl"); st.Expired != 1 || st.DeadLettered != 1 {
		t.Fatalf("expired %d, dead-lettered %d; want 1 and 1", st.Expired, st.DeadLettered)
	}
}

func TestEachEntityReportsCountsInPathOrder(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "b"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "a"})
	env.MustSend(t, "a", coretest.Text("x"), coretest.Text("y"))
	var paths []string
	var active []int64
	env.Broker.EachEntity(func(s *core.EntitySnapshot) {
		paths = append(paths, s.Path)
		active = append(active, s.Counts.Active)
	})
	if len(paths) != 2 || paths[0] != "a" || paths[1] != "b" || active[0] != 2 || active[1] != 0 {
		t.Fatalf("got %v %v", paths, active)
	}
}

func bucketOf(bounds []time.Duration, d time.Duration) int {
	for i, b := range bounds {
		if d <= b {
			return i
		}
	}
	return len(bounds)
}
