package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// groupRouter is testRouter as a core.GroupRouter: backend i is group
// i+1, and a placement goes to the group asked for when there is one.
type groupRouter struct{ *testRouter }

func (r groupRouter) Group(_ context.Context, name string) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.placed[strings.ToLower(name)]
	if !ok {
		return 0, nil
	}
	return uint64(i) + 1, nil
}

func (r groupRouter) PlaceIn(ctx context.Context, name string, g uint64) (core.Backend, error) {
	if g == 0 {
		return r.Place(ctx, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i, placed := r.placed[strings.ToLower(name)]
	if !placed {
		i = int(g) - 1
		r.placed[strings.ToLower(name)] = i
	}
	return r.backends[i], nil
}

func (r *testRouter) placedIn(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.placed[strings.ToLower(name)]
}

// TestGroupRouterPlacesForwardingTogether: over a GroupRouter, a queue
// created to forward goes to its target's group (its name alone would
// place it in the other). Forwarding across groups goes by transfer
// (cmd/omnibus/app's TestClusterTransfer*).
func TestGroupRouterPlacesForwardingTogether(t *testing.T) {
	tr := &testRouter{placed: map[string]int{}}
	for range 2 {
		tr.backends = append(tr.backends, coretest.New(t).Broker)
	}
	b, err := core.New(core.Config{Router: groupRouter{tr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	mustCreate := func(e core.Entity) {
		t.Helper()
		if _, err := b.CreateEntity(ctx, e); err != nil {
			t.Fatalf("create %s: %v", e.Path(), err)
		}
	}
	mustCreate(core.Entity{Kind: core.KindQueue, Name: "zulu"})  // group 2
	mustCreate(core.Entity{Kind: core.KindQueue, Name: "alpha"}) // group 1
	mustCreate(core.Entity{Kind: core.KindQueue, Name: "bravo", ForwardTo: "zulu", ForwardDeadLetteredMessagesTo: "zulu"})
	if got := tr.placedIn("bravo"); got != 1 {
		t.Errorf("bravo, forwarding to zulu, is in backend %d, want 1 (zulu's)", got)
	}
	if _, err := b.Send(ctx, "bravo", coretest.Text("f1")); err != nil {
		t.Fatal(err)
	}
	if c, err := b.Counts("zulu"); err != nil || c.Active != 1 {
		t.Errorf("zulu after a send to bravo: %+v, %v", c, err)
	}

	mustCreate(core.Entity{Kind: core.KindTopic, Name: "news"}) // group 2
	mustCreate(core.Entity{Kind: core.KindSubscription, Topic: "news", Name: "t", ForwardTo: "zulu"})
}
