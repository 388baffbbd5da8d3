package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// testRouter places queues and topics in two brokers by their first
// letter (a–m, n–z) and records the placements, as a cluster's meta group
// would.
type testRouter struct {
	backends []*core.Broker
	mu       sync.Mutex
	placed   map[string]int
	down     bool // every backend is out of reach
}

func (r *testRouter) Route(name string) (core.Backend, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "the group is moving"}
	}
	i, ok := r.placed[strings.ToLower(name)]
	if !ok {
		return nil, &core.Error{Code: core.CodeNotFound, Msg: "no entity " + name}
	}
	return r.backends[i], nil
}

func (r *testRouter) Place(_ context.Context, name string) (core.Backend, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, &core.Error{Code: core.CodeServerBusy, Msg: "no meta leader"}
	}
	i := 0
	if strings.ToLower(name)[0] > 'm' {
		i = 1
	}
	r.placed[strings.ToLower(name)] = i
	return r.backends[i], nil
}

func (r *testRouter) All() ([]core.Backend, error) {
	return []core.Backend{r.backends[0], r.backends[1]}, nil
}

func (r *testRouter) Local() []core.Backend { all, _ := r.All(); return all }

func newRouted(t *testing.T) (*core.Broker, *testRouter) {
	t.Helper()
	r := &testRouter{placed: map[string]int{}}
	for range 2 {
		r.backends = append(r.backends, coretest.New(t).Broker)
	}
	b, err := core.New(core.Config{Router: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, r
}

func TestRoutedBrokerServesEveryBackend(t *testing.T) {
	b, r := newRouted(t)
	ctx := t.Context()
	for _, e := range []core.Entity{
		{Kind: core.KindQueue, Name: "alpha"},
		{Kind: core.KindQueue, Name: "zulu", RequiresSession: true},
		{Kind: core.KindTopic, Name: "news"},
		{Kind: core.KindSubscription, Topic: "news", Name: "all"},
	} {
		if _, err := b.CreateEntity(ctx, e); err != nil {
			t.Fatalf("create %s: %v", e.Path(), err)
		}
	}
	// Each entity is in the backend its name placed it in, and only there.
	if _, err := r.backends[0].GetEntity("alpha"); err != nil {
		t.Errorf("alpha is not in backend 0: %v", err)
	}
	if _, err := r.backends[1].GetEntity("news/Subscriptions/all"); err != nil {
		t.Errorf("news's subscription is not with its topic in backend 1: %v", err)
	}
	if _, err := r.backends[1].GetEntity("alpha"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("alpha is in backend 1 too: %v", err)
	}
	qs, err := b.ListEntities(core.KindQueue, "")
	if err != nil || len(qs) != 2 || qs[0].Name != "alpha" || qs[1].Name != "zulu" {
		t.Fatalf("listing merges the backends in order: %v, %v", qs, err)
	}

	if _, err := b.Send(ctx, "alpha", coretest.Text("a1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, "news", coretest.Text("n1")); err != nil {
		t.Fatal(err)
	}
	got, err := b.Receive(coretest.Now(t), "alpha", core.ReceiveOptions{Max: 5})
	if err != nil || len(got) != 1 {
		t.Fatalf("receive alpha: %v, %v", got, err)
	}
	if err := b.Settle(ctx, "alpha", got[0].LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatal(err)
	}
	sub, err := b.Receive(coretest.Now(t), "news/Subscriptions/all", core.ReceiveOptions{Max: 5, Mode: core.ReceiveAndDelete})
	if err != nil || len(sub) != 1 || string(sub[0].Body) != "n1" {
		t.Fatalf("receive from the subscription: %v, %v", sub, err)
	}
	// Sessions through the routed broker.
	if _, err := b.Send(ctx, "zulu", &core.Message{Body: []byte("z"), SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	sl, err := b.AcceptSession(ctx, "zulu", "")
	if err != nil || sl.SessionID != "s" {
		t.Fatalf("accept: %v, %v", sl, err)
	}
	if err := b.SetSessionState(ctx, "zulu", sl, []byte("st")); err != nil {
		t.Fatal(err)
	}
	if st, err := r.backends[1].GetSessionState(ctx, "zulu", sl); err != nil || string(st) != "st" {
		t.Fatalf("the session state is in zulu's backend: %q, %v", st, err)
	}
	// A transaction binds to its entity's backend.
	txn := b.BeginTxn()
	if err := txn.Send("alpha", "", []*core.Message{coretest.Text("t1")}); err != nil {
		t.Fatal(err)
	}
	if err := txn.Send("zulu", "", []*core.Message{{Body: []byte("x"), SessionID: "s"}}); !errors.Is(err, core.ErrTxnSpansEntities) {
		t.Fatalf("a second entity in one transaction: %v", err)
	}
	if txn.Entity() != "alpha" || txn.Bytes() == 0 || txn.Deadline().IsZero() {
		t.Errorf("entity %q, bytes %d, deadline %v", txn.Entity(), txn.Bytes(), txn.Deadline())
	}
	if c, _ := b.Counts("alpha"); c.Active != 0 {
		t.Fatalf("a transaction's send is visible before the commit")
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if c, _ := r.backends[0].Counts("alpha"); c.Active != 1 {
		t.Fatalf("after the commit alpha has %+v", c)
	}
	var seen []string
	b.EachEntity(func(s *core.EntitySnapshot) { seen = append(seen, s.Path) })
	slices.Sort(seen)
	if want := []string{"alpha", "news", "news/Subscriptions/all", "zulu"}; !slices.Equal(seen, want) {
		t.Errorf("EachEntity saw %v, want %v", seen, want)
	}
	if err := b.DeleteEntity(ctx, "news"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.backends[1].GetEntity("news"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("news survived its deletion: %v", err)
	}
}

func TestRoutedBrokerRefusesWhatItCannotReach(t *testing.T) {
	b, r := newRouted(t)
	ctx := t.Context()
	if _, err := b.Send(ctx, "nowhere", coretest.Text("x")); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("send to an entity placed nowhere: %v, want not found", err)
	}
	r.down = true
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q"}); !errors.Is(err, core.ErrServerBusy) {
		t.Errorf("create while placement is down: %v, want server busy", err)
	}
	ctx2, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := b.Receive(ctx2, "q", core.ReceiveOptions{}); !errors.Is(err, core.ErrServerBusy) {
		t.Errorf("receive while the group moves: %v, want server busy", err)
	}
}

// TestRoutedSettlementRefusalIsLockLost: a routed broker reports a
// settlement its backend could not carry out for now (the group moving,
// its leader out of reach) as a lost lock, never as "retry": the lock
// lived in a broker that is gone, and the Go SDK would take the answer to
// a retried disposition as a success without asking again.
func TestRoutedSettlementRefusalIsLockLost(t *testing.T) {
	b, r := newRouted(t)
	ctx := t.Context()
	if _, err := b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, "q", coretest.Text("x"), coretest.Text("y")); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 2})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %d messages, %v", len(msgs), err)
	}
	r.down = true // the entity's group is changing leaders
	if err := b.Settle(ctx, "q", msgs[0].LockToken, core.Outcome{Kind: core.Complete}); !errors.Is(err, core.ErrLockLost) {
		t.Errorf("settle while the group moves: %v, want lock lost", err)
	}
	for _, err := range b.CompleteMany("q", []core.LockToken{msgs[1].LockToken}, true) {
		if !errors.Is(err, core.ErrLockLost) {
			t.Errorf("complete while the group moves: %v, want lock lost", err)
		}
	}
	// A settlement the backend does answer keeps its own outcome.
	r.down = false
	if err := b.Settle(ctx, "q", msgs[0].LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Errorf("settle once the group is back: %v", err)
	}
	if err := b.Settle(ctx, "q", msgs[0].LockToken, core.Outcome{Kind: core.Complete}); !errors.Is(err, core.ErrLockLost) {
		t.Errorf("settling twice: %v, want lock lost", err)
	}
}
