package conformance

import (
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Message sessions: seed 004.

func sessionQueue(t *T) string {
	return t.Queue("cf-session")
}

func inSession(sid, body string) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(body), SessionID: to.Ptr(sid)}
}

func (t *T) acceptSession(q, sid string) *azservicebus.SessionReceiver {
	t.live()
	r, err := t.Client().AcceptSessionForQueue(t.ctx, q, sid, nil)
	t.must(err, "accept session %q", sid)
	t.Cleanup(func() { _ = r.Close(t.ctx) })
	return r
}

func init() {
	register(
		Scenario{Name: "session-fifo", Seed: "004 sessions give a FIFO guarantee within a session", Protocol: AMQP,
			Detects: []Detection{{FaultBreakFIFO, "order"}}, Run: func(t *T) {
				q := sessionQueue(t)
				var msgs []*azservicebus.Message
				var want []string
				for i := range 6 {
					b := fmt.Sprint(i)
					msgs = append(msgs, inSession("s1", b))
					want = append(want, b)
				}
				t.Send(q, msgs...)
				r := t.acceptSession(q, "s1")
				var got []*azservicebus.ReceivedMessage
				for len(got) < len(want) {
					batch := t.ReceiveN(r, 1, 10*time.Second)
					for _, m := range batch {
						t.Complete(r, m)
					}
					got = append(got, batch...)
				}
				t.Check("order")
				t.expectBodies(got, want...)
			}},
		Scenario{Name: "session-requires-session-id", Seed: "004 a session-aware entity requires the SessionId to be set", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			if err := t.Sender(q).SendMessage(t.ctx, Text("no session"), nil); err == nil {
				t.Fatalf("a message without SessionId was accepted by a session queue")
			}
		}},
		Scenario{Name: "session-receiver-required", Seed: "004 messages of a session entity are received only through a session receiver", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "x"))
			r := t.Receiver(q, "", nil)
			ctx, cancel := contextWithTimeout(t, 5*time.Second)
			defer cancel()
			if msgs, err := r.ReceiveMessages(ctx, 1, nil); err == nil && len(msgs) > 0 {
				t.Fatalf("a non-session receiver got %q from a session queue", msgs[0].Body)
			}
		}},
		Scenario{Name: "session-exclusive-lock", Seed: "004 a session held by one receiver cannot be accepted by another (com.microsoft:session-cannot-be-locked)", Protocol: AMQP,
			Detects: []Detection{{FaultShareSessionLocks, "a second accept is refused"}}, Run: func(t *T) {
				q := sessionQueue(t)
				t.Send(q, inSession("s1", "x"))
				t.acceptSession(q, "s1")
				ctx, cancel := contextWithTimeout(t, 10*time.Second)
				defer cancel()
				t.Check("a second accept is refused")
				r2, err := t.Client().AcceptSessionForQueue(ctx, q, "s1", nil)
				switch {
				case err == nil:
					_ = r2.Close(t.ctx)
					t.Fatalf("a second receiver accepted a locked session")
				case ctx.Err() != nil:
					// No answer is not a refusal.
					t.Abortf("accepting a locked session: no answer within 10 s: %v", err)
				case amqpCondition(err) != "com.microsoft:session-cannot-be-locked":
					t.Fatalf("accepting a locked session: %v, want com.microsoft:session-cannot-be-locked", err)
				}
			}},
		Scenario{Name: "session-accept-next", Seed: "004 accept the next available session", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("only", "x"))
			r, err := t.Client().AcceptNextSessionForQueue(t.ctx, q, nil)
			t.must(err, "accept next session")
			t.Cleanup(func() { _ = r.Close(t.ctx) })
			if r.SessionID() != "only" {
				t.Fatalf("accepted session %q, want only", r.SessionID())
			}
			t.expectBodies(t.ReceiveN(r, 1, 10*time.Second), "x")
		}},
		Scenario{Name: "session-accept-next-timeout", Seed: "004 accepting the next session times out when none has messages", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			ctx, cancel := contextWithTimeout(t, 10*time.Second)
			defer cancel()
			r, err := t.Client().AcceptNextSessionForQueue(ctx, q, nil)
			if err == nil {
				_ = r.Close(t.ctx)
				t.Fatalf("accepted session %q on an empty queue", r.SessionID())
			}
		}},
		Scenario{Name: "session-later-arrivals", Seed: "004 the session lock covers messages that arrive later", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "first"))
			r := t.acceptSession(q, "s1")
			t.Complete(r, t.ReceiveN(r, 1, 10*time.Second)[0])
			t.Send(q, inSession("s1", "second"))
			t.expectBodies(t.ReceiveN(r, 1, 10*time.Second), "second")
		}},
		Scenario{Name: "session-abandon-same-next", Seed: "004 abandon in a session: the same message is delivered next", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "a"), inSession("s1", "b"))
			r := t.acceptSession(q, "s1")
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			t.must(r.AbandonMessage(t.ctx, m, nil), "abandon")
			m2 := t.ReceiveN(r, 1, 10*time.Second)[0]
			if string(m2.Body) != "a" || m2.DeliveryCount != 2 {
				t.Fatalf("after abandon got %q count %d, want a count 2", m2.Body, m2.DeliveryCount)
			}
		}},
		Scenario{Name: "session-state-roundtrip", Seed: "004 session state is set and read by the session holder", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "x"))
			r := t.acceptSession(q, "s1")
			t.must(r.SetSessionState(t.ctx, []byte("step-2"), nil), "set state")
			st, err := r.GetSessionState(t.ctx, nil)
			t.must(err, "get state")
			if string(st) != "step-2" {
				t.Fatalf("state %q, want step-2", st)
			}
		}},
		Scenario{Name: "session-state-outlives-messages", Seed: "004 session state remains while the session has no messages", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "x"))
			r := t.acceptSession(q, "s1")
			t.Complete(r, t.ReceiveN(r, 1, 10*time.Second)[0])
			t.must(r.SetSessionState(t.ctx, []byte("kept"), nil), "set state")
			t.must(r.Close(t.ctx), "close session")
			r2 := t.acceptSession(q, "s1")
			st, err := r2.GetSessionState(t.ctx, nil)
			t.must(err, "get state")
			if string(st) != "kept" {
				t.Fatalf("state after reacquire %q, want kept", st)
			}
			t.must(r2.SetSessionState(t.ctx, nil, nil), "clear state")
		}},
		Scenario{Name: "session-lock-renew", Seed: "004 the session lock can be renewed", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "x"))
			r := t.acceptSession(q, "s1")
			before := r.LockedUntil()
			wait(t, 1500*time.Millisecond)
			t.must(r.RenewSessionLock(t.ctx, nil), "renew session lock")
			if !r.LockedUntil().After(before) {
				t.Fatalf("LockedUntil %v not after %v", r.LockedUntil(), before)
			}
		}},
		Scenario{Name: "session-lock-expiry-releases", Seed: "004 when the session lock expires another receiver can accept the session", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreLockExpiry, "accepted again after the session lock expired"}}, Run: func(t *T) {
				q := sessionQueue(t)
				t.Send(q, inSession("s1", "x"))
				r := t.acceptSession(q, "s1")
				t.ReceiveN(r, 1, 10*time.Second)
				wait(t, time.Until(r.LockedUntil())+1500*time.Millisecond)
				t.Check("accepted again after the session lock expired")
				r2, err := t.Client().AcceptSessionForQueue(t.ctx, q, "s1", nil)
				if amqpCondition(err) == "com.microsoft:session-cannot-be-locked" {
					t.Fatalf("the session is still locked after its lock expired: %v", err)
				}
				t.must(err, "accept session %q", "s1")
				t.Cleanup(func() { _ = r2.Close(t.ctx) })
				m := t.ReceiveN(r2, 1, 10*time.Second)[0]
				if m.DeliveryCount != 2 {
					t.Errorf("after session lock expiry DeliveryCount %d, want 2", m.DeliveryCount)
				}
			}},
		Scenario{Name: "session-close-no-count", Seed: "004 delivery count table: closing the receiver does not count the delivery", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("s1", "x"))
			r := t.acceptSession(q, "s1")
			t.ReceiveN(r, 1, 10*time.Second)
			t.must(r.Close(t.ctx), "close")
			m := t.ReceiveN(t.acceptSession(q, "s1"), 1, 10*time.Second)[0]
			if m.DeliveryCount != 1 {
				t.Errorf("after a clean close DeliveryCount %d, want 1", m.DeliveryCount)
			}
		}},
		Scenario{Name: "session-request-response", Seed: "004 request-response: replies carry ReplyToSessionId as their SessionId", Protocol: AMQP, Run: func(t *T) {
			req := t.Queue("cf-basic")
			replies := sessionQueue(t)
			t.Send(req, &azservicebus.Message{Body: []byte("ping"), ReplyTo: to.Ptr(replies), ReplyToSessionID: to.Ptr("caller-7")})
			r := t.Receiver(req, "", nil)
			m := t.ReceiveN(r, 1, 10*time.Second)[0]
			t.Send(deref(m.ReplyTo).(string), inSession(deref(m.ReplyToSessionID).(string), "pong"))
			t.Complete(r, m)
			t.expectBodies(t.ReceiveN(t.acceptSession(replies, "caller-7"), 1, 10*time.Second), "pong")
		}},
		Scenario{Name: "session-list-sessions", Seed: "004 sessions with messages or state can be enumerated", Protocol: AMQP, Run: func(t *T) {
			q := sessionQueue(t)
			t.Send(q, inSession("a", "1"), inSession("b", "2"))
			p := t.Client().NewListSessionsForQueuePager(q, nil)
			seen := map[string]bool{}
			for p.More() {
				page, err := p.NextPage(t.ctx)
				t.must(err, "list sessions")
				for _, id := range page.Sessions {
					seen[id] = true
				}
			}
			if !seen["a"] || !seen["b"] {
				t.Fatalf("listed sessions %v, want a and b", seen)
			}
		}},
	)
}
