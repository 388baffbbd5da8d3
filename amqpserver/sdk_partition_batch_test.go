package amqpserver

import (
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core"
)

// A batch (SendMessageBatch: one transfer in the batched message format)
// goes to one partition, so Service Bus refuses one whose messages do not
// share a partition key on a partitioned entity, with amqp:not-allowed
// (core.CheckBatchKeys, core/README.md). The Go SDK sends it as every SDK
// does: its first message's properties and annotations on the envelope,
// each message its own MessageId.

// mustBatch makes a batch of msgs on snd.
func mustBatch(t *testing.T, snd *azservicebus.Sender, msgs ...*azservicebus.Message) *azservicebus.MessageBatch {
	t.Helper()
	b, err := snd.NewMessageBatch(sdkCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := b.AddMessage(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// keyed is a message with partition key pk and session id sid, each set
// when not "".
func keyed(body, pk, sid string) *azservicebus.Message {
	m := &azservicebus.Message{Body: []byte(body)}
	if pk != "" {
		m.PartitionKey = &pk
	}
	if sid != "" {
		m.SessionID = &sid
	}
	return m
}

func TestSDKPartitionedBatchKeys(t *testing.T) {
	e := newPartitionedSDKEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pdq", EnablePartitioning: true, RequiresDuplicateDetection: true})
	const (
		plain = "Batching brokered messages with distinct SessionId or PartitionKey is not supported for an entity with partitioning enabled."
		dedup = "Batching brokered messages with distinct SessionId, PartitionKey, or MessageId is not supported for an entity with partitioning and duplicate detection enabled."
	)
	for _, tc := range []struct {
		name, to string
		msgs     []*azservicebus.Message
		refused  string // the error's text, "" when the batch is taken
	}{
		{"two partition keys", "pq", []*azservicebus.Message{keyed("a", "red", ""), keyed("b", "blue", "")}, plain},
		{"a key and none", "pq", []*azservicebus.Message{keyed("a", "red", ""), keyed("b", "", "")}, plain},
		{"none and a key", "pq", []*azservicebus.Message{keyed("a", "", ""), keyed("b", "red", "")}, plain},
		{"two session ids", "psq", []*azservicebus.Message{keyed("a", "", "s1"), keyed("b", "", "s2")}, plain},
		{"two keys on a partitioned topic", "pt", []*azservicebus.Message{keyed("a", "red", ""), keyed("b", "blue", "")}, plain},
		{"one partition key", "pq", []*azservicebus.Message{keyed("a", "red", ""), keyed("b", "red", ""), keyed("c", "red", "")}, ""},
		{"no keys", "pq", []*azservicebus.Message{keyed("a", "", ""), keyed("b", "", "")}, ""},
		{"one session id", "psq", []*azservicebus.Message{keyed("a", "", "s1"), keyed("b", "", "s1")}, ""},
		{"a session id equal to the other's partition key", "pq", []*azservicebus.Message{keyed("a", "", "k"), keyed("b", "k", "")}, ""},
		// With duplicate detection a message without a key is partitioned
		// by its MessageId, and the SDK gives each message its own.
		{"no keys, duplicate detection", "pdq", []*azservicebus.Message{keyed("a", "", ""), keyed("b", "", "")}, dedup},
		{"one partition key, duplicate detection", "pdq", []*azservicebus.Message{keyed("a", "red", ""), keyed("b", "red", "")}, ""},
		{"two partition keys, not partitioned", "q", []*azservicebus.Message{keyed("a", "red", ""), keyed("b", "blue", "")}, ""},
		{"two session ids, not partitioned", "sq", []*azservicebus.Message{keyed("a", "", "s1"), keyed("b", "", "s2")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := sdkCtx(t)
			snd := e.sender(t, tc.to)
			stored := tc.to // where a message sent to tc.to is counted
			if tc.to == "pt" {
				stored = "pt/subscriptions/s"
			}
			before := e.MustCounts(t, stored).Total
			err := snd.SendMessageBatch(ctx, mustBatch(t, snd, tc.msgs...), nil)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("SendMessageBatch: %v, want it taken", err)
				}
				if got := e.MustCounts(t, stored).Total - before; got != int64(len(tc.msgs)) {
					t.Fatalf("%d messages stored, want %d", got, len(tc.msgs))
				}
				return
			}
			if err == nil {
				t.Fatalf("SendMessageBatch was taken, want amqp:not-allowed: %s", tc.refused)
			}
			if !strings.Contains(err.Error(), "amqp:not-allowed") || !strings.Contains(err.Error(), tc.refused) {
				t.Fatalf("SendMessageBatch: %v\nwant amqp:not-allowed: %s", err, tc.refused)
			}
			if got := e.MustCounts(t, stored).Total; got != before {
				t.Fatalf("the refused batch stored %d messages", got-before)
			}
			// The link goes on: a single send and a batch of one key.
			if err := snd.SendMessage(ctx, tc.msgs[1], nil); err != nil {
				t.Fatalf("the next send on the same sender: %v", err)
			}
			if err := snd.SendMessageBatch(ctx, mustBatch(t, snd, keyed("x", "k", "k"), keyed("y", "k", "k")), nil); err != nil {
				t.Fatalf("the next batch on the same sender: %v", err)
			}
			if got := e.MustCounts(t, stored).Total - before; got != 3 {
				t.Fatalf("%d messages stored after the refusal, want 3", got)
			}
		})
	}
}

// TestSDKPartitionedPipelinedKeys: single sends of distinct keys on one
// link, in flight together (the front joins them into one broker send),
// are not a batch and are all taken.
func TestSDKPartitionedPipelinedKeys(t *testing.T) {
	e := newPartitionedSDKEnv(t)
	snd := e.sender(t, "pq")
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			k := string(rune('a' + i))
			errs <- snd.SendMessage(sdkCtx(t), keyed(k, k, ""), nil)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("SendMessage: %v", err)
		}
	}
	r := e.receiver(t, "pq", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if got := receiveN(t, r, n); len(got) != n {
		t.Fatalf("received %d of %d", len(got), n)
	}
}
