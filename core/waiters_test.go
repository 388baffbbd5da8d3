package core_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

type result struct {
	msgs []*core.Message
	err  error
}

// startReceive runs a blocking Receive and returns where its result goes.
func startReceive(ctx context.Context, b *core.Broker, path string, opts core.ReceiveOptions) <-chan result {
	ch := make(chan result, 1)
	go func() {
		msgs, err := b.Receive(ctx, path, opts)
		ch <- result{msgs, err}
	}()
	return ch
}

func TestBlockingReceiveWakesOnSend(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	ch := startReceive(t.Context(), env.Broker, "q", core.ReceiveOptions{Max: 5})
	core.WaitForWaiters(env.Broker, "q", 1)
	env.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"))
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := coretest.Bodies(r.msgs); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("woken receiver got %v, want [a b]", got)
	}
	if r.msgs[0].LockToken == (core.LockToken{}) || r.msgs[0].DeliveryCount != 1 {
		t.Errorf("hand-over did not lock: %+v", r.msgs[0])
	}
}

func TestWaitersGetDistinctMessagesInArrivalOrder(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	const n = 8
	chans := make([]<-chan result, n)
	for i := range n {
		chans[i] = startReceive(t.Context(), env.Broker, "q", core.ReceiveOptions{Mode: core.ReceiveAndDelete})
		core.WaitForWaiters(env.Broker, "q", i+1)
	}
	// One message at a time: the oldest waiter is served first (FIFO).
	for i := range n {
		env.MustSend(t, "q", coretest.Text(string(rune('a'+i))))
		r := <-chans[i]
		if r.err != nil || len(r.msgs) != 1 {
			t.Fatalf("waiter %d: %v %v", i, r.err, r.msgs)
		}
		if got, want := string(r.msgs[0].Body), string(rune('a'+i)); got != want {
			t.Errorf("waiter %d got %q, want %q (waiters are served in arrival order)", i, got, want)
		}
	}
}

func TestManyWaitersOneBatch(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	const n = 16
	var chans []<-chan result
	for i := range n {
		chans = append(chans, startReceive(t.Context(), env.Broker, "q", core.ReceiveOptions{}))
		core.WaitForWaiters(env.Broker, "q", i+1)
	}
	msgs := make([]*core.Message, n)
	for i := range msgs {
		msgs[i] = coretest.Text(string(rune('A' + i)))
	}
	env.MustSend(t, "q", msgs...)
	var got []string
	for _, ch := range chans {
		r := <-ch
		if r.err != nil || len(r.msgs) != 1 {
			t.Fatalf("waiter: %v %v", r.err, r.msgs)
		}
		got = append(got, string(r.msgs[0].Body))
	}
	sort.Strings(got)
	want := coretest.Bodies(msgs)
	if !cmp.Equal(got, want) {
		t.Errorf("waiters got %v, want each of %v exactly once", got, want)
	}
}

// A receiver whose context ends while a send serves it must not lose the
// message: it goes back, with its delivery not counted.
func TestCancelledWaiterLosesNoMessage(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	for i := range 100 {
		ctx, cancel := context.WithCancel(t.Context())
		ch := startReceive(ctx, env.Broker, "q", core.ReceiveOptions{})
		core.WaitForWaiters(env.Broker, "q", 1)
		var wg sync.WaitGroup
		wg.Go(func() { env.MustSend(t, "q", coretest.Text("m")) })
		cancel()
		wg.Wait()
		r := <-ch
		if r.err == nil && len(r.msgs) == 1 {
			env.MustSettle(t, "q", r.msgs[0].LockToken, core.Outcome{Kind: core.Complete})
		} else {
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("round %d: cancelled receive returned %v %v", i, r.err, r.msgs)
			}
			got := env.MustReceive(t, "q", core.ReceiveAndDelete, 5)
			if len(got) != 1 || got[0].DeliveryCount != 1 {
				t.Fatalf("round %d: message after a cancelled receive: %+v", i, got)
			}
		}
		if c := env.MustCounts(t, "q"); c.Total != 0 {
			t.Fatalf("round %d: counts %+v, want empty", i, c)
		}
	}
}

// A send that finds a waiting receiver hands the message over from memory:
// no storage read on the way.
func TestHandOverReadsNoStorage(t *testing.T) {
	env, cs := coretest.NewCounting(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	ch := startReceive(t.Context(), env.Broker, "q", core.ReceiveOptions{})
	core.WaitForWaiters(env.Broker, "q", 1)
	before := cs.Reads()
	env.MustSend(t, "q", coretest.Text("x"))
	r := <-ch
	if r.err != nil || len(r.msgs) != 1 {
		t.Fatal(r.err, r.msgs)
	}
	env.MustSettle(t, "q", r.msgs[0].LockToken, core.Outcome{Kind: core.Complete})
	if reads := cs.Reads() - before; reads != 0 {
		t.Errorf("send + hand-over + complete made %d storage reads, want 0", reads)
	}
}

func TestDeleteFailsWaiters(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	ch := startReceive(t.Context(), env.Broker, "q", core.ReceiveOptions{})
	core.WaitForWaiters(env.Broker, "q", 1)
	if err := env.Broker.DeleteEntity(t.Context(), "q"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; !errors.Is(r.err, core.ErrNotFound) {
		t.Errorf("receive on a deleted queue: %v, want not found", r.err)
	}
}

func TestAcceptNextSessionWaitsForSend(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q", RequiresSession: true})
	ch := make(chan *core.SessionLock, 1)
	go func() {
		sl, err := env.Broker.AcceptSession(t.Context(), "q", "")
		if err != nil {
			t.Error(err)
		}
		ch <- sl
	}()
	core.WaitForWaiters(env.Broker, "q", 1)
	env.MustSend(t, "q", &core.Message{Body: []byte("x"), SessionID: "s7"})
	sl := <-ch
	if sl == nil || sl.SessionID != "s7" {
		t.Fatalf("accepted %+v, want session s7", sl)
	}
	msgs, err := env.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{Session: sl})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive in accepted session: %v %v", err, msgs)
	}
}
