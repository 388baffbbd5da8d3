package core_test

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// CompleteMany removes every message whose lock is live, durably (they
// stay gone after a restart), and answers each token on its own: an
// expired lock, a token listed twice and an unknown token get lock lost.
func TestCompleteMany(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", LockDuration: time.Minute})
	env.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"), coretest.Text("c"))
	early := env.MustReceive(t, "q", core.PeekLock, 1)
	env.Clock.Advance(45 * time.Second)
	late := env.MustReceive(t, "q", core.PeekLock, 2)
	env.Clock.Advance(30 * time.Second) // early's lock has expired
	toks := []core.LockToken{late[0].LockToken, early[0].LockToken, late[1].LockToken, late[0].LockToken, core.NewUUID()}
	errs := env.Broker.CompleteMany("q", toks, true)
	wantLost := []bool{false, true, false, true, true}
	for i, err := range errs {
		if lost := core.CodeOf(err) == core.CodeLockLost; lost != wantLost[i] || (!lost && err != nil) {
			t.Errorf("token %d: %v, want lock lost %v", i, err, wantLost[i])
		}
	}
	if c := env.MustCounts(t, "q"); c.Active != 1 {
		t.Errorf("active = %d after completing two of three, want 1", c.Active)
	}
	env.Restart(t)
	got := env.MustReceive(t, "q", core.PeekLock, 10)
	if len(got) != 1 || string(got[0].Body) != "a" {
		t.Fatalf("after restart received %d messages, want only a", len(got))
	}
	if errs := env.Broker.CompleteMany("missing", toks[:1], true); core.CodeOf(errs[0]) != core.CodeNotFound {
		t.Errorf("complete on a missing queue: %v, want not found", errs[0])
	}
}

// CompleteMany without durable writes the removals without waiting for
// the disk: no synced write, yet the messages are gone at once and stay
// gone after a clean restart.
func TestCompleteManyNotDurable(t *testing.T) {
	env, cs := coretest.NewCounting(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"), coretest.Text("c"))
	got := env.MustReceive(t, "q", core.PeekLock, 2)
	syncs := cs.Syncs.Load()
	for i, err := range env.Broker.CompleteMany("q", []core.LockToken{got[0].LockToken, got[1].LockToken}, false) {
		if err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	if n := cs.Syncs.Load() - syncs; n != 0 {
		t.Errorf("%d synced writes for a completion nobody waits for, want 0", n)
	}
	if c := env.MustCounts(t, "q"); c.Active != 1 {
		t.Errorf("active = %d after completing two of three, want 1", c.Active)
	}
	env.Restart(t)
	if left := env.MustReceive(t, "q", core.PeekLock, 10); len(left) != 1 || string(left[0].Body) != "c" {
		t.Fatalf("after restart received %d messages, want only c", len(left))
	}
}
