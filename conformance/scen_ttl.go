package conformance

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Expiry, scheduling, duplicate detection and peek: seed 003 and 002.

func init() {
	register(
		Scenario{Name: "ttl-expired-not-delivered", Seed: "003 after expires-at-utc the message is no longer eligible for retrieval", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreMessageExpiry, "not delivered after expiry"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, &azservicebus.Message{Body: []byte("short"), TimeToLive: to.Ptr(time.Second)}, Text("long"))
				wait(t, 2*time.Second)
				r := t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
				t.Check("not delivered after expiry")
				t.expectBodies(t.ReceiveN(r, 1, 10*time.Second), "long")
				t.ReceiveNone(r, time.Second, "the expired message must not be delivered")
			}},
		Scenario{Name: "ttl-expires-at-stamped", Seed: "003 expires-at-utc = enqueued-time-utc + time-to-live", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, &azservicebus.Message{Body: []byte("x"), TimeToLive: to.Ptr(90 * time.Second)})
			m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			if m.ExpiresAt == nil || m.EnqueuedTime == nil || m.ExpiresAt.Sub(*m.EnqueuedTime) != 90*time.Second {
				t.Fatalf("ExpiresAt %v - EnqueuedTime %v != 90s", m.ExpiresAt, m.EnqueuedTime)
			}
		}},
		Scenario{Name: "ttl-entity-default-caps", Seed: "003 the entity default TTL caps a longer message TTL", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-ttl5m")
			t.Send(q, &azservicebus.Message{Body: []byte("x"), TimeToLive: to.Ptr(time.Hour)}, Text("default"))
			for _, m := range t.ReceiveN(t.Receiver(q, "", nil), 2, 10*time.Second) {
				if m.ExpiresAt == nil || m.ExpiresAt.Sub(*m.EnqueuedTime) != 5*time.Minute {
					t.Errorf("%q: TTL %v, want the entity's 5m", m.Body, m.ExpiresAt.Sub(*m.EnqueuedTime))
				}
			}
		}},
		Scenario{Name: "ttl-deadletter-on-expiration", Seed: "003 expired messages move to the DLQ when DeadLetteringOnMessageExpiration is set", Protocol: AMQP,
			Detects: []Detection{
				{FaultIgnoreMessageExpiry, "not delivered after expiry"},
				{FaultDropDeadLetters, "dead-lettered"},
			}, Run: func(t *T) {
				q := t.Queue("cf-dlq-expiry")
				t.Send(q, &azservicebus.Message{Body: []byte("late"), TimeToLive: to.Ptr(time.Second)})
				wait(t, 2*time.Second)
				// Service Bus expires messages when a receiver looks.
				t.Check("not delivered after expiry")
				t.ReceiveNone(t.Receiver(q, "", nil), 2*time.Second, "the expired message must not be delivered")
				t.Check("dead-lettered")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if deref(d.DeadLetterReason) != "TTLExpiredException" {
					t.Fatalf("DeadLetterReason = %v, want TTLExpiredException", deref(d.DeadLetterReason))
				}
			}},
		Scenario{Name: "ttl-no-expiry-under-lock", Seed: "003 expiration doesn't affect messages that are currently locked", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, &azservicebus.Message{Body: []byte("x"), TimeToLive: to.Ptr(2 * time.Second)})
			r := t.Receiver(q, "", nil)
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			wait(t, 3*time.Second)
			t.must(r.CompleteMessage(t.ctx, m, nil), "completing an expired message under lock")
		}},
		Scenario{Name: "ttl-expiry-when-lock-abandoned", Seed: "003 if the lock expires or the message is abandoned, the expiration takes effect immediately", Protocol: AMQP,
			Detects: []Detection{
				{FaultIgnoreMessageExpiry, "not redelivered"},
				{FaultDropDeadLetters, "dead-lettered"},
			}, Run: func(t *T) {
				q := t.Queue("cf-dlq-expiry")
				t.Send(q, &azservicebus.Message{Body: []byte("x"), TimeToLive: to.Ptr(2 * time.Second)})
				r := t.Receiver(q, "", nil)
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				wait(t, 3*time.Second)
				t.must(r.AbandonMessage(t.ctx, m, nil), "abandon")
				t.Check("not redelivered")
				t.ReceiveNone(r, 2*time.Second, "an expired, abandoned message must not be redelivered")
				t.Check("dead-lettered")
				t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)
			}},
		Scenario{Name: "scheduled-invisible-until-time", Seed: "003 scheduled messages materialize at their enqueue time", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreSchedule, "invisible before its time"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				at := time.Now().Add(4 * time.Second)
				seqs, err := t.Sender(q).ScheduleMessages(t.ctx, []*azservicebus.Message{Text("s")}, at, nil)
				t.must(err, "schedule")
				if len(seqs) != 1 {
					t.Fatalf("schedule returned %d sequence numbers", len(seqs))
				}
				r := t.Receiver(q, "", nil)
				t.Check("invisible before its time")
				t.ReceiveNone(r, 2*time.Second, "a scheduled message must be invisible before its time")
				t.Check("delivered at its time")
				m := t.ReceiveN(r, 1, 15*time.Second)[0]
				if time.Now().Before(at.Add(-500 * time.Millisecond)) {
					t.Errorf("delivered at %v, before its schedule %v", time.Now(), at)
				}
				if *m.SequenceNumber != seqs[0] {
					t.Errorf("sequence %d, scheduled as %d", *m.SequenceNumber, seqs[0])
				}
			}},
		Scenario{Name: "scheduled-cancel", Seed: "002 a scheduled message can be cancelled by sequence number", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreSchedule, "never arrives"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				s := t.Sender(q)
				seqs, err := s.ScheduleMessages(t.ctx, []*azservicebus.Message{Text("never")}, time.Now().Add(3*time.Second), nil)
				t.must(err, "schedule")
				t.must(s.CancelScheduledMessages(t.ctx, seqs, nil), "cancel")
				t.Check("never arrives")
				t.ReceiveNone(t.Receiver(q, "", nil), 5*time.Second, "a cancelled message must never arrive")
			}},
		Scenario{Name: "scheduled-ttl-from-enqueue", Seed: "003 for scheduled messages expiry = scheduled enqueue time + TTL", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreSchedule, "expiry counts from the scheduled time"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				at := time.Now().Add(2 * time.Second).Truncate(time.Second)
				_, err := t.Sender(q).ScheduleMessages(t.ctx, []*azservicebus.Message{{Body: []byte("x"), TimeToLive: to.Ptr(time.Minute)}}, at, nil)
				t.must(err, "schedule")
				m := t.ReceiveN(t.Receiver(q, "", nil), 1, 15*time.Second)[0]
				t.Check("expiry counts from the scheduled time")
				if m.ExpiresAt == nil || m.ExpiresAt.Sub(at).Abs() > time.Minute+time.Second || m.ExpiresAt.Sub(at) < time.Minute-time.Second {
					t.Fatalf("ExpiresAt %v, want scheduled time %v + 1m", m.ExpiresAt, at)
				}
			}},
		Scenario{Name: "peek-does-not-lock", Seed: "002 peek browses without locking", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("p"))
			r := t.Receiver(q, "", nil)
			peeked, err := r.PeekMessages(t.ctx, 10, nil)
			t.must(err, "peek")
			if len(peeked) != 1 || string(peeked[0].Body) != "p" {
				t.Fatalf("peek returned %d messages", len(peeked))
			}
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			if m.DeliveryCount != 1 {
				t.Errorf("after a peek the first delivery has DeliveryCount %d, want 1", m.DeliveryCount)
			}
		}},
		Scenario{Name: "peek-from-sequence-number", Seed: "002 peek starts at a given sequence number", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("1"), Text("2"), Text("3"))
			r := t.Receiver(q, "", nil)
			all, err := r.PeekMessages(t.ctx, 10, nil)
			t.must(err, "peek")
			if len(all) != 3 {
				t.Fatalf("peek returned %d of 3", len(all))
			}
			from := *all[1].SequenceNumber
			rest, err := t.Receiver(q, "", nil).PeekMessages(t.ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
			t.must(err, "peek from")
			t.expectBodies(rest, "2", "3")
		}},
		Scenario{Name: "peek-shows-states", Seed: "002 peek returns deferred and scheduled messages with their state", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreSchedule, "states"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				s := t.Sender(q)
				t.must(s.SendMessage(t.ctx, Text("d"), nil), "send")
				_, err := s.ScheduleMessages(t.ctx, []*azservicebus.Message{Text("s")}, time.Now().Add(time.Hour), nil)
				t.must(err, "schedule")
				r := t.Receiver(q, "", nil)
				t.must(r.DeferMessage(t.ctx, t.ReceiveN(r, 1, 10*time.Second)[0], nil), "defer")
				peeked, err := t.Receiver(q, "", nil).PeekMessages(t.ctx, 10, nil)
				t.must(err, "peek")
				t.Check("states")
				states := map[string]azservicebus.MessageState{}
				for _, m := range peeked {
					states[string(m.Body)] = m.State
				}
				if states["d"] != azservicebus.MessageStateDeferred || states["s"] != azservicebus.MessageStateScheduled {
					t.Fatalf("peeked states %v, want d deferred and s scheduled", states)
				}
			}},
		Scenario{Name: "duplicate-detection-drops", Seed: "002 a MessageId seen within the window is accepted and dropped", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreDuplicates, "duplicate dropped"}}, Run: func(t *T) {
				q := t.Queue("cf-dedup")
				m := func(b string) *azservicebus.Message {
					return &azservicebus.Message{Body: []byte(b), MessageID: to.Ptr("same-id")}
				}
				t.Send(q, m("first"), m("second"), &azservicebus.Message{Body: []byte("other"), MessageID: to.Ptr("other-id")})
				r := t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
				t.Check("duplicate dropped")
				got := t.ReceiveN(r, 2, 10*time.Second)
				t.expectBodies(got, "first", "other")
				t.ReceiveNone(r, 2*time.Second, "the duplicate must have been dropped")
			}},
	)
}
