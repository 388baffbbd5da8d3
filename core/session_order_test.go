package core_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// A receive still waiting under a session lock that has ended (the front
// closes the session when its link detaches, before the receive's
// goroutine notices its cancellation) must take nothing: before, it took
// the session's next message under the next holder's lock, the front gave
// it back, and the new holder was handed the messages behind it first
// (the cluster soak's "first delivered out of order within a session").
func TestStaleSessionReceiveTakesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reopen func(t *testing.T, env *coretest.Env, old *core.SessionLock) *core.SessionLock
	}{
		{"closed then accepted again", func(t *testing.T, env *coretest.Env, old *core.SessionLock) *core.SessionLock {
			if err := env.Broker.CloseSession("q", old); err != nil {
				t.Fatal(err)
			}
			return mustAccept(t, env, "s")
		}},
		{"lock expired then accepted again", func(t *testing.T, env *coretest.Env, old *core.SessionLock) *core.SessionLock {
			env.Clock.Advance(time.Minute + time.Second) // past the default lock duration
			return mustAccept(t, env, "s")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := coretest.New(t)
			env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true})
			env.MustSend(t, "q", &core.Message{Body: []byte("0"), SessionID: "s"})
			old := mustAccept(t, env, "s")
			// The old holder has "0" locked when its session ends: it goes
			// back to the session, which lives on (not pruned).
			if msgs, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: old}); err != nil || len(msgs) != 1 {
				t.Fatalf("first receive: %v %v", msgs, err)
			}
			stale := startReceive(t.Context(), env.Broker, "q", core.ReceiveOptions{Max: 10, Session: old})
			core.WaitForWaiters(env.Broker, "q", 1)
			sl := tc.reopen(t, env, old)
			env.MustSend(t, "q", &core.Message{Body: []byte("1"), SessionID: "s"})
			env.MustSend(t, "q", &core.Message{Body: []byte("2"), SessionID: "s"})
			msgs, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Max: 10, Session: sl})
			if err != nil {
				t.Fatal(err)
			}
			if got := coretest.Bodies(msgs); !cmp.Equal(got, []string{"0", "1", "2"}) {
				t.Errorf("the session's holder got %v, want [0 1 2]", got)
			}
			r := <-stale
			if len(r.msgs) != 0 {
				t.Errorf("a receive under the ended session lock took %v", coretest.Bodies(r.msgs))
			}
			if !errors.Is(r.err, core.ErrSessionLockLost) {
				t.Errorf("receive under the ended session lock: %v, want session lock lost", r.err)
			}
		})
	}
}

func mustAccept(t *testing.T, env *coretest.Env, id string) *core.SessionLock {
	t.Helper()
	sl, err := env.Broker.AcceptSession(t.Context(), "q", id)
	if err != nil {
		t.Fatal(err)
	}
	return sl
}
