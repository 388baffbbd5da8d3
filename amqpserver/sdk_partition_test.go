package amqpserver

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core"
)

// Partitioned entities through the Go SDK: what a client sees is a plain
// queue, topic or session queue whose sequence numbers name their
// partition, whose order holds per partition key, and whose messages
// carry their PartitionKey back (x-opt-partition-key).

func newPartitionedSDKEnv(t *testing.T) *sdkEnv {
	e := newSDKEnv(t, nil)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true, LockDuration: time.Minute})
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "psq", EnablePartitioning: true, RequiresSession: true, LockDuration: time.Minute})
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "pt", EnablePartitioning: true})
	e.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "pt", Name: "s"})
	return e
}

func TestSDKPartitionedQueue(t *testing.T) {
	e := newPartitionedSDKEnv(t)
	ctx := sdkCtx(t)
	snd := e.sender(t, "pq")
	const keys, per = 6, 4
	for i := range per {
		for k := range keys {
			key := fmt.Sprint("key", k)
			if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprintf("%s-%d", key, i)), PartitionKey: &key}, nil); err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
		}
	}
	// A batch with one key goes to that key's partition, in order.
	batch, err := snd.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	key0 := "key0"
	for i := per; i < per+3; i++ {
		if err := batch.AddMessage(&azservicebus.Message{Body: []byte(fmt.Sprintf("key0-%d", i)), PartitionKey: &key0}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := snd.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatalf("SendMessageBatch: %v", err)
	}
	total := keys*per + 3

	r := e.receiver(t, "pq", nil)
	got := receiveN(t, r, total)
	partOf := map[string]int64{}
	next := map[string]int{}
	for _, m := range got {
		key, n, _ := strings.Cut(string(m.Body), "-")
		if m.PartitionKey == nil || *m.PartitionKey != key {
			t.Errorf("%s: PartitionKey %v, want %s", m.Body, m.PartitionKey, key)
		}
		p := *m.SequenceNumber >> 48
		if old, ok := partOf[key]; ok && old != p {
			t.Errorf("%s: in partition %d, earlier ones of its key in %d", m.Body, p, old)
		}
		partOf[key] = p
		if want := fmt.Sprint(next[key]); n != want {
			t.Errorf("key %s: message %s came before %s", key, n, want)
		}
		next[key]++
	}
	// Settle across partitions: complete half, defer a few and take them
	// back by sequence number, abandon one.
	var deferred []int64
	for i, m := range got {
		switch {
		case i < 3:
			if err := r.DeferMessage(ctx, m, nil); err != nil {
				t.Fatalf("DeferMessage: %v", err)
			}
			deferred = append(deferred, *m.SequenceNumber)
		case i == 3:
			if err := r.AbandonMessage(ctx, m, nil); err != nil {
				t.Fatalf("AbandonMessage: %v", err)
			}
		default:
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("CompleteMessage %s: %v", m.Body, err)
			}
		}
	}
	def, err := r.ReceiveDeferredMessages(ctx, deferred, nil)
	if err != nil || len(def) != 3 {
		t.Fatalf("ReceiveDeferredMessages(%v): %d messages, %v", deferred, len(def), err)
	}
	for _, m := range def {
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	again := receiveN(t, r, 1)[0]
	if again.DeliveryCount != 2 || string(again.Body) != string(got[3].Body) {
		t.Fatalf("the abandoned message came back as %s (delivery %d)", again.Body, again.DeliveryCount)
	}
	if err := r.CompleteMessage(ctx, again, nil); err != nil {
		t.Fatal(err)
	}
	if c := e.MustCounts(t, "pq"); c.Total != 0 {
		t.Fatalf("left in the queue: %+v", c)
	}
}

func TestSDKPartitionedQueuePeekAndSchedule(t *testing.T) {
	e := newPartitionedSDKEnv(t)
	ctx := sdkCtx(t)
	snd := e.sender(t, "pq")
	var sent []int64
	for k := range 10 {
		key := fmt.Sprint("k", k)
		seqs, err := snd.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte(key), PartitionKey: &key}}, e.Clock.Now().Add(time.Hour), nil)
		if err != nil {
			t.Fatalf("ScheduleMessages: %v", err)
		}
		sent = append(sent, seqs...)
	}
	slices.Sort(sent)
	// The SDK pages with the last sequence number seen plus one: every
	// partition's messages, once each.
	r := e.receiver(t, "pq", nil)
	var seen []int64
	for range 20 {
		page, err := r.PeekMessages(ctx, 3, nil)
		if err != nil {
			t.Fatalf("PeekMessages: %v", err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			seen = append(seen, *m.SequenceNumber)
		}
	}
	if !slices.Equal(seen, sent) {
		t.Fatalf("peeked %v\nwant   %v", seen, sent)
	}
	if err := snd.CancelScheduledMessages(ctx, sent, nil); err != nil {
		t.Fatalf("CancelScheduledMessages: %v", err)
	}
	if c := e.MustCounts(t, "pq"); c.Total != 0 {
		t.Fatalf("after cancelling every scheduled message: %+v", c)
	}
}

func TestSDKPartitionedSessions(t *testing.T) {
	e := newPartitionedSDKEnv(t)
	ctx := sdkCtx(t)
	ids := []string{"a", "b", "c", "d", "e"}
	var pairs []string
	for i := range 3 {
		for _, id := range ids {
			pairs = append(pairs, fmt.Sprintf("%s:%s%d", id, id, i))
		}
	}
	sendSessions(t, e.sender(t, "psq"), pairs...)
	if got := listSessions(t, e.c, "", "psq", nil); !slices.Equal(got, ids) {
		t.Fatalf("sessions %v, want %v", got, ids)
	}
	seen := map[string]bool{}
	for range ids {
		sr, err := e.c.AcceptNextSessionForQueue(ctx, "psq", nil)
		if err != nil {
			t.Fatalf("AcceptNextSessionForQueue: %v", err)
		}
		id := sr.SessionID()
		if seen[id] {
			t.Fatalf("session %s accepted twice", id)
		}
		seen[id] = true
		got := receiveN(t, sr, 3)
		if b := bodies(got); !slices.Equal(b, []string{id + "0", id + "1", id + "2"}) {
			t.Errorf("session %s: %v", id, b)
		}
		for _, m := range got {
			if err := sr.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := sr.SetSessionState(ctx, []byte("done-"+id), nil); err != nil {
			t.Fatalf("SetSessionState: %v", err)
		}
		if st, err := sr.GetSessionState(ctx, nil); err != nil || string(st) != "done-"+id {
			t.Fatalf("GetSessionState: %q, %v", st, err)
		}
		if err := sr.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSDKPartitionedTopic(t *testing.T) {
	e := newPartitionedSDKEnv(t)
	ctx := sdkCtx(t)
	snd := e.sender(t, "pt")
	for k := range 8 {
		key := fmt.Sprint("k", k)
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(key), PartitionKey: &key}, nil); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.c.NewReceiverForSubscription("pt", "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	got := receiveN(t, r, 8)
	parts := map[int64]bool{}
	for _, m := range got {
		parts[*m.SequenceNumber>>48] = true
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(parts) < 2 {
		t.Errorf("8 keys landed in %d partition(s)", len(parts))
	}
}

// TestSDKPartitionKeyBadInput sends what Service Bus refuses: a partition
// key over 128 characters, and one that differs from the SessionId. Each
// is refused with amqp:not-allowed (the SDKs' InvalidOperation), nothing
// is stored, and the same sender goes on working.
func TestSDKPartitionKeyBadInput(t *testing.T) {
	e := newPartitionedSDKEnv(t)
	ctx := sdkCtx(t)
	long := strings.Repeat("p", 129)
	sid, other := "s1", "s2"
	for _, tc := range []struct {
		name, to string
		m        *azservicebus.Message
	}{
		{"long partition key", "pq", &azservicebus.Message{Body: []byte("x"), PartitionKey: &long}},
		{"partition key is not the session id", "psq", &azservicebus.Message{Body: []byte("x"), SessionID: &sid, PartitionKey: &other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snd := e.sender(t, tc.to)
			err := snd.SendMessage(ctx, tc.m, nil)
			var sbErr *azservicebus.Error
			if err == nil || !strings.Contains(err.Error(), "amqp:not-allowed") && !errors.As(err, &sbErr) {
				t.Fatalf("SendMessage: %v, want amqp:not-allowed", err)
			}
			if !strings.Contains(err.Error(), "amqp:not-allowed") {
				t.Errorf("SendMessage: %v, want amqp:not-allowed", err)
			}
			if c := e.MustCounts(t, tc.to); c.Total != 0 {
				t.Fatalf("a refused message was stored: %+v", c)
			}
			ok := &azservicebus.Message{Body: []byte("fine"), SessionID: &sid}
			if err := snd.SendMessage(ctx, ok, nil); err != nil {
				t.Fatalf("the next send on the same sender: %v", err)
			}
		})
	}
}
