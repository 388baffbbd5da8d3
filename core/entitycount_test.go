package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestMaxEntitiesCountsQueuesAndTopics: with Limits.MaxEntities 2, a
// queue and a topic fill the namespace: a third queue or topic is
// refused with Service Bus's quota error and nothing is created, while
// subscriptions (not counted) still are; deleting one makes room; the
// count survives a restart, where nothing stored is refused; SetQuotas
// changes the cap at run time.
func TestMaxEntitiesCountsQueuesAndTopics(t *testing.T) {
	env := coretest.NewWithLimits(t, coretest.MemOpener, core.Limits{MaxEntities: 2})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q1"})
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	for _, name := range []string{"s1", "s2", "s3"} {
		env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: name})
	}
	refused := func(kind core.EntityKind, name string) {
		t.Helper()
		_, err := env.Broker.CreateEntity(t.Context(), core.Entity{Kind: kind, Name: name})
		if !errors.Is(err, core.ErrQuotaExceeded) || !strings.Contains(err.Error(),
			"The maximum entity count of 2 has been reached or exceeded for namespace 'omnibus': it holds 2 queues and topics.") {
			t.Fatalf("creating %s %q in a full namespace: %v, want the entity count quota", kind, name, err)
		}
		if _, err := env.Broker.GetEntity(name); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("the refused %s %q exists (%v)", kind, name, err)
		}
	}
	refused(core.KindQueue, "q2")
	refused(core.KindTopic, "t2")
	// An entity that exists is still reported as existing, full or not.
	if _, err := env.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q1"}); !errors.Is(err, core.ErrEntityExists) {
		t.Errorf("creating q1 again: %v, want entity exists", err)
	}
	if err := env.Broker.DeleteEntity(t.Context(), "q1"); err != nil {
		t.Fatal(err)
	}
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q2"})
	refused(core.KindQueue, "q3")

	// A restart recovers the count.
	env.Restart(t)
	refused(core.KindQueue, "q3")
	// Lowered below what is stored: nothing is lost, nothing new fits;
	// raised: room again.
	env.Broker.SetQuotas(1, 0)
	if qs, err := env.Broker.ListEntities(core.KindQueue, ""); err != nil || len(qs) != 1 {
		t.Errorf("queues after lowering the cap: %d (%v)", len(qs), err)
	}
	env.Broker.SetQuotas(3, 0)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q3"})
	// Zero: no cap.
	env.Broker.SetQuotas(0, 0)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q4"})
}

// TestSetQuotasChangesTheEntitySizeCap: SetQuotas' maxEntityBytes caps
// every entity's size from the next send on.
func TestSetQuotasChangesTheEntitySizeCap(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.Broker.SetQuotas(0, mib)
	n, err := fillUntilFull(t, env, "q", 1024)
	checkQuotaErr(t, err, "Queue", "q")
	env.Broker.SetQuotas(0, 2*mib)
	if _, err := env.Broker.Send(t.Context(), "q", kib()); err != nil {
		t.Fatalf("a send after the cap was raised (%d messages stored): %v", n, err)
	}
}
