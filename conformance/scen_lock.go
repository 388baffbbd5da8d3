package conformance

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Peek-lock, lock renewal and expiry, and the settlement outcomes: seed
// 002 ("PeekLock", "Renew locks") and amqp.md §5.

// lock5s is a queue whose locks last 5 s, the shortest Service Bus allows.
func lock5s(t *T) string { return t.Queue("cf-lock5s") }

func init() {
	register(
		Scenario{Name: "peeklock-exclusive", Seed: "002 PeekLock: a locked message is hidden from competing receivers", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("only"))
			first := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)
			_ = first
			t.ReceiveNone(t.Receiver(q, "", nil), 2*time.Second, "a competing receiver must not see a locked message")
		}},
		Scenario{Name: "peeklock-next-available", Seed: "002 PeekLock: other receivers get the next messages not under lock", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("a"), Text("b"))
			a := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			b := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			if string(a.Body) == string(b.Body) {
				t.Fatalf("two receivers got the same message %q", a.Body)
			}
		}},
		Scenario{Name: "first-delivery-count-is-1", Seed: "002 DeliveryCount counts deliveries; the first delivery has 1", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("x"))
			m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			if m.DeliveryCount != 1 {
				t.Fatalf("DeliveryCount = %d, want 1", m.DeliveryCount)
			}
			if m.LockedUntil == nil || !m.LockedUntil.After(time.Now()) {
				t.Errorf("LockedUntil = %v, want in the future", m.LockedUntil)
			}
		}},
		Scenario{Name: "lock-expiry-redelivers", Seed: "002 when the lock expires the message is available again with DeliveryCount+1", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreLockExpiry, "redelivered after lock expiry"}}, Run: func(t *T) {
				q := lock5s(t)
				t.Send(q, Text("x"))
				t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)
				t.Check("redelivered after lock expiry")
				m := t.ReceiveN(t.Receiver(q, "", nil), 1, 15*time.Second)[0]
				if m.DeliveryCount != 2 {
					t.Fatalf("redelivered with DeliveryCount %d, want 2", m.DeliveryCount)
				}
			}},
		Scenario{Name: "settle-after-expiry-lock-lost", Seed: "002 Complete fails when the lock has expired (MessageLockLost)", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreLockExpiry, "complete after lock expiry"}}, Run: func(t *T) {
				q := lock5s(t)
				t.Send(q, Text("x"))
				r := t.Receiver(q, "", nil)
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				wait(t, time.Until(*m.LockedUntil)+1500*time.Millisecond)
				t.Check("complete after lock expiry")
				err := r.CompleteMessage(t.ctx, m, nil)
				if Code(err) != azservicebus.CodeLockLost {
					t.Fatalf("complete after expiry: %v, want lock lost", err)
				}
			}},
		Scenario{Name: "renew-lock-extends", Seed: "002 RenewMessageLock extends the lock", Protocol: AMQP,
			Run: func(t *T) {
				q := lock5s(t)
				t.Send(q, Text("x"))
				r := t.Receiver(q, "", nil)
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				before := *m.LockedUntil
				wait(t, 3*time.Second)
				t.must(r.RenewMessageLock(t.ctx, m, nil), "renew")
				if !m.LockedUntil.After(before) {
					t.Errorf("LockedUntil %v not after %v", m.LockedUntil, before)
				}
				wait(t, 3*time.Second) // past the original lock
				t.ReceiveNone(t.Receiver(q, "", nil), time.Second, "a renewed lock must keep the message hidden")
				t.Complete(r, m)
			}},
		Scenario{Name: "complete-removes", Seed: "002 Complete: the message is removed from the queue", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreComplete, "not back after its lock"}}, Run: func(t *T) {
				q := lock5s(t)
				t.Send(q, Text("x"))
				r := t.Receiver(q, "", nil)
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				t.Complete(r, m)
				// Past the 5 s lock: a complete that did nothing would
				// bring the message back by then.
				t.Check("not back after its lock")
				t.ReceiveNone(r, time.Until(*m.LockedUntil)+2*time.Second, "a completed message must not come back")
			}},
		Scenario{Name: "settled-lock-is-gone", Seed: "002 once a message is completed its lock is gone (renew fails with lock lost)", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreComplete, "renew refused"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("x"))
				r := t.Receiver(q, "", nil)
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				t.Complete(r, m)
				t.Check("renew refused")
				if err := r.RenewMessageLock(t.ctx, m, nil); Code(err) != azservicebus.CodeLockLost {
					t.Fatalf("renewing the lock of a completed message: %v, want lock lost", err)
				}
			}},
		Scenario{Name: "abandon-redelivers-now", Seed: "002 Abandon releases the lock at once; DeliveryCount+1", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("x"))
			r := t.Receiver(q, "", nil)
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			t.must(r.AbandonMessage(t.ctx, m, nil), "abandon")
			m2 := t.ReceiveN(t.Receiver(q, "", nil), 1, 5*time.Second)[0]
			if m2.DeliveryCount != 2 || *m2.SequenceNumber != *m.SequenceNumber {
				t.Fatalf("after abandon got seq %d count %d, want seq %d count 2", *m2.SequenceNumber, m2.DeliveryCount, *m.SequenceNumber)
			}
		}},
		Scenario{Name: "abandon-modifies-properties", Seed: "amqp.md §5.1 abandon merges propertiesToModify", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, &azservicebus.Message{Body: []byte("x"), ApplicationProperties: map[string]any{"keep": "k", "n": int64(1)}})
			r := t.Receiver(q, "", nil)
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			t.must(r.AbandonMessage(t.ctx, m, &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{"n": int64(2), "new": "v"}}), "abandon")
			m2 := t.ReceiveN(r, 1, 5*time.Second)[0]
			if m2.ApplicationProperties["n"] != int64(2) || m2.ApplicationProperties["new"] != "v" || m2.ApplicationProperties["keep"] != "k" {
				t.Fatalf("properties after abandon = %v", m2.ApplicationProperties)
			}
		}},
		Scenario{Name: "deadletter-with-reason", Seed: "002 DeadLetter moves the message to the dead-letter queue with a reason", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "in the dead-letter subqueue"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("bad"))
				r := t.Receiver(q, "", nil)
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				t.must(r.DeadLetterMessage(t.ctx, m, &azservicebus.DeadLetterOptions{Reason: to.Ptr("poison"), ErrorDescription: to.Ptr("cannot parse")}), "dead-letter")
				t.Check("in the dead-letter subqueue")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if deref(d.DeadLetterReason) != "poison" || deref(d.DeadLetterErrorDescription) != "cannot parse" {
					t.Fatalf("DLQ message reason %v description %v", deref(d.DeadLetterReason), deref(d.DeadLetterErrorDescription))
				}
				if string(d.Body) != "bad" {
					t.Errorf("DLQ body %q", d.Body)
				}
			}},
		Scenario{Name: "deadletter-queue-settleable", Seed: "002 the dead-letter subqueue is received and settled like a queue", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "in the dead-letter subqueue"}, {FaultIgnoreComplete, "completed dead letter gone"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("d"))
				r := t.Receiver(q, "", nil)
				t.must(r.DeadLetterMessage(t.ctx, t.ReceiveN(r, 1, 10*time.Second)[0], nil), "dead-letter")
				dlq := t.DLQ(q, "")
				t.Check("in the dead-letter subqueue")
				m := t.ReceiveN(dlq, 1, 10*time.Second)[0]
				t.Complete(dlq, m)
				t.Check("completed dead letter gone")
				t.expectNothingStored(t.DLQ(q, ""), "a completed dead letter must be gone")
			}},
		Scenario{Name: "max-delivery-count-deadletters", Seed: "002 after MaxDeliveryCount deliveries the message goes to the DLQ (MaxDeliveryCountExceeded)", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "in the dead-letter subqueue"}}, Run: func(t *T) {
				q := t.Queue("cf-maxdelivery2")
				t.Send(q, Text("x"))
				r := t.Receiver(q, "", nil)
				for range 2 {
					t.must(r.AbandonMessage(t.ctx, t.ReceiveN(r, 1, 10*time.Second)[0], nil), "abandon")
				}
				t.ReceiveNone(r, 2*time.Second, "the message must have left the queue")
				t.Check("in the dead-letter subqueue")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if deref(d.DeadLetterReason) != "MaxDeliveryCountExceeded" {
					t.Fatalf("DeadLetterReason = %v", deref(d.DeadLetterReason))
				}
			}},
		Scenario{Name: "defer-then-receive-deferred", Seed: "002 Defer: the message is only reachable by sequence number", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("later"))
			r := t.Receiver(q, "", nil)
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			t.must(r.DeferMessage(t.ctx, m, nil), "defer")
			t.ReceiveNone(r, 2*time.Second, "a deferred message must not be received normally")
			got, err := r.ReceiveDeferredMessages(t.ctx, []int64{*m.SequenceNumber}, nil)
			t.must(err, "receive deferred")
			if len(got) != 1 || string(got[0].Body) != "later" || got[0].State != azservicebus.MessageStateDeferred {
				t.Fatalf("deferred receive got %d messages (state %v)", len(got), stateOf(got))
			}
			t.Complete(r, got[0])
		}},
		Scenario{Name: "settle-by-other-receiver", Seed: "amqp.md §5.3 a lock token is valid from another link", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreComplete, "gone"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("x"))
				r1 := t.Receiver(q, "", nil)
				m := t.ReceiveN(r1, 1, 10*time.Second)[0]
				t.must(r1.Close(t.ctx), "closing the first receiver")
				r2 := t.Receiver(q, "", nil)
				t.must(r2.CompleteMessage(t.ctx, m, nil), "complete through another receiver")
				t.Check("gone")
				t.expectNothingStored(r2, "the message was completed")
			}},
	)
}

func stateOf(ms []*azservicebus.ReceivedMessage) any {
	if len(ms) == 0 {
		return nil
	}
	return ms[0].State
}

// wait pauses a scenario for d, as black-box timing requires; it ends
// early if the scenario's budget runs out.
func wait(t *T, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-t.ctx.Done():
		t.Abortf("time budget exhausted while waiting")
	}
}
