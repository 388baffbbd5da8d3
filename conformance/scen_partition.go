package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Partitioned queues and topics (Service Bus docs, "Partitioned queues and
// topics"; "Message sequencing and timestamps").

const partitionDoc = "Partitioned queues and topics: "

// batchKeyDoc is the .NET SDK's troubleshooting guide (Azure.Messaging.ServiceBus
// TROUBLESHOOTING.md, "Cannot send batch with multiple partition keys").
const batchKeyDoc = "Troubleshooting (.NET SDK), Cannot send batch with multiple partition keys: all messages of one send to a partition-enabled entity must have the same PartitionKey (the same SessionId on a session entity)"

// partitionOf is the partition a sequence number names: its top 16 bits.
func partitionOf(m *azservicebus.ReceivedMessage) int64 { return *m.SequenceNumber >> 48 }

// keyedMessages sends per messages for each of keys, interleaved, with
// bodies key-i, and returns how many it sent.
func (t *T) keyedMessages(entity string, keys []string, per int) int {
	for i := range per {
		var batch []*azservicebus.Message
		for _, k := range keys {
			batch = append(batch, &azservicebus.Message{Body: []byte(fmt.Sprintf("%s-%d", k, i)), PartitionKey: to.Ptr(k)})
		}
		t.Send(entity, batch...)
	}
	return len(keys) * per
}

func init() {
	register(
		Scenario{Name: "partition-order-per-key", Seed: partitionDoc + "all messages with the same partition key go to one partition, in the order sent; the key comes back (x-opt-partition-key)", Protocol: AMQP,
			Detects: []Detection{{FaultBreakFIFO, "order"}}, Run: func(t *T) {
				q := t.Queue("cf-partitioned")
				keys := []string{"red", "green", "blue", "plum"}
				n := t.keyedMessages(q, keys, 5)
				r := t.Receiver(q, "", nil)
				var got []*azservicebus.ReceivedMessage
				for len(got) < n {
					batch := t.ReceiveN(r, 1, 10*time.Second)
					for _, m := range batch {
						t.Complete(r, m)
					}
					got = append(got, batch...)
				}
				next := map[string]int{}
				part := map[string]int64{}
				t.Check("order")
				for _, m := range got {
					k, i, _ := strings.Cut(string(m.Body), "-")
					if want := strconv.Itoa(next[k]); i != want {
						t.Fatalf("key %s: message %s arrived where %s was due", k, i, want)
					}
					next[k]++
				}
				t.Check("one partition per key")
				for _, m := range got {
					k, _, _ := strings.Cut(string(m.Body), "-")
					if m.PartitionKey == nil || *m.PartitionKey != k {
						t.Errorf("%s: PartitionKey %v, want %s", m.Body, m.PartitionKey, k)
					}
					if p, ok := part[k]; ok && p != partitionOf(m) {
						t.Errorf("key %s in partitions %d and %d", k, p, partitionOf(m))
					}
					part[k] = partitionOf(m)
				}
			}},
		Scenario{Name: "partition-sequence-numbers", Seed: partitionDoc + "for partitioned entities the topmost 16 bits of the sequence number reflect the partition identifier; sequence numbers are issued relative to the partition", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-partitioned")
			var keys []string
			for i := range 16 {
				keys = append(keys, fmt.Sprint("key", i))
			}
			n := t.keyedMessages(q, keys, 2)
			got := t.ReceiveN(t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), n, 10*time.Second)
			last := map[int64]int64{}
			for _, m := range got {
				p := partitionOf(m)
				low := *m.SequenceNumber & (1<<48 - 1)
				if low <= last[p] {
					t.Errorf("partition %d: sequence %d after %d", p, low, last[p])
				}
				last[p] = low
			}
			if len(last) < 2 {
				t.Errorf("16 partition keys used %d partition(s): a partitioned entity spreads its messages", len(last))
			}
		}},
		Scenario{Name: "partition-sessions-fifo", Seed: partitionDoc + "SessionId serves as the partition key: a session's messages stay in one partition, in FIFO order, and accept-next finds sessions in every partition", Protocol: AMQP,
			Detects: []Detection{{FaultBreakFIFO, "order"}}, Run: func(t *T) {
				q := t.Queue("cf-partitioned-session")
				ids := []string{"s1", "s2", "s3"}
				for i := range 4 {
					var batch []*azservicebus.Message
					for _, id := range ids {
						batch = append(batch, inSession(id, fmt.Sprintf("%s.%d", id, i)))
					}
					t.Send(q, batch...)
				}
				seen := map[string]bool{}
				for range ids {
					r, err := t.Client().AcceptNextSessionForQueue(t.ctx, q, nil)
					t.must(err, "accept the next session")
					id := r.SessionID()
					if seen[id] {
						t.Fatalf("session %s accepted twice", id)
					}
					seen[id] = true
					var got []*azservicebus.ReceivedMessage
					for len(got) < 4 {
						batch := t.ReceiveN(r, 1, 10*time.Second)
						for _, m := range batch {
							t.Complete(r, m)
						}
						got = append(got, batch...)
					}
					_ = r.Close(t.ctx)
					t.Check("order")
					t.expectBodies(got, id+".0", id+".1", id+".2", id+".3")
				}
			}},
		Scenario{Name: "partition-duplicate-detection", Seed: partitionDoc + "with duplicate detection the MessageId serves as the partition key, so every copy of a message meets the same history and is dropped", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreDuplicates, "duplicates dropped"}}, Run: func(t *T) {
				q := t.Queue("cf-partitioned-dedup")
				for range 3 {
					for i := range 5 {
						t.Send(q, &azservicebus.Message{Body: []byte(fmt.Sprint(i)), MessageID: to.Ptr(fmt.Sprint("mid-", i))})
					}
				}
				r := t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
				got := t.ReceiveN(r, 5, 10*time.Second)
				t.Check("duplicates dropped")
				t.ReceiveNone(r, 2*time.Second, "a copy of a message already sent")
				if len(got) != 5 {
					t.Errorf("received %d messages, want 5", len(got))
				}
			}},
		Scenario{Name: "partition-key-too-long", Seed: partitionDoc + "a PartitionKey longer than 128 characters is refused; nothing is stored", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-partitioned")
			err := t.Sender(q).SendMessage(t.ctx, &azservicebus.Message{Body: []byte("x"), PartitionKey: to.Ptr(strings.Repeat("k", 129))}, nil)
			if err == nil {
				t.Fatalf("a 129-character PartitionKey was accepted")
			}
			t.expectNothingStored(t.Receiver(q, "", nil), "the refused message")
			t.Send(q, &azservicebus.Message{Body: []byte("ok"), PartitionKey: to.Ptr(strings.Repeat("k", 128))})
		}},
		Scenario{Name: "partition-key-must-match-session", Seed: partitionDoc + "if a message has both SessionId and PartitionKey they must be identical, or Service Bus returns an invalid operation exception", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-partitioned-session")
			err := t.Sender(q).SendMessage(t.ctx, &azservicebus.Message{Body: []byte("x"), SessionID: to.Ptr("a"), PartitionKey: to.Ptr("b")}, nil)
			if err == nil {
				t.Fatalf("SessionId a with PartitionKey b was accepted")
			}
			if !strings.Contains(err.Error(), "amqp:not-allowed") {
				t.Errorf("refused with %v, want amqp:not-allowed (InvalidOperation)", err)
			}
			t.Send(q, &azservicebus.Message{Body: []byte("y"), SessionID: to.Ptr("a"), PartitionKey: to.Ptr("a")})
		}},
		Scenario{Name: "partition-batch-one-key", Seed: batchKeyDoc + "; a batch of distinct partition keys is refused (amqp:not-allowed), nothing of it stored, and a batch of one key is taken", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-partitioned")
			s := t.Sender(q)
			batchOf := func(keys ...string) *azservicebus.MessageBatch {
				b, err := s.NewMessageBatch(t.ctx, nil)
				t.must(err, "new batch")
				for i, k := range keys {
					t.must(b.AddMessage(&azservicebus.Message{Body: []byte(fmt.Sprint(k, i)), PartitionKey: to.Ptr(k)}, nil), "add to batch")
				}
				return b
			}
			err := s.SendMessageBatch(t.ctx, batchOf("red", "blue"), nil)
			switch {
			case err == nil:
				t.Fatalf("a batch with PartitionKeys red and blue was taken")
			case amqpCondition(err) != "amqp:not-allowed":
				t.Errorf("refused with %v, want amqp:not-allowed (InvalidOperation)", err)
			}
			t.expectNothingStored(t.Receiver(q, "", nil), "the refused batch")
			t.must(s.SendMessageBatch(t.ctx, batchOf("red", "red"), nil), "a batch of one partition key on the same sender")
			got := t.ReceiveN(t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 2, 10*time.Second)
			t.expectBodies(got, "red0", "red1")
		}},
		Scenario{Name: "partition-rest-batch-one-key", Seed: batchKeyDoc + ", over HTTP too: a send-batch of distinct partition keys is 400, nothing of it stored", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-partitioned")
			batch := func(keys ...string) []byte {
				var items []map[string]any
				for i, k := range keys {
					items = append(items, map[string]any{"Body": fmt.Sprint(k, i), "BrokerProperties": map[string]any{"PartitionKey": k}})
				}
				b, _ := json.Marshal(items)
				return b
			}
			hdr := http.Header{"Content-Type": {"application/vnd.microsoft.servicebus.json"}}
			t.expectStatus(t.REST(http.MethodPost, q+"/messages", batch("red", "blue"), hdr), http.StatusBadRequest, "a send-batch with PartitionKeys red and blue")
			t.expectNothingStored(t.Receiver(q, "", nil), "the refused batch")
			t.restSend(q, batch("red", "red"), hdr)
			got := t.ReceiveN(t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 2, 10*time.Second)
			t.expectBodies(got, "red0", "red1")
		}},
		Scenario{Name: "partition-topic-fanout", Seed: partitionDoc + "a subscription of a partitioned topic receives every message sent to the topic, whatever its partition", Protocol: AMQP, Run: func(t *T) {
			tp := t.Topic("cf-topic-partitioned")
			var keys []string
			for i := range 8 {
				keys = append(keys, fmt.Sprint("k", i))
			}
			n := t.keyedMessages(tp, keys, 1)
			got := t.ReceiveN(t.Receiver(tp, "a", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), n, 10*time.Second)
			if len(got) != n {
				t.Errorf("subscription got %d of %d", len(got), n)
			}
		}},
		Scenario{Name: "partition-rest-partition-key", Seed: partitionDoc + "PartitionKey in BrokerProperties picks the partition over HTTP too and comes back in BrokerProperties", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-partitioned")
			for i := range 3 {
				t.restSend(q, []byte(fmt.Sprint("r", i)), brokerHeader(map[string]any{"PartitionKey": "rest-key"}))
			}
			var part int64 = -1
			for i := range 3 {
				resp := t.REST(http.MethodDelete, q+"/messages/head?timeout=5", nil, nil)
				t.expectStatus(resp, http.StatusOK, "receive and delete")
				bp := t.brokerProps(resp)
				if k := bp.String("PartitionKey"); k != "rest-key" {
					t.Errorf("PartitionKey %q, want rest-key", k)
				}
				if string(resp.Body) != fmt.Sprint("r", i) {
					t.Errorf("got %q, want r%d: order per key", resp.Body, i)
				}
				seq, ok := bp.Int("SequenceNumber")
				if !ok {
					t.Fatalf("no SequenceNumber in %v", bp)
				}
				p := seq >> 48
				if part >= 0 && p != part {
					t.Errorf("one key in partitions %d and %d", part, p)
				}
				part = p
			}
		}},
	)
}
