package core_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// Concurrent receivers accepting the next session each get a different
// session, and within a session messages come in order.
func TestConcurrentAcceptNextAndSessionFIFO(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true})
	const sessions, per = 20, 5
	var msgs []*core.Message
	for i := range per {
		for s := range sessions {
			msgs = append(msgs, &core.Message{Body: fmt.Appendf(nil, "%d", i), SessionID: fmt.Sprintf("s%02d", s)})
		}
	}
	env.MustSend(t, "q", msgs...)
	var mu sync.Mutex
	owner := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for {
				sl, err := env.Broker.AcceptSession(coretest.Now(t), "q", "")
				if err != nil {
					return // timeout: none left
				}
				mu.Lock()
				if _, dup := owner[sl.SessionID]; dup {
					t.Errorf("session %s accepted twice", sl.SessionID)
				}
				owner[sl.SessionID] = w
				mu.Unlock()
				var bodies []string
				for {
					got, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl, Mode: core.ReceiveAndDelete, Max: 2})
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						break
					}
					bodies = append(bodies, coretest.Bodies(got)...)
				}
				if want := []string{"0", "1", "2", "3", "4"}; !cmp.Equal(bodies, want) {
					t.Errorf("session %s delivered %v, want %v", sl.SessionID, bodies, want)
				}
				// Keep the session locked: done with it.
			}
		})
	}
	wg.Wait()
	if len(owner) != sessions {
		t.Errorf("%d sessions accepted, want %d", len(owner), sessions)
	}
}

// Sessions on a subscription work as on a queue.
func TestSessionOnSubscription(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s", RequiresSession: true})
	env.MustSend(t, "t", &core.Message{Body: []byte("a"), SessionID: "x"}, &core.Message{Body: []byte("b"), SessionID: "y"})
	ids, err := env.Broker.ListSessions(t.Context(), "t/Subscriptions/s", time.Time{})
	if err != nil || !cmp.Equal(ids, []string{"x", "y"}) {
		t.Fatalf("ListSessions: %v %v", ids, err)
	}
	sl, err := env.Broker.AcceptSession(coretest.Now(t), "t/Subscriptions/s", "y")
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.Broker.Receive(coretest.Now(t), "t/Subscriptions/s", core.ReceiveOptions{Session: sl, Max: 5})
	if err != nil || !cmp.Equal(coretest.Bodies(got), []string{"b"}) {
		t.Errorf("receive in session y: %v %v", coretest.Bodies(got), err)
	}
}

// A session lock held by one receiver is not usable by another's forged
// lock, and a closed session's lock is dead.
func TestSessionLockIdentity(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true})
	env.MustSend(t, "q", &core.Message{Body: []byte("a"), SessionID: "s"})
	sl, err := env.Broker.AcceptSession(t.Context(), "q", "s")
	if err != nil {
		t.Fatal(err)
	}
	forged := &core.SessionLock{SessionID: "s", Token: core.NewUUID()}
	if _, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: forged}); core.CodeOf(err) != core.CodeSessionLockLost {
		t.Errorf("receive with a forged session lock: %v, want session lock lost", err)
	}
	if err := env.Broker.CloseSession("q", sl); err != nil {
		t.Fatal(err)
	}
	if err := env.Broker.SetSessionState(t.Context(), "q", sl, []byte("x")); core.CodeOf(err) != core.CodeSessionLockLost {
		t.Errorf("set state after close: %v, want session lock lost", err)
	}
}
