package conformance

import (
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Lock tokens shared between AMQP and REST. Service Bus itself does not
// share them (rest.md §1.7); omnibus does, so these run only when the
// target says so (--cross-protocol).

func (t *T) needCrossProtocol() {
	if !t.target.CrossProtocolLocks {
		t.Skipf("the endpoint does not share lock tokens between AMQP and REST (--cross-protocol)")
	}
}

// restLocked peek-locks one message over REST and returns its lock token
// and the Location path.
func (t *T) restLocked(q string) (lock [16]byte, loc string, until time.Time) {
	resp := t.lockedMessage(q)
	bp := t.brokerProps(resp)
	lock, err := parseUUID(bp.String("LockToken"))
	t.must(err, "LockToken")
	until, err = bp.Time("LockedUntilUtc")
	t.must(err, "LockedUntilUtc")
	return lock, t.location(resp), until
}

func init() {
	register(
		Scenario{Name: "xproto-rest-lock-amqp-complete", Seed: "amqp.md §5.3 a REST lock token completes over AMQP ($management update-disposition)", Protocol: Both,
			Detects: []Detection{{FaultIgnoreComplete, "gone"}}, Run: func(t *T) {
				t.needCrossProtocol()
				q := t.Queue("cf-basic")
				t.Send(q, Text("x"))
				lock, _, _ := t.restLocked(q)
				r := t.Receiver(q, "", nil)
				t.must(r.CompleteMessage(t.ctx, &azservicebus.ReceivedMessage{LockToken: lock}, nil), "complete by lock token over AMQP")
				t.Check("gone")
				t.expectStatus(t.peekLock(q, 1), http.StatusNoContent, "peek-lock after the AMQP complete")
				peeked, err := r.PeekMessages(t.ctx, 10, nil)
				t.must(err, "peek")
				if len(peeked) != 0 {
					t.Fatalf("%d messages left after completing over AMQP", len(peeked))
				}
			}},
		Scenario{Name: "xproto-amqp-lock-rest-complete", Seed: "rest.md §1.7 an AMQP lock token completes over REST (DELETE …/messages/{seq}/{lock})", Protocol: Both,
			Detects: []Detection{{FaultIgnoreComplete, "gone"}}, Run: func(t *T) {
				t.needCrossProtocol()
				q := t.Queue("cf-basic")
				t.Send(q, Text("x"))
				m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
				t.expectStatus(t.REST(http.MethodDelete, messagePath(q, *m.SequenceNumber, uuidString(m.LockToken)), nil, nil), http.StatusOK, "complete over REST")
				t.Check("gone")
				t.expectNothingStored(t.Receiver(q, "", nil), "the message was completed over REST")
			}},
		Scenario{Name: "xproto-amqp-lock-rest-unlock", Seed: "rest.md §1.7 an AMQP lock token unlocks over REST; DeliveryCount 2 on redelivery", Protocol: Both, Run: func(t *T) {
			t.needCrossProtocol()
			q := t.Queue("cf-basic")
			t.Send(q, Text("x"))
			m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			t.expectStatus(t.REST(http.MethodPut, messagePath(q, *m.SequenceNumber, uuidString(m.LockToken)), nil, nil), http.StatusOK, "unlock over REST")
			m2 := t.ReceiveN(t.Receiver(q, "", nil), 1, 5*time.Second)[0]
			if m2.DeliveryCount != 2 {
				t.Fatalf("after a REST unlock DeliveryCount %d, want 2", m2.DeliveryCount)
			}
		}},
		Scenario{Name: "xproto-amqp-lock-rest-renew", Seed: "rest.md §1.7 an AMQP lock token is renewed over REST", Protocol: Both, Run: func(t *T) {
			t.needCrossProtocol()
			q := lock5s(t)
			t.Send(q, Text("x"))
			r := t.Receiver(q, "", nil)
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			wait(t, 3*time.Second)
			t.expectStatus(t.REST(http.MethodPost, messagePath(q, *m.SequenceNumber, uuidString(m.LockToken)), nil, nil), http.StatusOK, "renew over REST")
			wait(t, time.Until(*m.LockedUntil)+time.Second) // past the first lock, 2 s before the renewed one ends
			t.ReceiveNone(t.Receiver(q, "", nil), time.Second, "the lock renewed over REST must keep the message hidden")
			t.Complete(r, m)
		}},
		Scenario{Name: "xproto-rest-lock-expiry-seen-by-amqp", Seed: "002 a lapsed REST lock is lost for AMQP too, and the message is redelivered with DeliveryCount 2", Protocol: Both,
			Detects: []Detection{{FaultIgnoreLockExpiry, "complete after lock expiry"}}, Run: func(t *T) {
				t.needCrossProtocol()
				q := lock5s(t)
				t.Send(q, Text("x"))
				lock, _, until := t.restLocked(q)
				wait(t, time.Until(until)+2*time.Second)
				r := t.Receiver(q, "", nil)
				t.Check("complete after lock expiry")
				if err := r.CompleteMessage(t.ctx, &azservicebus.ReceivedMessage{LockToken: lock}, nil); Code(err) != azservicebus.CodeLockLost {
					t.Fatalf("AMQP complete with an expired REST lock: %v, want lock lost", err)
				}
				t.Check("redelivered after lock expiry")
				if m := t.ReceiveN(r, 1, 10*time.Second)[0]; m.DeliveryCount != 2 {
					t.Errorf("redelivered over AMQP with DeliveryCount %d, want 2", m.DeliveryCount)
				}
			}},
		Scenario{Name: "xproto-amqp-lock-expiry-seen-by-rest", Seed: "002 a lapsed AMQP lock is gone for REST too (404)", Protocol: Both,
			Detects: []Detection{{FaultIgnoreLockExpiry, "complete after lock expiry"}}, Run: func(t *T) {
				t.needCrossProtocol()
				q := lock5s(t)
				t.Send(q, Text("x"))
				m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
				wait(t, time.Until(*m.LockedUntil)+2*time.Second)
				t.Check("complete after lock expiry")
				t.expectStatus(t.REST(http.MethodDelete, messagePath(q, *m.SequenceNumber, uuidString(m.LockToken)), nil, nil), http.StatusNotFound, "REST complete with an expired AMQP lock")
			}},
	)
}
