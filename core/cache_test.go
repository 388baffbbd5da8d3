package core_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// The hand-over cache stays within the broker-wide budget however many
// queues hold messages, never keeps a body larger than a queue's share,
// counts each cached message's own memory (not only its body), and a
// deleted queue gives its share back.
func TestBodyCacheBudget(t *testing.T) {
	const budget = 4 << 20
	b, err := core.New(core.Config{Store: memstore.New(), Clock: clock.NewFake(coretest.Epoch),
		Limits: core.Limits{BodyCacheBytes: budget}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	body := make([]byte, 64<<10)
	for i := range 20 {
		path := fmt.Sprintf("q%d", i)
		if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: path}); err != nil {
			t.Fatal(err)
		}
		for range 8 { // 512 KiB per queue: within its own share
			if _, err := b.Send(t.Context(), path, &core.Message{Body: body}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := b.CacheBytes(); got > budget || got < budget/2 {
		t.Errorf("20 queues of 512 KiB: cache holds %d bytes, want at most the budget %d (and most of it used)", got, budget)
	}
	// Every message is still delivered whole, cached or read back.
	for i := range 20 {
		msgs, err := b.Receive(coretest.Now(t), fmt.Sprintf("q%d", i), core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 8})
		if err != nil || len(msgs) != 8 {
			t.Fatalf("q%d: %d messages, %v", i, len(msgs), err)
		}
		for _, m := range msgs {
			if !bytes.Equal(m.Body, body) {
				t.Fatalf("q%d: body of %d bytes differs", i, len(m.Body))
			}
		}
	}
	if got := b.CacheBytes(); got != 0 {
		t.Errorf("every message received: cache still counts %d bytes", got)
	}

	// A body larger than a queue's share is never held.
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "big", MaxMessageSizeInKilobytes: 100 << 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(t.Context(), "big", &core.Message{Body: make([]byte, core.QueueCacheBytes+1)}); err != nil {
		t.Fatal(err)
	}
	if got := b.CacheBytes(); got != 0 {
		t.Errorf("a %d-byte body was cached (%d bytes)", core.QueueCacheBytes+1, got)
	}

	// Tiny messages count their Message too: 1,000 of them cost far more
	// than their 2 bytes each.
	for range 10 {
		msgs := make([]*core.Message, 100)
		for j := range msgs {
			msgs[j] = &core.Message{Body: []byte("{}")}
		}
		if _, err := b.Send(t.Context(), "q1", msgs...); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.CacheBytes(); got < 1000*300 {
		t.Errorf("1,000 empty JSON messages count %d bytes of cache, less than their Message structs", got)
	}

	// A deleted queue returns what it held.
	if err := b.DeleteEntity(t.Context(), "q1"); err != nil {
		t.Fatal(err)
	}
	if got := b.CacheBytes(); got != 0 {
		t.Errorf("after deleting the queue holding them the cache counts %d bytes", got)
	}
}

// A queue's cached message is handed to its receiver without a copy; a
// later delivery of the same message (abandoned with properties to add)
// is another object, and the first receiver's message keeps its own
// lock, count and properties. A topic's message, which its
// subscriptions' copies share in the cache, is copied for each, so that
// neither receiver sees the other's lock.
func TestCachedMessagesAreNeverSharedByTwoDeliveries(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", &core.Message{Body: []byte("b"), ApplicationProperties: map[string]any{"k": "v"}})
	first := env.MustReceive(t, "q", core.PeekLock, 1)[0]
	tok := first.LockToken
	if err := env.Broker.Settle(t.Context(), "q", tok, core.Outcome{Kind: core.Abandon, Properties: map[string]any{"k": "changed"}}); err != nil {
		t.Fatal(err)
	}
	second := env.MustReceive(t, "q", core.PeekLock, 1)[0]
	if second == first || first.LockToken != tok || first.DeliveryCount != 1 || first.ApplicationProperties["k"] != "v" {
		t.Errorf("the first delivery's message changed with the second: %p %p, lock %v (was %v), count %d, k=%v",
			first, second, first.LockToken, tok, first.DeliveryCount, first.ApplicationProperties["k"])
	}
	if second.DeliveryCount != 2 || second.ApplicationProperties["k"] != "changed" {
		t.Errorf("second delivery: count %d, k=%v", second.DeliveryCount, second.ApplicationProperties["k"])
	}

	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s1"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s2"})
	env.MustSend(t, "t", &core.Message{Body: []byte("b")})
	a := env.MustReceive(t, "t/subscriptions/s1", core.PeekLock, 1)[0]
	b := env.MustReceive(t, "t/subscriptions/s2", core.PeekLock, 1)[0]
	if a == b || a.LockToken == b.LockToken {
		t.Errorf("two subscriptions' receivers share one message (%p, %p) or lock (%v, %v)", a, b, a.LockToken, b.LockToken)
	}
}
