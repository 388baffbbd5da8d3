package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// Batch delete (Service Bus docs, "Batch delete messages"): the
// com.microsoft:batch-delete-messages operation on an entity's
// $management node, which the newer SDKs' DeleteMessages and
// PurgeMessages send. The Go SDK in use here (azservicebus 1.11) has no
// API for it, so the scenarios send the request over go-amqp in the shape
// the SDKs use: message-count as an int, enqueued-time-utc as a
// timestamp, session-id as a string.

const batchDeleteDoc = "batch-delete.md"

// batchDelete asks entity's $management node to delete up to count
// messages enqueued before before (of session sid, if set) and returns
// the message-count of the reply, which must be 200 with an int count.
func (t *T) batchDelete(entity string, count int32, before time.Time, sid string) int32 {
	t.live()
	s := t.AMQPSession()
	node := entity + "/$management"
	replyTo := fmt.Sprintf("%s-reply-%d", node, time.Now().UnixNano())
	snd, err := s.NewSender(t.ctx, node, nil)
	t.must(err, "attaching a sender to %s", node)
	defer snd.Close(context.Background())
	rcv, err := s.NewReceiver(t.ctx, node, &amqp.ReceiverOptions{TargetAddress: replyTo, Credit: 1})
	t.must(err, "attaching the reply receiver of %s", node)
	defer rcv.Close(context.Background())
	body := map[string]any{"message-count": count, "enqueued-time-utc": before}
	if sid != "" {
		body["session-id"] = sid
	}
	req := &amqp.Message{
		Value:                 body,
		Properties:            &amqp.MessageProperties{MessageID: "batch-delete-1", ReplyTo: &replyTo},
		ApplicationProperties: map[string]any{"operation": "com.microsoft:batch-delete-messages"},
	}
	t.must(snd.Send(t.ctx, req, nil), "sending the batch-delete request")
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	reply, err := rcv.Receive(ctx, nil)
	t.must(err, "receiving the batch-delete reply")
	_ = rcv.AcceptMessage(ctx, reply)
	if code := reply.ApplicationProperties["statusCode"]; code != int32(200) {
		t.Fatalf("batch delete answered statusCode %#v (%v: %v), want 200", code,
			reply.ApplicationProperties["errorCondition"], reply.ApplicationProperties["statusDescription"])
	}
	m, ok := reply.Value.(map[string]any)
	if !ok {
		t.Fatalf("batch-delete reply body %#v, want a map", reply.Value)
	}
	n, ok := m["message-count"].(int32)
	if !ok {
		t.Fatalf("message-count = %#v (%T), want an int: the SDKs reject anything else", m["message-count"], m["message-count"])
	}
	return n
}

// peekBodies returns the bodies of up to 50 messages from the start of
// r's entity, without locking them.
func (t *T) peekBodies(r interface {
	PeekMessages(context.Context, int, *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}) []string {
	var zero int64
	msgs, err := r.PeekMessages(t.ctx, 50, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &zero})
	t.must(err, "peeking")
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

// later is a cutoff after everything the scenario sent, with room for an
// endpoint whose clock runs a little ahead of this machine's.
func later() time.Time { return time.Now().Add(time.Minute) }

func init() {
	register(
		Scenario{Name: "batch-delete-oldest-first", Seed: batchDeleteDoc + " batch delete removes up to messageCount messages, the oldest first, and answers how many", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("a"), Text("b"), Text("c"), Text("d"), Text("e"))
			t.Check("count")
			if n := t.batchDelete(q, 3, later(), ""); n != 3 {
				t.Fatalf("deleted %d, want 3", n)
			}
			t.Check("rest kept in order")
			if got := t.peekBodies(t.Receiver(q, "", nil)); fmt.Sprint(got) != "[d e]" {
				t.Fatalf("left %v, want [d e]", got)
			}
			t.Check("fewer left than asked")
			if n := t.batchDelete(q, 10, later(), ""); n != 2 {
				t.Fatalf("deleted %d of the 2 left", n)
			}
			if n := t.batchDelete(q, 10, later(), ""); n != 0 {
				t.Fatalf("deleted %d from an empty queue", n)
			}
		}},
		Scenario{Name: "batch-delete-before-cutoff", Seed: batchDeleteDoc + " only messages enqueued before beforeEnqueueTime are deleted", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			r := t.Receiver(q, "", nil)
			t.Send(q, Text("old"))
			var zero int64
			peeked, err := r.PeekMessages(t.ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &zero})
			t.must(err, "peeking the old message")
			if len(peeked) != 1 || peeked[0].EnqueuedTime == nil {
				t.Fatalf("peek of the old message: %v", peeked)
			}
			old := *peeked[0].EnqueuedTime
			// Enqueue times are milliseconds on the wire: leave a clear gap.
			deadline := time.Now().Add(10 * time.Second)
			var young time.Time
			for {
				time.Sleep(50 * time.Millisecond)
				t.Send(q, Text("young"))
				all, err := r.PeekMessages(t.ctx, 50, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &zero})
				t.must(err, "peeking")
				young = *all[len(all)-1].EnqueuedTime
				if young.Sub(old) >= 20*time.Millisecond || time.Now().After(deadline) {
					break
				}
			}
			if young.Sub(old) < 20*time.Millisecond {
				t.Fatalf("the endpoint enqueued young %v only %v after old", young, young.Sub(old))
			}
			t.Check("cutoff")
			if n := t.batchDelete(q, 100, old.Add(young.Sub(old)/2), ""); n != 1 {
				t.Fatalf("deleted %d with a cutoff between old and young, want only old", n)
			}
			if got := t.peekBodies(r); len(got) == 0 || got[0] != "young" {
				t.Fatalf("left %v, want the young messages", got)
			}
		}},
		Scenario{Name: "batch-delete-skips-locked", Seed: batchDeleteDoc + " locked messages are not eligible for removal and remain in the entity", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("held"), Text("free-1"), Text("free-2"))
			r := t.Receiver(q, "", nil)
			held := t.ReceiveN(r, 1, 10*time.Second)[0]
			t.Check("locked skipped")
			if n := t.batchDelete(q, 10, later(), ""); n != 2 {
				t.Fatalf("deleted %d, want the 2 unlocked messages", n)
			}
			t.Check("lock still valid")
			t.Complete(r, held)
		}},
		Scenario{Name: "batch-delete-session", Seed: batchDeleteDoc + " a session receiver deletes its own session's messages (session-id)", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("del-a", "a1"), inSession("del-b", "b1"), inSession("del-a", "a2"))
			a := t.acceptSession(q, "del-a")
			t.Check("session only")
			if n := t.batchDelete(q, 10, later(), "del-a"); n != 2 {
				t.Fatalf("deleted %d of session del-a, want 2", n)
			}
			_ = a.Close(t.ctx)
			b := t.acceptSession(q, "del-b")
			t.expectBodies(t.ReceiveN(b, 1, 10*time.Second), "b1")
		}},
		Scenario{Name: "batch-delete-dead-letter", Seed: batchDeleteDoc + " messages in the dead-letter queue are deleted through its own path", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "dead-letter subqueue"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("dead"), Text("alive"))
				r := t.Receiver(q, "", nil)
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				t.must(r.DeadLetterMessage(t.ctx, m, nil), "dead-lettering")
				t.Check("dead-letter subqueue")
				if n := t.batchDelete(q+"/$DeadLetterQueue", 10, later(), ""); n != 1 {
					t.Fatalf("deleted %d dead letters, want 1", n)
				}
				t.Check("main queue untouched")
				if got := t.peekBodies(r); fmt.Sprint(got) != "[alive]" {
					t.Fatalf("the queue holds %v, want [alive]", got)
				}
			}},
	)
}
