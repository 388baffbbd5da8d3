package amqpserver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Tests of azservicebus.SessionReceiver and the session methods of
// azservicebus.Client.

// sendSessions sends one message per "session:body" pair.
func sendSessions(t testing.TB, s *azservicebus.Sender, pairs ...string) {
	t.Helper()
	for _, p := range pairs {
		id, body, _ := strings.Cut(p, ":")
		if err := s.SendMessage(sdkCtx(t), &azservicebus.Message{Body: []byte(body), SessionID: &id}, nil); err != nil {
			t.Fatalf("SendMessage(%s): %v", p, err)
		}
	}
}

// listSessions drives a list-sessions pager to the end.
func listSessions(t testing.TB, c *azservicebus.Client, topic, entity string, after *time.Time) []string {
	t.Helper()
	opts := &azservicebus.ListSessionsOptions{SessionStateUpdatedAfter: after}
	pager := c.NewListSessionsForQueuePager(entity, opts)
	if topic != "" {
		pager = c.NewListSessionsForSubscriptionPager(topic, entity, opts)
	}
	ids := []string{}
	for pager.More() {
		page, err := pager.NextPage(sdkCtx(t))
		if err != nil {
			t.Fatalf("list sessions of %s %s: %v", topic, entity, err)
		}
		ids = append(ids, page.Sessions...)
	}
	slices.Sort(ids)
	return ids
}

// TestSDKSessionReceiverMethods runs every SessionReceiver method on a
// session of a queue and of a subscription.
func TestSDKSessionReceiverMethods(t *testing.T) {
	for _, tc := range []struct{ name, sendTo, topic, entity string }{
		{"queue", "sq", "", "sq"},
		{"subscription", "t", "t", "ss"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSDKEnv(t, nil)
			ctx := sdkCtx(t)
			sendSessions(t, e.sender(t, tc.sendTo), "a:a1", "b:b1", "a:a2", "a:a3", "a:a4", "b:b2")
			var sr *azservicebus.SessionReceiver
			var err error
			if tc.topic == "" {
				sr, err = e.c.AcceptSessionForQueue(ctx, tc.entity, "a", nil)
			} else {
				sr, err = e.c.AcceptSessionForSubscription(ctx, tc.topic, tc.entity, "a", nil)
			}
			if err != nil {
				t.Fatalf("AcceptSession: %v", err)
			}
			if sr.SessionID() != "a" {
				t.Errorf("SessionID = %q, want a", sr.SessionID())
			}
			if want := e.Clock.Now().Add(time.Minute); !sr.LockedUntil().Equal(want) {
				t.Errorf("LockedUntil = %v, want %v", sr.LockedUntil(), want)
			}

			peeked, err := sr.PeekMessages(ctx, 10, nil)
			if err != nil || !slices.Equal(bodies(peeked), []string{"a1", "a2", "a3", "a4"}) {
				t.Fatalf("PeekMessages = %q, %v; want only session a", bodies(peeked), err)
			}
			got := receiveN(t, sr, 4)
			if b := bodies(got); !slices.Equal(b, []string{"a1", "a2", "a3", "a4"}) {
				t.Fatalf("received %q, want session a's messages in order", b)
			}
			for _, m := range got {
				if m.SessionID == nil || *m.SessionID != "a" {
					t.Errorf("%q: session id %v", m.Body, m.SessionID)
				}
			}
			if err := sr.CompleteMessage(ctx, got[0], nil); err != nil {
				t.Fatalf("CompleteMessage: %v", err)
			}
			if err := sr.AbandonMessage(ctx, got[1], &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{"p": "abandoned"}}); err != nil {
				t.Fatalf("AbandonMessage: %v", err)
			}
			if err := sr.DeferMessage(ctx, got[2], nil); err != nil {
				t.Fatalf("DeferMessage: %v", err)
			}
			if err := sr.DeadLetterMessage(ctx, got[3], &azservicebus.DeadLetterOptions{Reason: ptr("r"), ErrorDescription: ptr("d")}); err != nil {
				t.Fatalf("DeadLetterMessage: %v", err)
			}
			again := receiveN(t, sr, 1)[0]
			if string(again.Body) != "a2" || again.DeliveryCount != 2 || again.ApplicationProperties["p"] != "abandoned" {
				t.Errorf("abandoned message back as %q count %d props %v", again.Body, again.DeliveryCount, again.ApplicationProperties)
			}
			if err := sr.CompleteMessage(ctx, again, nil); err != nil {
				t.Fatal(err)
			}
			deferred, err := sr.ReceiveDeferredMessages(ctx, []int64{*got[2].SequenceNumber}, nil)
			if err != nil || len(deferred) != 1 || string(deferred[0].Body) != "a3" {
				t.Fatalf("ReceiveDeferredMessages = %q, %v", bodies(deferred), err)
			}
			if err := sr.CompleteMessage(ctx, deferred[0], nil); err != nil {
				t.Fatalf("completing the deferred message: %v", err)
			}
			assertEmpty(t, sr)

			if st, err := sr.GetSessionState(ctx, nil); err != nil || st != nil {
				t.Errorf("initial state = %q, %v; want nil", st, err)
			}
			if err := sr.SetSessionState(ctx, []byte("cursor=4"), nil); err != nil {
				t.Fatalf("SetSessionState: %v", err)
			}
			if st, err := sr.GetSessionState(ctx, nil); err != nil || string(st) != "cursor=4" {
				t.Errorf("GetSessionState = %q, %v", st, err)
			}
			// A session with state but no messages is still listed.
			if ids := listSessions(t, e.c, tc.topic, tc.entity, nil); !slices.Equal(ids, []string{"a", "b"}) {
				t.Errorf("sessions with state = %v, want [a b]", ids)
			}
			if err := sr.SetSessionState(ctx, nil, nil); err != nil {
				t.Fatalf("SetSessionState(nil): %v", err)
			}
			if st, err := sr.GetSessionState(ctx, nil); err != nil || st != nil {
				t.Errorf("after clearing, state = %q, %v", st, err)
			}
			if ids := listSessions(t, e.c, tc.topic, tc.entity, nil); !slices.Equal(ids, []string{"b"}) {
				t.Errorf("sessions after clearing a's state = %v, want [b]", ids)
			}

			before := sr.LockedUntil()
			e.Clock.Advance(30 * time.Second)
			if err := sr.RenewSessionLock(ctx, nil); err != nil {
				t.Fatalf("RenewSessionLock: %v", err)
			}
			if want := before.Add(30 * time.Second); !sr.LockedUntil().Equal(want) {
				t.Errorf("renewed LockedUntil = %v, want %v", sr.LockedUntil(), want)
			}

			var dlq *azservicebus.Receiver
			if tc.topic == "" {
				dlq, err = e.c.NewReceiverForQueue(tc.entity, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
			} else {
				dlq, err = e.c.NewReceiverForSubscription(tc.topic, tc.entity, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
			}
			if err != nil {
				t.Fatal(err)
			}
			defer dlq.Close(ctx)
			if dl := receiveN(t, dlq, 1)[0]; string(dl.Body) != "a4" || *dl.DeadLetterReason != "r" || *dl.DeadLetterErrorDescription != "d" {
				t.Errorf("dead letter %q reason %v description %v", dl.Body, dl.DeadLetterReason, dl.DeadLetterErrorDescription)
			}

			if err := sr.Close(ctx); err != nil {
				t.Fatalf("SessionReceiver.Close: %v", err)
			}
			if _, err := sr.ReceiveMessages(ctx, 1, nil); sdkCode(err) != azservicebus.CodeClosed {
				t.Errorf("ReceiveMessages after Close = %v, want code closed", err)
			}
			// Closing released the lock: the session can be accepted again.
			var sr2 *azservicebus.SessionReceiver
			if tc.topic == "" {
				sr2, err = e.c.AcceptSessionForQueue(ctx, tc.entity, "a", nil)
			} else {
				sr2, err = e.c.AcceptSessionForSubscription(ctx, tc.topic, tc.entity, "a", nil)
			}
			if err != nil {
				t.Fatalf("accepting the closed session again: %v", err)
			}
			sr2.Close(ctx)
		})
	}
}

func TestSDKSessionAcceptNext(t *testing.T) {
	e := newSDKEnv(t, func(c *Config) { c.SessionAcceptTimeout = 300 * time.Millisecond })
	ctx := sdkCtx(t)
	sendSessions(t, e.sender(t, "sq"), "x:x1", "y:y1")
	sendSessions(t, e.sender(t, "t"), "z:z1")

	var held []string
	for range 2 {
		sr, err := e.c.AcceptNextSessionForQueue(ctx, "sq", nil)
		if err != nil {
			t.Fatalf("AcceptNextSessionForQueue: %v", err)
		}
		defer sr.Close(ctx)
		held = append(held, sr.SessionID())
		if m := receiveN(t, sr, 1)[0]; string(m.Body) != sr.SessionID()+"1" {
			t.Errorf("session %s received %q", sr.SessionID(), m.Body)
		}
	}
	slices.Sort(held)
	if !slices.Equal(held, []string{"x", "y"}) {
		t.Errorf("accepted sessions %v, want [x y]", held)
	}
	sub, err := e.c.AcceptNextSessionForSubscription(ctx, "t", "ss", nil)
	if err != nil {
		t.Fatalf("AcceptNextSessionForSubscription: %v", err)
	}
	defer sub.Close(ctx)
	if sub.SessionID() != "z" {
		t.Errorf("subscription session = %q, want z", sub.SessionID())
	}

	// Every session is held: with no deadline of its own the client waits
	// for the server's accept timeout.
	start := time.Now()
	_, err = e.c.AcceptNextSessionForQueue(t.Context(), "sq", nil)
	if sdkCode(err) != azservicebus.CodeTimeout {
		t.Errorf("AcceptNextSessionForQueue with none free = %v, want code %q", err, azservicebus.CodeTimeout)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("AcceptNextSession waited %v, want about the server's 300ms", d)
	}
	// With a deadline the SDK passes it on as com.microsoft:timeout.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := e.c.AcceptNextSessionForSubscription(short, "t", "ss", nil); err == nil {
		t.Error("AcceptNextSessionForSubscription with none free succeeded")
	}
}

func TestSDKSessionCannotBeLocked(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	sendSessions(t, e.sender(t, "sq"), "a:1")
	sr, err := e.c.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(ctx)
	other := newSDKClient(t, e.testServer)
	_, err = other.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if amqpCond(err) != "com.microsoft:session-cannot-be-locked" {
		t.Errorf("accepting a held session = %v, want com.microsoft:session-cannot-be-locked", err)
	}
	// A session nobody holds, even one without messages, can be accepted.
	empty, err := other.AcceptSessionForQueue(ctx, "sq", "no-messages", nil)
	if err != nil {
		t.Fatalf("accepting an empty session: %v", err)
	}
	defer empty.Close(ctx)
	assertEmpty(t, empty)
}

// TestSDKListSessionsUpdatedAfter lists sessions whose state changed
// after a time, on a queue and a subscription.
func TestSDKListSessionsUpdatedAfter(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	sendSessions(t, e.sender(t, "sq"), "old:1", "new:1", "none:1")
	sendSessions(t, e.sender(t, "t"), "old:1", "new:1", "none:1")
	setState := func(topic, entity, id string) {
		var sr *azservicebus.SessionReceiver
		var err error
		if topic == "" {
			sr, err = e.c.AcceptSessionForQueue(ctx, entity, id, nil)
		} else {
			sr, err = e.c.AcceptSessionForSubscription(ctx, topic, entity, id, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer sr.Close(ctx)
		if err := sr.SetSessionState(ctx, []byte(id), nil); err != nil {
			t.Fatal(err)
		}
	}
	t0 := e.Clock.Now()
	setState("", "sq", "old")
	setState("t", "ss", "old")
	e.Clock.Advance(time.Hour)
	t1 := e.Clock.Now()
	setState("", "sq", "new")
	setState("t", "ss", "new")

	for _, ent := range []struct{ topic, name string }{{"", "sq"}, {"t", "ss"}} {
		for _, tt := range []struct {
			after *time.Time
			want  []string
		}{
			{nil, []string{"new", "none", "old"}},
			{ptr(t0.Add(-time.Second)), []string{"new", "old"}},
			{ptr(t1.Add(-time.Second)), []string{"new"}},
			{ptr(t1.Add(time.Second)), []string{}},
		} {
			if got := listSessions(t, e.c, ent.topic, ent.name, tt.after); !slices.Equal(got, tt.want) {
				t.Errorf("%s%s updated after %v: %v, want %v", ent.topic, ent.name, tt.after, got, tt.want)
			}
		}
	}
}

// TestSDKListSessionsPaging lists more sessions than one page (100).
func TestSDKListSessionsPaging(t *testing.T) {
	e := newSDKEnv(t, nil)
	snd := e.sender(t, "sq")
	batch, err := snd.NewMessageBatch(sdkCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 150 {
		id := string(rune('a'+i/26%26)) + string(rune('a'+i%26)) + strings.Repeat("x", i/676)
		want = append(want, id)
		if err := batch.AddMessage(&azservicebus.Message{Body: []byte(id), SessionID: &id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := snd.SendMessageBatch(sdkCtx(t), batch, nil); err != nil {
		t.Fatalf("SendMessageBatch: %v", err)
	}
	slices.Sort(want)
	if got := listSessions(t, e.c, "", "sq", nil); !slices.Equal(got, want) {
		t.Errorf("listed %d sessions, want %d", len(got), len(want))
	}
}
