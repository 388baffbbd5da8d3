package conformance

import (
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// More of seeds 002 and 003: what dead-lettering keeps, when expiry
// dead-letters, and lock durations.

func init() {
	register(
		Scenario{Name: "deadletter-keeps-message", Seed: "002 a dead-lettered message keeps its body, id and properties", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "in the dead-letter subqueue"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, &azservicebus.Message{Body: []byte("payload"), MessageID: to.Ptr("keep-1"), Subject: to.Ptr("s"),
					ContentType: to.Ptr("text/plain"), ApplicationProperties: map[string]any{"n": int64(3), "who": "me"}})
				r := t.Receiver(q, "", nil)
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				t.must(r.DeadLetterMessage(t.ctx, m, &azservicebus.DeadLetterOptions{Reason: to.Ptr("r")}), "dead-letter")
				t.Check("in the dead-letter subqueue")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if string(d.Body) != "payload" || d.MessageID != "keep-1" || deref(d.Subject) != "s" || deref(d.ContentType) != "text/plain" {
					t.Errorf("dead letter body %q id %q subject %v content type %v", d.Body, d.MessageID, deref(d.Subject), deref(d.ContentType))
				}
				if d.ApplicationProperties["n"] != int64(3) || d.ApplicationProperties["who"] != "me" {
					t.Errorf("dead letter properties %v", d.ApplicationProperties)
				}
				if *d.SequenceNumber != *m.SequenceNumber {
					t.Errorf("dead letter sequence %d, original %d", *d.SequenceNumber, *m.SequenceNumber)
				}
			}},
		Scenario{Name: "ttl-expired-dropped-without-flag", Seed: "003 with dead-lettering on expiration disabled, expired messages are dropped", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreMessageExpiry, "not delivered after expiry"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, &azservicebus.Message{Body: []byte("short"), TimeToLive: to.Ptr(time.Second)})
				wait(t, 2*time.Second)
				t.Check("not delivered after expiry")
				t.ReceiveNone(t.Receiver(q, "", nil), 2*time.Second, "the expired message must not be delivered")
				t.Check("not dead-lettered")
				t.ReceiveNone(t.DLQ(q, ""), 2*time.Second, "without DeadLetteringOnMessageExpiration the expired message must not be dead-lettered")
			}},
		Scenario{Name: "ttl-settled-expired-not-moved", Seed: "003 a message completed under lock is not dead-lettered although nominally expired", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-dlq-expiry")
			t.Send(q, &azservicebus.Message{Body: []byte("x"), TimeToLive: to.Ptr(2 * time.Second)})
			r := t.Receiver(q, "", nil)
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			wait(t, 3*time.Second)
			t.Complete(r, m)
			t.ReceiveNone(t.DLQ(q, ""), 2*time.Second, "a successfully settled message must not be moved to the DLQ")
		}},
		Scenario{Name: "ttl-expired-deadletter-keeps-message", Seed: "003 an expired message moved to the DLQ keeps its body and properties, with reason TTLExpiredException", Protocol: AMQP,
			Detects: []Detection{
				{FaultIgnoreMessageExpiry, "not delivered after expiry"},
				{FaultDropDeadLetters, "dead-lettered with its body and properties"},
			}, Run: func(t *T) {
				q := t.Queue("cf-dlq-expiry")
				t.Send(q, &azservicebus.Message{Body: []byte("late"), TimeToLive: to.Ptr(time.Second), ApplicationProperties: map[string]any{"k": "v"}})
				wait(t, 2*time.Second)
				t.Check("not delivered after expiry")
				t.ReceiveNone(t.Receiver(q, "", nil), 2*time.Second, "the expired message must not be delivered")
				t.Check("dead-lettered with its body and properties")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if string(d.Body) != "late" || d.ApplicationProperties["k"] != "v" {
					t.Errorf("expired dead letter body %q properties %v", d.Body, d.ApplicationProperties)
				}
				if deref(d.DeadLetterReason) != "TTLExpiredException" {
					t.Errorf("reason %v", deref(d.DeadLetterReason))
				}
			}},
		Scenario{Name: "ttl-expiry-on-lock-lapse", Seed: "003 if the lock of an expired message lapses, expiry takes effect at once (to the DLQ when flagged)", Protocol: AMQP,
			Detects: []Detection{
				{FaultIgnoreLockExpiry, "dead-lettered when the lock lapsed"},
				{FaultIgnoreMessageExpiry, "not redelivered"},
				{FaultDropDeadLetters, "dead-lettered when the lock lapsed"},
			}, Run: func(t *T) {
				q := t.Queue("cf-lock5s-dlq-expiry")
				t.Send(q, &azservicebus.Message{Body: []byte("x"), TimeToLive: to.Ptr(2 * time.Second)})
				m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
				wait(t, time.Until(*m.LockedUntil)+1500*time.Millisecond)
				t.Check("not redelivered")
				t.ReceiveNone(t.Receiver(q, "", nil), 2*time.Second, "an expired message whose lock lapsed must not be redelivered")
				t.Check("dead-lettered when the lock lapsed")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if deref(d.DeadLetterReason) != "TTLExpiredException" {
					t.Errorf("reason %v, want TTLExpiredException", deref(d.DeadLetterReason))
				}
			}},
		Scenario{Name: "max-delivery-count-by-lock-expiry", Seed: "002 letting the lock lapse MaxDeliveryCount times moves the message to the DLQ", Protocol: AMQP,
			Detects: []Detection{
				{FaultIgnoreLockExpiry, "dead-lettered when the lock lapsed"},
				{FaultDropDeadLetters, "dead-lettered when the lock lapsed"},
			}, Run: func(t *T) {
				q := t.Queue("cf-lock5s-mdc1")
				t.Send(q, Text("x"))
				m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
				wait(t, time.Until(*m.LockedUntil)+1500*time.Millisecond)
				t.Check("not redelivered")
				t.ReceiveNone(t.Receiver(q, "", nil), 2*time.Second, "after MaxDeliveryCount 1 lapsed lock the message must have left the queue")
				t.Check("dead-lettered when the lock lapsed")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if deref(d.DeadLetterReason) != "MaxDeliveryCountExceeded" {
					t.Errorf("reason %v, want MaxDeliveryCountExceeded", deref(d.DeadLetterReason))
				}
			}},
		Scenario{Name: "lock-duration-from-entity", Seed: "002 the lock duration is defined on the queue or subscription", Protocol: AMQP, Run: func(t *T) {
			q := lock5s(t)
			t.Send(q, Text("x"))
			before := time.Now()
			m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			if d := m.LockedUntil.Sub(before); d < 3*time.Second || d > 8*time.Second {
				t.Fatalf("LockedUntil is %s after the receive, want about the queue's 5 s", d.Round(time.Millisecond))
			}
		}},
		Scenario{Name: "lock-duration-max-5-minutes", Seed: "002 the maximum lock duration is 5 minutes: a longer one is refused", Protocol: REST, Run: func(t *T) {
			if t.target.Predeclared {
				t.Skipf("needs runtime management")
			}
			t.live()
			name := "cf-lock6m-" + suffix()
			_, err := t.target.admin.CreateQueue(t.ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{LockDuration: to.Ptr("PT6M")}})
			if err == nil {
				_, _ = t.target.admin.DeleteQueue(t.ctx, name, nil)
				t.Fatalf("a queue with LockDuration PT6M was created")
			}
			var re *azcore.ResponseError
			if errors.As(err, &re) && re.StatusCode != 400 {
				t.Errorf("refused with HTTP %d, want 400", re.StatusCode)
			}
		}},
	)
}
