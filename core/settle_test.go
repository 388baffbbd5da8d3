package core_test

import (
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

func newFailingEnv(t *testing.T) (*coretest.Env, *failingStore) {
	fs := &failingStore{}
	env := coretest.NewWith(t, func(t testing.TB, prev storage.Store) storage.Store {
		if fs.Store == nil {
			fs.Store = coretest.MemOpener(t, nil)
		}
		return fs
	})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	return env, fs
}

// A settlement that fails to persist keeps the lock: the receiver can
// retry it.
func TestSettleFailureKeepsLock(t *testing.T) {
	props := map[string]any{"k": "v"}
	for _, o := range []core.Outcome{
		{Kind: core.Complete}, {Kind: core.Defer}, {Kind: core.DeadLetter},
		{Kind: core.Abandon, Properties: props}, {Kind: core.Defer, Properties: props},
	} {
		env, fs := newFailingEnv(t)
		env.MustSend(t, "q", coretest.Text("m"))
		m := env.MustReceive(t, "q", core.PeekLock, 1)[0]
		fs.fail.Store(true)
		if err := env.Broker.Settle(t.Context(), "q", m.LockToken, o); !errors.Is(err, errInjected) {
			t.Fatalf("%+v with a failing store: %v", o, err)
		}
		if err := env.Broker.Settle(t.Context(), "q", m.LockToken, o); err != nil {
			t.Errorf("retrying %+v after a storage failure: %v", o, err)
		}
		if c := env.MustCounts(t, "q"); c.Total != 1 && o.Kind != core.Complete {
			t.Errorf("after %+v: counts %+v", o, c)
		}
	}
}

// A receive-and-delete whose delete fails hands nothing out and leaves the
// message as it was.
func TestReceiveAndDeleteFailureLosesNothing(t *testing.T) {
	env, fs := newFailingEnv(t)
	env.MustSend(t, "q", coretest.Text("m"))
	fs.fail.Store(true)
	if got, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete}); !errors.Is(err, errInjected) || len(got) != 0 {
		t.Fatalf("receive-and-delete with a failing store: %v %v", got, err)
	}
	got := env.MustReceive(t, "q", core.ReceiveAndDelete, 1)
	if len(got) != 1 || got[0].DeliveryCount != 1 {
		t.Fatalf("after a failed receive: %+v", got)
	}
}

func TestSettleUnknownOutcome(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", coretest.Text("m"))
	m := env.MustReceive(t, "q", core.PeekLock, 1)[0]
	if err := env.Broker.Settle(t.Context(), "q", m.LockToken, core.Outcome{Kind: 99}); core.CodeOf(err) != core.CodeBadRequest {
		t.Fatalf("unknown outcome: %v, want bad request", err)
	}
	env.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.Complete})
}
