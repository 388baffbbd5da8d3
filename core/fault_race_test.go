package core_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// Receivers on four subscriptions of one topic complete, abandon,
// dead-letter and receive-and-delete their copies of the same messages at
// once while every third write fails: releases of a shared body's
// references overlap and some fail after another dropped the last one.
// Each message must end up exactly once per subscription, every body
// with its last copy, and memory must equal the store.
func TestConcurrentSettlementsUnderFaults(t *testing.T) {
	const n = 150
	env, fs := coretest.NewFault(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	subs := []string{"a", "b", "c", "d"}
	for _, s := range subs {
		env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: s, MaxDeliveryCount: 1000})
	}
	for i := range n {
		env.MustSend(t, "t", coretest.Text(fmt.Sprint(i)))
	}
	fs.FailEvery(3, fmt.Errorf("test disk: %w", storage.ErrNoSpace))

	var wg sync.WaitGroup
	results := make([]map[string]int, len(subs))
	for i, s := range subs {
		path := "t/Subscriptions/" + s
		results[i] = make(map[string]int)
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := results[i]
			for step := 0; len(done) < n; step++ {
				if step > 100*n {
					t.Errorf("%s: no progress after %d steps (%d of %d done)", path, step, len(done), n)
					return
				}
				mode := core.PeekLock
				if i == 3 {
					mode = core.ReceiveAndDelete
				}
				got, err := env.Broker.Receive(coretest.Now(t), path, core.ReceiveOptions{Mode: mode, Max: 5})
				if err != nil {
					continue // a refused receive-and-delete: nothing moved
				}
				for j, m := range got {
					if mode == core.ReceiveAndDelete {
						done[string(m.Body)]++
						continue
					}
					o := core.Outcome{Kind: core.Complete}
					switch {
					case i == 1 && (step+j)%3 == 0:
						o = core.Outcome{Kind: core.Abandon, Properties: map[string]any{"seen": int64(step)}}
					case i == 2:
						o = core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "test"}
					}
					for {
						err := env.Broker.Settle(t.Context(), path, m.LockToken, o)
						if err == nil {
							break
						}
						if core.CodeOf(err) != core.CodeServerBusy {
							t.Errorf("%s: settle: %v", path, err)
							return
						}
					}
					if o.Kind != core.Abandon {
						done[string(m.Body)]++
					}
				}
			}
		}()
	}
	wg.Wait()
	fs.Heal()
	core.Quiesce(env.Broker)
	for i, s := range subs {
		for body, k := range results[i] {
			if k != 1 {
				t.Errorf("%s: message %s settled %d times", s, body, k)
			}
		}
	}
	mustCheck(t, env, "after the settlements")
	dead := env.MustReceive(t, "t/Subscriptions/c/$DeadLetterQueue", core.ReceiveAndDelete, n+1)
	if len(dead) != n {
		t.Errorf("%d dead letters in c, want %d", len(dead), n)
	}
	mustCheck(t, env, "after draining the dead letters")
	if n := core.PendingOrphans(env.Broker); n != 0 {
		t.Errorf("%d shared bodies still wait for deletion after writes committed", n)
	}
	for _, s := range subs {
		if c := env.MustCounts(t, "t/Subscriptions/"+s); c.Total != 0 {
			t.Errorf("%s still counts %+v", s, c)
		}
	}
}

// The interleaving the reference protocol exists for, forced: a's
// completion is inside the store when b's completes (dropping the last
// reference to the shared body), then a's fails. The body must stay for
// a's copy, and go with it when a completes again.
func TestSharedBodySurvivesAFailureAfterTheLastRelease(t *testing.T) {
	env, fs := coretest.NewFault(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
	env.MustSend(t, "t", coretest.Text("x"))
	ma := env.MustReceive(t, subA, core.PeekLock, 1)[0]
	mb := env.MustReceive(t, subB, core.PeekLock, 1)[0]

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fault := fmt.Errorf("test disk: %w", storage.ErrUnavailable)
	fs.OnApply(func(*storage.Batch) error {
		held := false
		once.Do(func() { held = true })
		if !held {
			return nil
		}
		close(entered)
		<-release
		return fault
	})
	aDone := make(chan error, 1)
	go func() { aDone <- env.Broker.Settle(t.Context(), subA, ma.LockToken, core.Outcome{Kind: core.Complete}) }()
	<-entered
	env.MustSettle(t, subB, mb.LockToken, core.Outcome{Kind: core.Complete})
	close(release)
	if err := <-aDone; core.CodeOf(err) != core.CodeServerBusy {
		t.Fatalf("a's completion: %v, want server-busy", err)
	}
	fs.Heal()
	mustCheck(t, env, "after a failed and b committed")
	got, err := env.Broker.Peek(t.Context(), subA, core.PeekOptions{Max: 1})
	if err != nil || len(got) != 1 || string(got[0].Body) != "x" {
		t.Fatalf("a's copy after the interleaving: %v %v", got, err)
	}
	env.MustSettle(t, subA, ma.LockToken, core.Outcome{Kind: core.Complete})
	mustCheck(t, env, "after a completed again (no body left)")
}

// Two completions of one body's copies overlap and both commit: the last
// to end deletes the body apart. When the store refuses that deletion the
// body is kept on a list (Check knows it) and deleted after the next
// write that commits.
func TestOrphanBodyDeletionIsRetried(t *testing.T) {
	env, fs := coretest.NewFault(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "t", coretest.Text("x"))
	ma := env.MustReceive(t, subA, core.PeekLock, 1)[0]
	mb := env.MustReceive(t, subB, core.PeekLock, 1)[0]

	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	fs.OnApply(func(*storage.Batch) error {
		switch calls.Add(1) {
		case 1: // a's completion: held until b's is done
			close(entered)
			<-release
		case 3: // the body's deletion apart, by a, the last to end
			return fmt.Errorf("test disk: %w", storage.ErrUnavailable)
		}
		return nil
	})
	aDone := make(chan error, 1)
	go func() { aDone <- env.Broker.Settle(t.Context(), subA, ma.LockToken, core.Outcome{Kind: core.Complete}) }()
	<-entered
	env.MustSettle(t, subB, mb.LockToken, core.Outcome{Kind: core.Complete})
	close(release)
	if err := <-aDone; err != nil {
		t.Fatalf("a's completion: %v", err)
	}
	fs.Heal()
	if n := core.PendingOrphans(env.Broker); n != 1 {
		t.Fatalf("%d body deletions pending, want 1", n)
	}
	mustCheck(t, env, "with the deletion pending")
	env.MustSend(t, "q", coretest.Text("next write"))
	if n := core.PendingOrphans(env.Broker); n != 0 {
		t.Fatalf("%d body deletions still pending after a write committed", n)
	}
	mustCheck(t, env, "after the retry")
}
