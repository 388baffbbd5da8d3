package core_test

import (
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestClientAffineSubscription: a JMS client's subscription, named
// "<name>$<client id>$D", is created and survives a restart with what
// makes it client-affine; '$' is refused in any other subscription name,
// and a client-affine name must be the one its properties give. A
// non-durable one does not outlive a restart.
func TestClientAffineSubscription(t *testing.T) {
	env := coretest.New(t)
	ctx := t.Context()
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	aff := &core.ClientAffine{ClientID: "client-a", Durable: true}
	name := core.ClientAffineName("orders", "client-a", true)
	if name != "orders$client-a$D" {
		t.Fatalf("ClientAffineName = %q", name)
	}
	if _, err := env.Broker.CreateEntity(ctx, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: name, ClientAffine: aff}); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	global := core.ClientAffineName("workers", "", false)
	if _, err := env.Broker.CreateEntity(ctx, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: global,
		ClientAffine: &core.ClientAffine{Shared: true}}); err != nil || global != "workers$$ND" {
		t.Fatalf("create %s: %v", global, err)
	}
	for _, bad := range []core.Entity{
		{Kind: core.KindSubscription, Topic: "t", Name: "x$client-a$D"},                                                              // not client-affine
		{Kind: core.KindSubscription, Topic: "t", Name: "x$other$D", ClientAffine: aff},                                              // another client's name
		{Kind: core.KindSubscription, Topic: "t", Name: "x$client-a$ND", ClientAffine: aff},                                          // durability differs
		{Kind: core.KindSubscription, Topic: "t", Name: "x$a/b$D", ClientAffine: &core.ClientAffine{ClientID: "a/b", Durable: true}}, // '/' in the client id
		{Kind: core.KindQueue, Name: "q", ClientAffine: aff},
	} {
		if _, err := env.Broker.CreateEntity(ctx, bad); core.CodeOf(err) != core.CodeBadRequest {
			t.Errorf("create %+v: %v, want a bad request", bad, err)
		}
	}
	env.Restart(t)
	e, err := env.Broker.GetEntity("t/Subscriptions/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if e.ClientAffine == nil || *e.ClientAffine != *aff {
		t.Errorf("after a restart ClientAffine = %+v, want %+v", e.ClientAffine, aff)
	}
	// The non-durable one's consumers were on connections the restart
	// ended: it is gone.
	if _, err := env.Broker.GetEntity("t/Subscriptions/" + global); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("non-durable %s after a restart: %v, want not found", global, err)
	}
}
