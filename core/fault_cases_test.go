package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

const (
	subA = "t/Subscriptions/a"
	subB = "t/Subscriptions/b"
	subC = "t/Subscriptions/c"
	subF = "t/Subscriptions/f"
)

// everySub is what a message sent to t leaves in each subscription.
func everySub(body string) map[string][]string {
	return map[string][]string{subA: {body}, subB: {body}, subC: {body}, subF: {body}}
}

func with(base map[string][]string, path string, bodies ...string) map[string][]string {
	out := make(map[string][]string, len(base)+1)
	for k, v := range base {
		out[k] = v
	}
	out[path] = bodies
	return out
}

func without(base map[string][]string, path string) map[string][]string {
	out := with(base, path)
	delete(out, path)
	return out
}

// lockOne sends body to path's queue or topic and peek-locks one message
// of from.
func lockOne(t *testing.T, e *coretest.Env, to, from, body string) *core.Message {
	t.Helper()
	e.MustSend(t, to, coretest.Text(body))
	got := e.MustReceive(t, from, core.PeekLock, 1)
	if len(got) != 1 {
		t.Fatalf("nothing to lock on %s", from)
	}
	return got[0]
}

func settle(path string, o core.Outcome) func(*testing.T, *coretest.Env, any) error {
	return func(t *testing.T, e *coretest.Env, s any) error {
		return e.Broker.Settle(t.Context(), path, s.(*core.Message).LockToken, o)
	}
}

func nothing(*testing.T, *coretest.Env) any { return nil }

func faultCases() []faultCase {
	props := map[string]any{"note": "kept"}
	return []faultCase{
		{
			name:  "send-queue",
			setup: nothing,
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				_, err := e.Broker.Send(t.Context(), "q", coretest.Text("m1"), coretest.Text("m2"))
				return err
			},
			want: map[string][]string{"q": {"m1", "m2"}},
		},
		{
			name:  "send-topic-fan-out",
			setup: nothing,
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				_, err := e.Broker.Send(t.Context(), "t", coretest.Text("x"))
				return err
			},
			want: everySub("x"),
		},
		{
			name:  "send-forwarded",
			setup: nothing,
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				_, err := e.Broker.Send(t.Context(), "fwd", coretest.Text("x"))
				return err
			},
			want: map[string][]string{"q": {"x"}},
		},
		{
			name:  "send-deduplicated",
			setup: nothing,
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				m := coretest.Text("x")
				m.MessageID = "id-1"
				_, err := e.Broker.Send(t.Context(), "dd", m)
				return err
			},
			retry: func(t *testing.T, e *coretest.Env, _ any) error {
				// The same id again: stored once, whether or not the
				// first attempt was.
				m := coretest.Text("x")
				m.MessageID = "id-1"
				_, err := e.Broker.Send(t.Context(), "dd", m)
				return err
			},
			want: map[string][]string{"dd": {"x"}},
		},
		{
			name:  "send-async",
			setup: nothing,
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				done := make(chan error, 1)
				if err := e.Broker.SendAsync("t", []*core.Message{coretest.Text("x")}, func(_ []int64, err error) { done <- err }); err != nil {
					return err
				}
				return <-done
			},
			want: everySub("x"),
		},
		{
			name:  "complete-shared-body",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "t", subA, "x") },
			op:    settle(subA, core.Outcome{Kind: core.Complete}),
			want:  without(everySub("x"), subA),
		},
		{
			name: "complete-many",
			setup: func(t *testing.T, e *coretest.Env) any {
				e.MustSend(t, "t", coretest.Text("x"), coretest.Text("y"))
				return e.MustReceive(t, subB, core.PeekLock, 2)
			},
			op: func(t *testing.T, e *coretest.Env, s any) error {
				var toks []core.LockToken
				for _, m := range s.([]*core.Message) {
					toks = append(toks, m.LockToken)
				}
				for _, err := range e.Broker.CompleteMany(subB, toks, true) {
					if err != nil {
						return err
					}
				}
				return nil
			},
			want: map[string][]string{subA: {"x", "y"}, subC: {"x", "y"}, subF: {"x", "y"}},
		},
		{
			name:  "abandon-with-properties-shared-body",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "t", subA, "x") },
			op:    settle(subA, core.Outcome{Kind: core.Abandon, Properties: props}),
			want:  everySub("x"),
		},
		{
			name:  "release",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "q", "q", "x") },
			op:    settle("q", core.Outcome{Kind: core.Release}),
			want:  map[string][]string{"q": {"x"}},
		},
		{
			name:  "defer",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "t", subA, "x") },
			op:    settle(subA, core.Outcome{Kind: core.Defer}),
			want:  everySub("x"),
		},
		{
			name:  "defer-with-properties-shared-body",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "t", subA, "x") },
			op:    settle(subA, core.Outcome{Kind: core.Defer, Properties: props}),
			want:  everySub("x"),
		},
		{
			name:  "dead-letter-shared-body",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "t", subA, "x") },
			op:    settle(subA, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "test"}),
			want:  with(without(everySub("x"), subA), subA+"/$DeadLetterQueue", "x"),
		},
		{
			name:  "dead-letter-forwarded-shared-body",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "t", subF, "x") },
			op:    settle(subF, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "test"}),
			want:  with(without(everySub("x"), subF), "q2", "x"),
		},
		{
			name: "dead-letter-again-in-dead-letter-subqueue",
			setup: func(t *testing.T, e *coretest.Env) any {
				m := lockOne(t, e, "t", subA, "x")
				e.MustSettle(t, subA, m.LockToken, core.Outcome{Kind: core.DeadLetter})
				return e.MustReceive(t, subA+"/$DeadLetterQueue", core.PeekLock, 1)[0]
			},
			op:   settle(subA+"/$DeadLetterQueue", core.Outcome{Kind: core.DeadLetter, Properties: props}),
			want: with(without(everySub("x"), subA), subA+"/$DeadLetterQueue", "x"),
		},
		{
			name:  "abandon-out-of-deliveries",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "once", "once", "x") },
			op:    settle("once", core.Outcome{Kind: core.Abandon}),
			want:  map[string][]string{"once/$DeadLetterQueue": {"x"}},
		},
		{
			name:  "receive-and-delete-shared-body",
			setup: func(t *testing.T, e *coretest.Env) any { e.MustSend(t, "t", coretest.Text("x")); return nil },
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				_, err := e.Broker.Receive(coretest.Now(t), subA, core.ReceiveOptions{Mode: core.ReceiveAndDelete})
				return err
			},
			want: without(everySub("x"), subA),
		},
		{
			name:  "peek-lock-receive",
			setup: func(t *testing.T, e *coretest.Env) any { e.MustSend(t, "q", coretest.Text("x")); return nil },
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				// The delivery count is not waited for: a failed write
				// still delivers, and the lock works.
				got, err := e.Broker.Receive(coretest.Now(t), "q", core.ReceiveOptions{})
				if err != nil || len(got) != 1 {
					t.Fatalf("peek-lock receive: %v %v", got, err)
				}
				return e.Broker.Settle(t.Context(), "q", got[0].LockToken, core.Outcome{Kind: core.Abandon})
			},
			want: map[string][]string{"q": {"x"}},
		},
		{
			name:  "lock-expiry-out-of-deliveries",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "once", "once", "x") },
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				e.Clock.Advance(2 * time.Minute)
				return nil
			},
			retry: func(t *testing.T, e *coretest.Env, _ any) error {
				// A move that failed left the message available; its next
				// abandon moves it.
				if got := e.MustReceive(t, "once", core.PeekLock, 1); len(got) == 1 {
					return e.Broker.Settle(t.Context(), "once", got[0].LockToken, core.Outcome{Kind: core.Abandon})
				}
				return nil
			},
			want: map[string][]string{"once/$DeadLetterQueue": {"x"}},
		},
		{
			name: "expiry-to-dead-letter",
			setup: func(t *testing.T, e *coretest.Env) any {
				m := coretest.Text("x")
				m.TimeToLive = time.Minute
				e.MustSend(t, "ttl", m)
				e.Clock.Advance(2 * time.Minute)
				return nil
			},
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				_, err := e.Broker.Receive(coretest.Now(t), "ttl", core.ReceiveOptions{})
				return err
			},
			want: map[string][]string{"ttl/$DeadLetterQueue": {"x"}},
		},
		{
			name: "expiry-dropped-shared-body",
			setup: func(t *testing.T, e *coretest.Env) any {
				m := coretest.Text("x")
				m.TimeToLive = time.Minute
				e.MustSend(t, "t", m)
				e.Clock.Advance(2 * time.Minute)
				return nil
			},
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				_, err := e.Broker.Receive(coretest.Now(t), subA, core.ReceiveOptions{})
				return err
			},
			// The other copies expire as the drain meets them.
			want: map[string][]string{},
		},
		{
			name: "cancel-scheduled-topic",
			setup: func(t *testing.T, e *coretest.Env) any {
				m := coretest.Text("later")
				m.ScheduledEnqueueTime = coretest.Epoch.Add(time.Hour)
				return e.MustSend(t, "t", m)[0]
			},
			op: func(t *testing.T, e *coretest.Env, s any) error {
				return e.Broker.CancelScheduled(t.Context(), "t", []int64{s.(int64)})
			},
			want: map[string][]string{},
		},
		{
			// 20 messages × 3 subscriptions sharing each body: one write
			// releases many references, several to the same body.
			name: "cancel-scheduled-topic-many",
			setup: func(t *testing.T, e *coretest.Env) any {
				var msgs []*core.Message
				for i := range 20 {
					m := coretest.Text(fmt.Sprint("later", i))
					m.ScheduledEnqueueTime = coretest.Epoch.Add(time.Hour)
					msgs = append(msgs, m)
				}
				return e.MustSend(t, "t", msgs...)
			},
			op: func(t *testing.T, e *coretest.Env, s any) error {
				return e.Broker.CancelScheduled(t.Context(), "t", s.([]int64))
			},
			want: map[string][]string{},
		},
		{
			name: "scheduled-activation",
			setup: func(t *testing.T, e *coretest.Env) any {
				m := coretest.Text("later")
				m.ScheduledEnqueueTime = coretest.Epoch.Add(time.Minute)
				e.MustSend(t, "t", m)
				return nil
			},
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				e.Clock.Advance(2 * time.Minute)
				return nil
			},
			retry: func(*testing.T, *coretest.Env, any) error { return nil },
			want:  everySub("later"),
		},
		{
			name:  "delete-subscription-with-shared-bodies",
			setup: func(t *testing.T, e *coretest.Env) any { return lockOne(t, e, "t", subA, "x") },
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				return e.Broker.DeleteEntity(t.Context(), subA)
			},
			want: without(everySub("x"), subA),
		},
		{
			name:  "create-update-delete-queue",
			setup: nothing,
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				ctx := t.Context()
				if _, err := e.Broker.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "new"}); err != nil && core.CodeOf(err) != core.CodeEntityExists {
					return err
				}
				if _, err := e.Broker.UpdateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "new", MaxDeliveryCount: 3}); err != nil {
					return err
				}
				err := e.Broker.DeleteEntity(ctx, "new")
				if core.CodeOf(err) == core.CodeNotFound {
					return nil
				}
				return err
			},
			want: map[string][]string{},
		},
		{
			name:  "add-remove-rule",
			setup: nothing,
			op: func(t *testing.T, e *coretest.Env, _ any) error {
				ctx := t.Context()
				err := e.Broker.AddRule(ctx, subB, core.Rule{Name: "extra", Filter: core.Filter{Kind: core.FilterTrue}})
				if err != nil && core.CodeOf(err) != core.CodeEntityExists {
					return err
				}
				return e.Broker.RemoveRule(ctx, subB, "extra")
			},
			want: map[string][]string{},
		},
		{
			name: "session-state",
			setup: func(t *testing.T, e *coretest.Env) any {
				sl, err := e.Broker.AcceptSession(t.Context(), "sq", "s1")
				if err != nil {
					t.Fatal(err)
				}
				return sl
			},
			op: func(t *testing.T, e *coretest.Env, s any) error {
				sl := s.(*core.SessionLock)
				if err := e.Broker.SetSessionState(t.Context(), "sq", sl, []byte("state")); err != nil {
					return err
				}
				got, err := e.Broker.GetSessionState(context.Background(), "sq", sl)
				if err == nil && string(got) != "state" {
					t.Fatalf("session state %q after a successful set", got)
				}
				return err
			},
			want: map[string][]string{},
		},
	}
}
