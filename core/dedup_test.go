package core_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// failingStore fails the next Apply when armed.
type failingStore struct {
	storage.Store
	fail atomic.Bool
}

var errInjected = errors.New("injected failure")

func (f *failingStore) Apply(b *storage.Batch) error {
	if f.fail.CompareAndSwap(true, false) {
		return errInjected
	}
	return f.Store.Apply(b)
}

// A send that failed to persist does not enter the duplicate history: the
// client's retry with the same MessageId is stored.
func TestDedupForgetsFailedSend(t *testing.T) {
	fs := &failingStore{}
	env := coretest.NewWith(t, func(t testing.TB, prev storage.Store) storage.Store {
		if fs.Store == nil {
			fs.Store = coretest.MemOpener(t, nil)
		}
		return fs
	})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: time.Minute})
	fs.fail.Store(true)
	m := coretest.Text("x")
	m.MessageID = "id"
	if _, err := env.Broker.Send(t.Context(), "q", m); !errors.Is(err, errInjected) {
		t.Fatalf("send with a failing store: %v", err)
	}
	retry := coretest.Text("x")
	retry.MessageID = "id"
	seqs := env.MustSend(t, "q", retry)
	if seqs[0] == 0 {
		t.Fatal("retry of a failed send was dropped as a duplicate")
	}
	if c := env.MustCounts(t, "q"); c.Total != 1 {
		t.Errorf("counts %+v, want the one message", c)
	}
	// A failed send leaves nothing visible and the queue usable.
	fs.fail.Store(true)
	if _, err := env.Broker.Send(t.Context(), "q", coretest.Text("y")); err == nil {
		t.Fatal("send did not fail")
	}
	env.MustSend(t, "q", coretest.Text("z"))
	got := env.MustReceive(t, "q", core.ReceiveAndDelete, 10)
	if b := coretest.Bodies(got); len(b) != 2 || b[0] != "x" || b[1] != "z" {
		t.Errorf("received %v, want [x z]", b)
	}
}

func TestDedupOnTopic(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t", RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: time.Minute})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
	for range 3 {
		m := coretest.Text("x")
		m.MessageID = "same"
		env.MustSend(t, "t", m)
	}
	if c := env.MustCounts(t, "t/Subscriptions/s"); c.Total != 1 {
		t.Errorf("subscription holds %d copies of one MessageId, want 1", c.Total)
	}
	if _, err := env.Broker.CreateEntity(t.Context(), core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "d", RequiresDuplicateDetection: true}); core.CodeOf(err) != core.CodeBadRequest {
		t.Errorf("duplicate detection on a subscription: %v, want bad request", err)
	}
}
