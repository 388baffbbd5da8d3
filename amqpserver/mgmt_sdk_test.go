package amqpserver

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core"
)

// End-to-end tests of the $management operations through the official Go
// SDK, connected with the emulator connection string (SASL ANONYMOUS and
// $cbs tokens, plain TCP).

// newSDKClient returns an azservicebus client for ts, closed at the end of
// the test.
func newSDKClient(t testing.TB, ts *testServer) *azservicebus.Client {
	t.Helper()
	cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true",
		ts.addr, testKeyName, testKey)
	c, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("NewClientFromConnectionString: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// sdkCtx bounds one SDK test.
func sdkCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSDKScheduleCancelPeek(t *testing.T) {
	ts := newTestServer(t, nil)
	c := newSDKClient(t, ts)
	ctx := sdkCtx(t)
	snd, err := c.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("now")}, nil); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond) // ahead of the broker's fake clock
	seqs, err := snd.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("s1")}, {Body: []byte("s2")}}, at, nil)
	if err != nil {
		t.Fatalf("ScheduleMessages: %v", err)
	}
	if len(seqs) != 2 {
		t.Fatalf("ScheduleMessages returned %v", seqs)
	}

	rcv, err := c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	peeked, err := rcv.PeekMessages(ctx, 10, nil)
	if err != nil {
		t.Fatalf("PeekMessages: %v", err)
	}
	if len(peeked) != 3 {
		t.Fatalf("peeked %d messages, want 3", len(peeked))
	}
	if string(peeked[0].Body) != "now" || peeked[0].State != azservicebus.MessageStateActive {
		t.Errorf("first peeked = %q state %v", peeked[0].Body, peeked[0].State)
	}
	for i, m := range peeked[1:] {
		if m.State != azservicebus.MessageStateScheduled || m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(at) ||
			*m.SequenceNumber != seqs[i] {
			t.Errorf("scheduled peek %d: state %v at %v seq %v; want scheduled at %v seq %d",
				i, m.State, m.ScheduledEnqueueTime, *m.SequenceNumber, at, seqs[i])
		}
	}

	if err := snd.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		t.Fatalf("CancelScheduledMessages: %v", err)
	}
	from := int64(1)
	peeked, err = rcv.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
	if err != nil || len(peeked) != 1 {
		t.Fatalf("after cancel, peek = %d messages, %v; want 1", len(peeked), err)
	}
}

func TestSDKDeferRenewAndReceiveDeferred(t *testing.T) {
	ts := newTestServer(t, nil)
	c := newSDKClient(t, ts)
	ctx := sdkCtx(t)
	snd, _ := c.NewSender("q", nil)
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("d"), ApplicationProperties: map[string]any{"n": int32(7)}}, nil); err != nil {
		t.Fatal(err)
	}
	rcv, _ := c.NewReceiverForQueue("q", nil)
	got, err := rcv.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("ReceiveMessages: %d, %v", len(got), err)
	}
	m := got[0]
	before := *m.LockedUntil
	ts.Clock.Advance(10 * time.Second)
	if err := rcv.RenewMessageLock(ctx, m, nil); err != nil {
		t.Fatalf("RenewMessageLock: %v", err)
	}
	if !m.LockedUntil.After(before) {
		t.Errorf("LockedUntil %v not after %v", m.LockedUntil, before)
	}
	if err := rcv.DeferMessage(ctx, m, nil); err != nil {
		t.Fatalf("DeferMessage: %v", err)
	}

	deferred, err := rcv.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(deferred) != 1 {
		t.Fatalf("ReceiveDeferredMessages: %d, %v", len(deferred), err)
	}
	d := deferred[0]
	if string(d.Body) != "d" || d.State != azservicebus.MessageStateDeferred || d.ApplicationProperties["n"] != int32(7) ||
		d.LockToken == [16]byte{} || d.DeliveryCount != 2 {
		t.Errorf("deferred message: body %q state %v props %v token %v count %d", d.Body, d.State, d.ApplicationProperties, d.LockToken, d.DeliveryCount)
	}
	// A deferred message is settled through update-disposition.
	if err := rcv.DeadLetterMessage(ctx, d, &azservicebus.DeadLetterOptions{Reason: ptr("r"), ErrorDescription: ptr("e")}); err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}
	dlq, _ := c.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dl, err := dlq.PeekMessages(ctx, 5, nil)
	if err != nil || len(dl) != 1 {
		t.Fatalf("dead-letter peek: %d, %v", len(dl), err)
	}
	if dl[0].DeadLetterReason == nil || *dl[0].DeadLetterReason != "r" || *dl[0].DeadLetterErrorDescription != "e" {
		t.Errorf("dead-letter reason %v description %v", dl[0].DeadLetterReason, dl[0].DeadLetterErrorDescription)
	}

	// Unknown sequence numbers are not found.
	if _, err := rcv.ReceiveDeferredMessages(ctx, []int64{999}, nil); err == nil {
		t.Error("ReceiveDeferredMessages(999) succeeded")
	}
}

func TestSDKSessionStateAndListing(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	c := newSDKClient(t, ts)
	ctx := sdkCtx(t)
	snd, _ := c.NewSender("sq", nil)
	for _, id := range []string{"b", "a"} {
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(id), SessionID: ptr(id)}, nil); err != nil {
			t.Fatal(err)
		}
	}

	sr, err := c.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatalf("AcceptSessionForQueue: %v", err)
	}
	if st, err := sr.GetSessionState(ctx, nil); err != nil || st != nil {
		t.Fatalf("initial GetSessionState = %q, %v; want nil", st, err)
	}
	if err := sr.SetSessionState(ctx, []byte("progress"), nil); err != nil {
		t.Fatalf("SetSessionState: %v", err)
	}
	if st, err := sr.GetSessionState(ctx, nil); err != nil || string(st) != "progress" {
		t.Fatalf("GetSessionState = %q, %v", st, err)
	}
	before := sr.LockedUntil()
	ts.Clock.Advance(5 * time.Second)
	if err := sr.RenewSessionLock(ctx, nil); err != nil {
		t.Fatalf("RenewSessionLock: %v", err)
	}
	if !sr.LockedUntil().After(before) {
		t.Errorf("session LockedUntil %v not after %v", sr.LockedUntil(), before)
	}
	peeked, err := sr.PeekMessages(ctx, 5, nil)
	if err != nil || len(peeked) == 0 {
		t.Fatalf("session PeekMessages: %d, %v", len(peeked), err)
	}

	var ids []string
	pager := c.NewListSessionsForQueuePager("sq", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		ids = append(ids, page.Sessions...)
	}
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("sessions = %v, want [a b]", ids)
	}

	if err := sr.SetSessionState(ctx, nil, nil); err != nil {
		t.Fatalf("clearing state: %v", err)
	}
	if st, err := sr.GetSessionState(ctx, nil); err != nil || st != nil {
		t.Errorf("after clearing, GetSessionState = %q, %v", st, err)
	}
}

func ptr[T any](v T) *T { return &v }
