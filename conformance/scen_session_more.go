package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// More of seed 004: peek, defer and dead-letter inside a session,
// de-multiplexing of interleaved sessions, session subscriptions.

func init() {
	register(
		Scenario{Name: "session-peek", Seed: "004 a session's messages can be peeked by its holder without locking or counting them", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "a"), inSession("s1", "b"), inSession("s2", "other"))
			r := t.acceptSession(q, "s1")
			peeked, err := r.PeekMessages(t.ctx, 10, nil)
			t.must(err, "peek in session")
			t.expectBodies(peeked, "a", "b")
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			if string(m.Body) != "a" || m.DeliveryCount != 1 {
				t.Fatalf("after peeking, received %q with DeliveryCount %d, want a with 1", m.Body, m.DeliveryCount)
			}
		}},
		Scenario{Name: "session-defer", Seed: "004/002 a message deferred inside a session is received later by sequence number through the session", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "later"), inSession("s1", "next"))
			r := t.acceptSession(q, "s1")
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			t.must(r.DeferMessage(t.ctx, m, nil), "defer")
			n := t.ReceiveN(r, 1, 10*time.Second)[0]
			if string(n.Body) != "next" {
				t.Fatalf("after deferring, the session delivered %q, want next", n.Body)
			}
			t.Complete(r, n)
			got, err := r.ReceiveDeferredMessages(t.ctx, []int64{*m.SequenceNumber}, nil)
			t.must(err, "receive deferred in session")
			if len(got) != 1 || string(got[0].Body) != "later" {
				t.Fatalf("deferred receive got %d messages", len(got))
			}
			t.Complete(r, got[0])
		}},
		Scenario{Name: "session-deadletter", Seed: "004/002 a message dead-lettered inside a session reaches the DLQ with its SessionId", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "in the dead-letter subqueue"}}, Run: func(t *T) {
				q := sessionQueue(t)
				t.Send(q, inSession("s1", "bad"))
				r := t.acceptSession(q, "s1")
				t.must(r.DeadLetterMessage(t.ctx, t.ReceiveN(r, 1, 10*time.Second)[0], &azservicebus.DeadLetterOptions{Reason: to.Ptr("in-session")}), "dead-letter")
				t.Check("in the dead-letter subqueue")
				d := t.ReceiveN(t.DLQ(q, ""), 1, 10*time.Second)[0]
				if string(d.Body) != "bad" || deref(d.SessionID) != "s1" || deref(d.DeadLetterReason) != "in-session" {
					t.Fatalf("DLQ message %q session %v reason %v", d.Body, deref(d.SessionID), deref(d.DeadLetterReason))
				}
			}},
		Scenario{Name: "session-interleaved-demux", Seed: "004 interleaved streams are de-multiplexed: each session receiver gets only its session, in order", Protocol: AMQP,
			Detects: []Detection{{FaultBreakFIFO, "order"}}, Run: func(t *T) {
				q := sessionQueue(t)
				var msgs []*azservicebus.Message
				for i := range 5 {
					msgs = append(msgs, inSession("x", fmt.Sprint("x", i)), inSession("y", fmt.Sprint("y", i)))
				}
				t.Send(q, msgs...)
				for _, sid := range []string{"y", "x"} {
					t.Check("")
					r := t.acceptSession(q, sid)
					var got []*azservicebus.ReceivedMessage
					for len(got) < 5 {
						batch := t.ReceiveN(r, 1, 10*time.Second)
						for _, m := range batch {
							t.Complete(r, m)
						}
						got = append(got, batch...)
					}
					t.Check("order")
					t.expectBodies(got, sid+"0", sid+"1", sid+"2", sid+"3", sid+"4")
				}
			}},
		Scenario{Name: "session-abandon-counts", Seed: "004 delivery count table: abandoning a session message counts the delivery", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "x"))
			r := t.acceptSession(q, "s1")
			for want := uint32(1); want <= 3; want++ {
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				if m.DeliveryCount != want {
					t.Fatalf("delivery %d has DeliveryCount %d", want, m.DeliveryCount)
				}
				t.must(r.AbandonMessage(t.ctx, m, nil), "abandon")
			}
		}},
		Scenario{Name: "session-lock-expiry-settle-fails", Seed: "002/004 after the session lock expires its messages cannot be completed; they are redelivered", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreLockExpiry, "redelivered after the session lock expired"}}, Run: func(t *T) {
				q := sessionQueue(t)
				t.Send(q, inSession("s1", "x"))
				r := t.acceptSession(q, "s1")
				m := t.ReceiveN(r, 1, 10*time.Second)[0]
				wait(t, time.Until(r.LockedUntil())+2*time.Second)
				// The completion must fail: Service Bus detaches the
				// receiver's link when the session lock is lost. The Go SDK
				// then settles again through $management and retries the
				// 410 it gets with backoff (about 4 s, then 14 s, 24 s)
				// before it returns the error: the deadline lets its first
				// retry run, where a success would show (omnibus once
				// answered the completion rejected, and go-amqp reported
				// the SDK's second try done), and no more.
				t.Check("redelivered after the session lock expired")
				ctx, cancel := context.WithTimeout(t.ctx, 8*time.Second)
				err := r.CompleteMessage(ctx, m, nil)
				cancel()
				if err == nil {
					t.Errorf("CompleteMessage after the session lock expired succeeded")
				}
				_ = r.Close(t.ctx)
				got := t.receiveUpTo(t.acceptSession(q, "s1"), 1, 5*time.Second)
				if len(got) == 0 {
					t.Fatalf("the message was completed after its session lock expired (complete returned %v)", err)
				}
				if got[0].DeliveryCount != 2 {
					t.Errorf("redelivered with DeliveryCount %d, want 2", got[0].DeliveryCount)
				}
			}},
		Scenario{Name: "session-subscription", Seed: "004 topics with session-enabled subscriptions: each session is received in order from the subscription", Protocol: AMQP,
			Detects: []Detection{{FaultBreakFIFO, "order"}}, Run: func(t *T) {
				tp := t.Topic("cf-topic-session")
				var msgs []*azservicebus.Message
				for i := range 5 {
					msgs = append(msgs, inSession("s1", fmt.Sprint(i)))
				}
				t.Send(tp, msgs...)
				t.live()
				r, err := t.Client().AcceptSessionForSubscription(t.ctx, tp, "sessions", "s1", nil)
				t.must(err, "accept session on the subscription")
				t.Cleanup(func() { _ = r.Close(t.ctx) })
				var got []*azservicebus.ReceivedMessage
				for len(got) < 5 {
					batch := t.ReceiveN(r, 1, 10*time.Second)
					for _, m := range batch {
						t.Complete(r, m)
					}
					got = append(got, batch...)
				}
				t.Check("order")
				t.expectBodies(got, "0", "1", "2", "3", "4")
				t.Check("the plain subscription got every message")
				t.ReceiveN(t.Receiver(tp, "plain", nil), 5, 10*time.Second)
			}},
	)
}
