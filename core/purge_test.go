package core_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

func mustDelete(t *testing.T, env *coretest.Env, path string, opts core.DeleteOptions) int {
	t.Helper()
	n, err := env.Broker.DeleteMessages(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("delete %+v from %s: %v", opts, path, err)
	}
	return n
}

func texts(bodies ...string) []*core.Message {
	out := make([]*core.Message, len(bodies))
	for i, b := range bodies {
		out[i] = coretest.Text(b)
	}
	return out
}

// drainBodies receives-and-deletes everything available on path.
func drainBodies(t *testing.T, env *coretest.Env, path string) []string {
	t.Helper()
	return coretest.Bodies(env.MustReceive(t, path, core.ReceiveAndDelete, 100))
}

// A batch delete takes the oldest messages first, up to the count asked
// for, and the rest stay in order.
func TestDeleteMessagesOldestFirst(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", texts("a", "b", "c", "d", "e")...)
	if n := mustDelete(t, env, "q", core.DeleteOptions{Max: 3}); n != 3 {
		t.Fatalf("deleted %d, want 3", n)
	}
	if c := env.MustCounts(t, "q"); c.Active != 2 || c.Total != 2 {
		t.Fatalf("counts after deleting 3 of 5: %+v", c)
	}
	if n := mustDelete(t, env, "q", core.DeleteOptions{Max: 10}); n != 2 {
		t.Fatalf("second delete removed %d, want the 2 left", n)
	}
	if n := mustDelete(t, env, "q", core.DeleteOptions{Max: 10}); n != 0 {
		t.Fatalf("delete on an empty queue removed %d", n)
	}
	env.MustSend(t, "q", texts("f")...)
	if got := drainBodies(t, env, "q"); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("after the deletes the queue yields %v, want [f]", got)
	}
	mustCheck(t, env, "after deletes")
}

// Only messages enqueued strictly before the cutoff go, whether their
// bodies are in memory or only on disk (after a restart), and reading
// the enqueue times costs a few body reads, not one per message.
func TestDeleteMessagesBeforeCutoff(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			env, cs := coretest.NewCounting(t)
			env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
			var old, young []string
			for i := range 100 {
				old = append(old, fmt.Sprintf("old-%03d", i))
				young = append(young, fmt.Sprintf("young-%03d", i))
			}
			env.MustSend(t, "q", texts(old...)...)
			env.Clock.Advance(time.Minute)
			cutoff := env.Clock.Now()
			env.MustSend(t, "q", texts(young...)...)
			env.Clock.Advance(time.Minute)
			if restart {
				env.Restart(t)
			}
			reads := cs.Reads()
			if n := mustDelete(t, env, "q", core.DeleteOptions{Max: 150, Before: cutoff}); n != 100 {
				t.Fatalf("deleted %d before the cutoff, want the 100 old ones", n)
			}
			// Bisection over 150 candidates: at most 8 reads; a body per
			// message would be 150.
			if r := cs.Reads() - reads; r > 10 {
				t.Errorf("deciding 150 candidates read the store %d times", r)
			}
			// The cutoff itself is exclusive: a message enqueued exactly
			// then stays.
			if n := mustDelete(t, env, "q", core.DeleteOptions{Max: 150, Before: cutoff}); n != 0 {
				t.Fatalf("a second delete with the same cutoff removed %d", n)
			}
			reads = cs.Reads()
			if n := mustDelete(t, env, "q", core.DeleteOptions{Max: 40}); n != 40 {
				t.Fatalf("delete without a cutoff removed %d, want 40", n)
			}
			if r := cs.Reads() - reads; r > 2 {
				t.Errorf("a delete with every candidate before the cutoff read the store %d times, want 1", r)
			}
			got := drainBodies(t, env, "q")
			if len(got) != 60 || got[0] != "young-040" {
				t.Fatalf("left %d messages starting %v, want young-040..099", len(got), got[:min(1, len(got))])
			}
			mustCheck(t, env, "after deletes")
		})
	}
}

// Locked, deferred and scheduled messages are not eligible; a locked one
// can still be settled afterwards.
func TestDeleteMessagesSkipsLockedDeferredScheduled(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", texts("locked", "deferred")...)
	env.MustSend(t, "q", &core.Message{Body: []byte("scheduled"), ScheduledEnqueueTime: coretest.Epoch.Add(time.Hour)})
	env.MustSend(t, "q", texts("plain")...)
	got := env.MustReceive(t, "q", core.PeekLock, 2)
	env.MustSettle(t, "q", got[1].LockToken, core.Outcome{Kind: core.Defer})

	if n := mustDelete(t, env, "q", core.DeleteOptions{Max: 10, Before: coretest.Epoch.Add(2 * time.Hour)}); n != 1 {
		t.Fatalf("deleted %d, want only the plain message", n)
	}
	if c := env.MustCounts(t, "q"); c.Active != 1 || c.Deferred != 1 || c.Scheduled != 1 {
		t.Fatalf("counts: %+v, want the locked, deferred and scheduled messages kept", c)
	}
	env.MustSettle(t, "q", got[0].LockToken, core.Outcome{Kind: core.Complete})
	mustCheck(t, env, "after deletes")
}

// A message that was scheduled is enqueued at its scheduled time: it is
// judged by that, not by its (lower) sequence number.
func TestDeleteMessagesScheduledEnqueueTime(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", &core.Message{Body: []byte("at-1h"), ScheduledEnqueueTime: coretest.Epoch.Add(time.Hour)})
	env.Clock.Advance(10 * time.Minute)
	env.MustSend(t, "q", texts("sent-10m")...)
	env.Clock.Advance(2 * time.Hour) // the scheduled one is active now, enqueued at 1h
	core.Quiesce(env.Broker)
	if c := env.MustCounts(t, "q"); c.Active != 2 {
		t.Fatalf("counts %+v: the scheduled message did not activate", c)
	}
	// With a count of one, the delete must pass over the scheduled
	// message enqueued after the cutoff to find the eligible one.
	if n := mustDelete(t, env, "q", core.DeleteOptions{Max: 1, Before: coretest.Epoch.Add(30 * time.Minute)}); n != 1 {
		t.Fatalf("deleted %d, want the message sent at 10m", n)
	}
	if got := drainBodies(t, env, "q"); !slices.Equal(got, []string{"at-1h"}) {
		t.Fatalf("left %v, want [at-1h]", got)
	}
}

// On a session-enabled queue a delete takes one session's messages, or
// every session's when it names none, even a session someone holds.
func TestDeleteMessagesSessions(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	for _, m := range []struct{ sid, body string }{{"s1", "a"}, {"s2", "b"}, {"s1", "c"}, {"s3", "d"}} {
		env.MustSend(t, "sq", &core.Message{SessionID: m.sid, Body: []byte(m.body)})
	}
	if _, err := env.Broker.AcceptSession(t.Context(), "sq", "s3"); err != nil {
		t.Fatal(err)
	}
	if n := mustDelete(t, env, "sq", core.DeleteOptions{Max: 10, SessionID: "s1"}); n != 2 {
		t.Fatalf("deleted %d of session s1, want 2", n)
	}
	if n := mustDelete(t, env, "sq", core.DeleteOptions{Max: 10, SessionID: "nobody"}); n != 0 {
		t.Fatalf("deleted %d of a session without messages", n)
	}
	if n := mustDelete(t, env, "sq", core.DeleteOptions{Max: 1}); n != 1 {
		t.Fatalf("delete across sessions removed %d, want 1", n)
	}
	if c := env.MustCounts(t, "sq"); c.Active != 1 {
		t.Fatalf("counts %+v, want s3's message left", c)
	}
	if n := mustDelete(t, env, "sq", core.DeleteOptions{Max: 1}); n != 1 {
		t.Fatalf("the held session's message was not deleted: %d", n)
	}
	_, err := env.Broker.DeleteMessages(t.Context(), "q", core.DeleteOptions{Max: 1, SessionID: "s1"})
	if core.CodeOf(err) != core.CodeBadRequest {
		t.Fatalf("a session id on a queue without sessions: %v, want bad request", err)
	}
	mustCheck(t, env, "after deletes")
}

// The dead-letter subqueue is purged through its own path; a topic's
// subscription drops its reference to a shared body and the other
// subscriptions keep theirs.
func TestDeleteMessagesDeadLetterAndSubscription(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})

	env.MustSend(t, "q", texts("dead-1", "dead-2", "alive")...)
	for _, m := range env.MustReceive(t, "q", core.PeekLock, 2) {
		env.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.DeadLetter})
	}
	env.Restart(t) // dead-letter bodies on disk only
	if n := mustDelete(t, env, "q/$DeadLetterQueue", core.DeleteOptions{Max: 10}); n != 2 {
		t.Fatalf("deleted %d dead letters, want 2", n)
	}
	if c := env.MustCounts(t, "q"); c.Active != 1 || c.DeadLetter != 0 {
		t.Fatalf("queue counts %+v", c)
	}

	env.MustSend(t, "t", texts("shared-1", "shared-2")...)
	if n := mustDelete(t, env, subA, core.DeleteOptions{Max: 10}); n != 2 {
		t.Fatalf("deleted %d from subscription a, want 2", n)
	}
	if got := drainBodies(t, env, subB); !slices.Equal(got, []string{"shared-1", "shared-2"}) {
		t.Fatalf("subscription b yields %v after a's delete", got)
	}
	mustCheck(t, env, "after deletes")
	if _, err := env.Broker.DeleteMessages(t.Context(), "t", core.DeleteOptions{Max: 1}); core.CodeOf(err) != core.CodeBadRequest {
		t.Errorf("delete on a topic: %v, want bad request", err)
	}
}

// Bad requests are refused before anything happens, with Service Bus's
// error kinds; a delete is durable across a restart.
func TestDeleteMessagesRefusalsAndDurability(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", texts("a", "b")...)
	for _, max := range []int{0, -1, core.MaxDeleteMessages + 1} {
		if _, err := env.Broker.DeleteMessages(t.Context(), "q", core.DeleteOptions{Max: max}); core.CodeOf(err) != core.CodeBadRequest {
			t.Errorf("count %d: %v, want bad request", max, err)
		}
	}
	if _, err := env.Broker.DeleteMessages(t.Context(), "nope", core.DeleteOptions{Max: 1}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown entity: %v", err)
	}
	d, err := env.Broker.GetEntity("q")
	if err != nil {
		t.Fatal(err)
	}
	d.Status = core.StatusReceiveDisabled
	if _, err := env.Broker.UpdateEntity(t.Context(), *d); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Broker.DeleteMessages(t.Context(), "q", core.DeleteOptions{Max: 1}); core.CodeOf(err) != core.CodeEntityDisabled {
		t.Errorf("receive-disabled queue: %v, want entity disabled", err)
	}
	d.Status = core.StatusActive
	if _, err := env.Broker.UpdateEntity(t.Context(), *d); err != nil {
		t.Fatal(err)
	}
	if n := mustDelete(t, env, "q", core.DeleteOptions{Max: core.MaxDeleteMessages}); n != 2 {
		t.Fatalf("deleted %d", n)
	}
	env.Restart(t)
	if c := env.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("after a restart the deleted messages are back: %+v", c)
	}
}

// Receivers racing a delete: every message goes exactly once, to a
// receiver or to the delete.
func TestDeleteMessagesRacingReceivers(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	const total = 600
	var bodies []string
	for i := range total {
		bodies = append(bodies, fmt.Sprint(i))
	}
	env.MustSend(t, "q", texts(bodies...)...)
	var mu sync.Mutex
	seen := make(map[string]int)
	deleted := 0
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				got, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 7})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, b := range coretest.Bodies(got) {
					seen[b]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for {
			n, err := env.Broker.DeleteMessages(t.Context(), "q", core.DeleteOptions{Max: 25})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			deleted += n
			mu.Unlock()
			if n == 0 {
				return
			}
		}
	})
	wg.Wait()
	for b, n := range seen {
		if n != 1 {
			t.Errorf("message %s received %d times", b, n)
		}
	}
	if left := env.MustCounts(t, "q").Total; len(seen)+deleted+int(left) != total {
		t.Fatalf("received %d + deleted %d + left %d != %d sent", len(seen), deleted, left, total)
	}
	mustCheck(t, env, "after the race")
}

// A delete whose write fails deletes nothing and changes nothing; retried
// once the store heals, it deletes what it should (the harness of
// fault_test.go: every write failed in turn, Check, restart, drain).
func TestDeleteMessagesUnderStorageFaults(t *testing.T) {
	del := func(path string, max int) func(*testing.T, *coretest.Env, any) error {
		return func(t *testing.T, e *coretest.Env, _ any) error {
			n, err := e.Broker.DeleteMessages(t.Context(), path, core.DeleteOptions{Max: max})
			if err == nil && n != max {
				return fmt.Errorf("deleted %d, want %d", n, max)
			}
			return err
		}
	}
	for _, c := range []faultCase{
		{name: "queue", setup: func(t *testing.T, e *coretest.Env) any {
			e.MustSend(t, "q", texts("x", "y", "z")...)
			return nil
		}, op: del("q", 2), want: map[string][]string{"q": {"z"}}},
		{name: "subscription", setup: func(t *testing.T, e *coretest.Env) any {
			e.MustSend(t, "t", texts("s")...)
			return nil
		}, op: del(subA, 1), want: without(everySub("s"), subA)},
		{name: "dead-letter", setup: func(t *testing.T, e *coretest.Env) any {
			m := lockOne(t, e, "q", "q", "dl")
			e.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.DeadLetter})
			return nil
		}, op: del("q/$DeadLetterQueue", 1), want: nil},
	} {
		t.Run(c.name, func(t *testing.T) { runFaultCase(t, c) })
	}
}
