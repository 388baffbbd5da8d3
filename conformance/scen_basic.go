package conformance

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Send and receive basics: seed 002 ("Settling send operations",
// "Settling receive operations").

func init() {
	register(
		Scenario{Name: "send-then-receive", Seed: "002 a sent message is accepted and stored for later retrieval", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("hello"))
			r := t.Receiver(q, "", nil)
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			if string(m.Body) != "hello" {
				t.Fatalf("body %q, want hello", m.Body)
			}
			t.Complete(r, m)
		}},
		Scenario{Name: "sequence-numbers-increase", Seed: "002 every accepted message gets a sequence number, in order", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("1"), Text("2"), Text("3"))
			r := t.Receiver(q, "", nil)
			msgs := t.ReceiveN(r, 3, 10*time.Second)
			for i := 1; i < len(msgs); i++ {
				if *msgs[i].SequenceNumber <= *msgs[i-1].SequenceNumber {
					t.Errorf("sequence %d after %d", *msgs[i].SequenceNumber, *msgs[i-1].SequenceNumber)
				}
			}
		}},
		Scenario{Name: "fifo-order-single-receiver", Seed: "002 messages are retrieved in the order they were accepted", Protocol: AMQP,
			Detects: []Detection{{FaultBreakFIFO, "order"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				var want []string
				var msgs []*azservicebus.Message
				for i := range 8 {
					b := string(rune('a' + i))
					want = append(want, b)
					msgs = append(msgs, Text(b))
				}
				t.Send(q, msgs...)
				r := t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
				var got []*azservicebus.ReceivedMessage
				for len(got) < len(want) {
					got = append(got, t.ReceiveN(r, 1, 10*time.Second)...)
				}
				t.Check("order")
				t.expectBodies(got, want...)
			}},
		Scenario{Name: "system-properties-roundtrip", Seed: "000 BrokerProperties are stored with the message and returned on receive", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			m := &azservicebus.Message{
				Body: []byte("p"), MessageID: to.Ptr("mid-1"), CorrelationID: to.Ptr("cid-1"),
				ContentType: to.Ptr("application/json"), Subject: to.Ptr("label-1"), To: to.Ptr("to-1"),
				ReplyTo: to.Ptr("reply-1"), ReplyToSessionID: to.Ptr("rsid-1"), TimeToLive: to.Ptr(time.Hour),
			}
			t.Send(q, m)
			got := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			check := func(name string, got *string, want string) {
				if got == nil || *got != want {
					t.Errorf("%s = %v, want %q", name, deref(got), want)
				}
			}
			if got.MessageID != "mid-1" {
				t.Errorf("MessageID = %q", got.MessageID)
			}
			check("CorrelationID", got.CorrelationID, "cid-1")
			check("ContentType", got.ContentType, "application/json")
			check("Subject", got.Subject, "label-1")
			check("To", got.To, "to-1")
			check("ReplyTo", got.ReplyTo, "reply-1")
			check("ReplyToSessionID", got.ReplyToSessionID, "rsid-1")
			if got.TimeToLive == nil || *got.TimeToLive != time.Hour {
				t.Errorf("TimeToLive = %v, want 1h", got.TimeToLive)
			}
			if got.EnqueuedTime == nil || time.Since(*got.EnqueuedTime) > time.Minute || got.SequenceNumber == nil {
				t.Errorf("EnqueuedTime %v / SequenceNumber %v not stamped", got.EnqueuedTime, got.SequenceNumber)
			}
		}},
		Scenario{Name: "application-properties-typed", Seed: "000 custom properties keep their types", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			ts := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
			props := map[string]any{"s": "text", "i32": int32(-7), "i64": int64(1) << 40, "f": 2.5, "b": true, "t": ts, "u8": uint8(200)}
			t.Send(q, &azservicebus.Message{Body: []byte("x"), ApplicationProperties: props})
			got := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			for k, want := range props {
				v := got.ApplicationProperties[k]
				if wt, ok := want.(time.Time); ok {
					if gt, ok := v.(time.Time); !ok || !gt.Equal(wt) {
						t.Errorf("property %s = %#v, want %v", k, v, wt)
					}
					continue
				}
				if v != want {
					t.Errorf("property %s = %#v (%T), want %#v (%T)", k, v, v, want, want)
				}
			}
		}},
		Scenario{Name: "receive-and-delete-removes", Seed: "002 ReceiveAndDelete: the message is consumed as soon as it is sent to the receiver", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("once"))
			r := t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
			t.ReceiveN(r, 1, 10*time.Second)
			t.ReceiveNone(t.Receiver(q, "", nil), 2*time.Second, "a received-and-deleted message must be gone")
		}},
		Scenario{Name: "batch-send", Seed: "002 pipelined/batched sends are each accepted and stored", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			s := t.Sender(q)
			batch, err := s.NewMessageBatch(t.ctx, nil)
			t.must(err, "new batch")
			for i := range 20 {
				t.must(batch.AddMessage(Text(string(rune('A'+i))), nil), "add to batch")
			}
			t.must(s.SendMessageBatch(t.ctx, batch, nil), "send batch")
			t.ReceiveN(t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 20, 15*time.Second)
		}},
		Scenario{Name: "message-too-large-rejected", Seed: "rest.md §4.6 / amqp.md §10 messages above the entity's maximum size are refused", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			err := t.Sender(q).SendMessage(t.ctx, &azservicebus.Message{Body: make([]byte, 1100*1024)}, nil)
			if err == nil {
				t.Fatalf("a 1.1 MB message to a 256 KiB-limit queue was accepted")
			}
		}},
		Scenario{Name: "unknown-entity-not-found", Seed: "amqp.md §3.3 attach to a missing entity fails with amqp:not-found", Protocol: AMQP, Run: func(t *T) {
			err := t.Sender("cf-missing-"+suffix()).SendMessage(t.ctx, Text("x"), nil)
			if err == nil {
				t.Fatalf("send to a missing queue succeeded")
			}
		}},
		Scenario{Name: "large-message-200k", Seed: "amqp.md §11 multi-frame transfers up to the entity's size", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			body := make([]byte, 200*1024)
			for i := range body {
				body[i] = byte(i * 7)
			}
			t.Send(q, &azservicebus.Message{Body: body})
			got := t.ReceiveN(t.Receiver(q, "", nil), 1, 15*time.Second)[0]
			if string(got.Body) != string(body) {
				t.Fatalf("200 KiB body changed in transit (len %d)", len(got.Body))
			}
		}},
	)
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}
