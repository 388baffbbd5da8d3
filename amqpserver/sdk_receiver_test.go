package amqpserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Tests of azservicebus.Receiver.

// TestSDKReceiverMaxAboveAvailable asks for more messages than there are
// in both receive modes: every message comes back once, then nothing.
func TestSDKReceiverMaxAboveAvailable(t *testing.T) {
	for _, mode := range []azservicebus.ReceiveMode{azservicebus.ReceiveModePeekLock, azservicebus.ReceiveModeReceiveAndDelete} {
		t.Run(map[azservicebus.ReceiveMode]string{0: "peek-lock", 1: "receive-and-delete"}[mode], func(t *testing.T) {
			e := newSDKEnv(t, nil)
			sendBodies(t, e.sender(t, "q"), "m1", "m2", "m3")
			rcv := e.receiver(t, "q", &azservicebus.ReceiverOptions{ReceiveMode: mode})
			var got []*azservicebus.ReceivedMessage
			ctx := sdkCtx(t)
			for len(got) < 3 {
				msgs, err := rcv.ReceiveMessages(ctx, 10, nil)
				if err != nil {
					t.Fatalf("ReceiveMessages(10): %v", err)
				}
				got = append(got, msgs...)
			}
			// Each once; the order is not the point here, and across calls
			// it is not the broker's in peek-lock (see receiveN).
			b := bodies(got)
			slices.Sort(b)
			if !slices.Equal(b, []string{"m1", "m2", "m3"}) {
				t.Fatalf("received %q", bodies(got))
			}
			for _, m := range got {
				locked := m.LockedUntil != nil && m.LockToken != [16]byte{}
				if locked != (mode == azservicebus.ReceiveModePeekLock) {
					t.Errorf("%q: locked until %v token %x", m.Body, m.LockedUntil, m.LockToken)
				}
			}
			assertEmpty(t, rcv)
			c, _ := e.Broker.Counts("q")
			if want := map[azservicebus.ReceiveMode]int64{0: 3, 1: 0}[mode]; c.Active != want {
				t.Errorf("active = %d, want %d", c.Active, want)
			}
			if mode == azservicebus.ReceiveModeReceiveAndDelete {
				if err := rcv.CompleteMessage(ctx, got[0], nil); err == nil {
					t.Error("CompleteMessage on a receive-and-delete message succeeded")
				}
			}
		})
	}
}

// TestSDKReceiverWaits checks that ReceiveMessages blocks until a message
// is sent and returns it promptly after TimeAfterFirstMessage.
func TestSDKReceiverWaits(t *testing.T) {
	e := newSDKEnv(t, nil)
	rcv := e.receiver(t, "q", nil)
	type result struct {
		msgs []*azservicebus.ReceivedMessage
		err  error
	}
	done := make(chan result, 1)
	go func() {
		msgs, err := rcv.ReceiveMessages(sdkCtx(t), 5, &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: 50 * time.Millisecond})
		done <- result{msgs, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("ReceiveMessages on an empty queue returned %q, %v", bodies(r.msgs), r.err)
	case <-time.After(300 * time.Millisecond):
	}
	sendBodies(t, e.sender(t, "q"), "late")
	select {
	case r := <-done:
		if r.err != nil || !slices.Equal(bodies(r.msgs), []string{"late"}) {
			t.Fatalf("ReceiveMessages = %q, %v; want [late]", bodies(r.msgs), r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReceiveMessages did not return after a message was sent")
	}

	// A receive whose context ends returns the context's error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if msgs, err := rcv.ReceiveMessages(ctx, 1, nil); len(msgs) != 0 || err == nil {
		t.Errorf("ReceiveMessages with a cancelled context = %q, %v", bodies(msgs), err)
	}
}

// TestSDKReceiverPeek pages through a queue with PeekMessages and
// FromSequenceNumber; peeking neither locks nor counts deliveries.
func TestSDKReceiverPeek(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	sendBodies(t, e.sender(t, "q"), "p1", "p2", "p3", "p4", "p5")
	rcv := e.receiver(t, "q", nil)
	var pages [][]string
	for range 4 {
		page, err := rcv.PeekMessages(ctx, 2, nil)
		if err != nil {
			t.Fatalf("PeekMessages: %v", err)
		}
		pages = append(pages, bodies(page))
		for _, m := range page {
			// The SDK reports the header's delivery-count + 1.
			if m.LockToken != [16]byte{} || m.LockedUntil != nil || m.DeliveryCount != 1 || m.State != azservicebus.MessageStateActive {
				t.Errorf("peeked %q: token %x locked until %v delivery count %d state %v", m.Body, m.LockToken, m.LockedUntil, m.DeliveryCount, m.State)
			}
		}
	}
	want := [][]string{{"p1", "p2"}, {"p3", "p4"}, {"p5"}, {}}
	if !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("pages = %q, want %q", pages, want)
	}

	for _, tt := range []struct {
		from int64
		max  int
		want []string
	}{
		{1, 10, []string{"p1", "p2", "p3", "p4", "p5"}},
		{3, 2, []string{"p3", "p4"}},
		{5, 10, []string{"p5"}},
		{6, 10, []string{}},
	} {
		got, err := rcv.PeekMessages(ctx, tt.max, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &tt.from})
		if err != nil {
			t.Fatalf("PeekMessages(from %d): %v", tt.from, err)
		}
		if !slices.Equal(bodies(got), tt.want) {
			t.Errorf("PeekMessages(from %d, max %d) = %q, want %q", tt.from, tt.max, bodies(got), tt.want)
		}
	}
	if m := receiveN(t, rcv, 1)[0]; string(m.Body) != "p1" || m.DeliveryCount != 1 {
		t.Errorf("after peeking, received %q with delivery count %d; want p1 1", m.Body, m.DeliveryCount)
	}
}

// TestSDKReceiverSettlement settles one message per outcome, with the
// properties each outcome may modify.
func TestSDKReceiverSettlement(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	sendBodies(t, e.sender(t, "q"), "complete", "abandon", "defer", "dead-letter")
	rcv := e.receiver(t, "q", nil)
	got := receiveN(t, rcv, 4)

	before := *got[0].LockedUntil
	e.Clock.Advance(20 * time.Second)
	if err := rcv.RenewMessageLock(ctx, got[0], nil); err != nil {
		t.Fatalf("RenewMessageLock: %v", err)
	}
	if want := before.Add(20 * time.Second); !got[0].LockedUntil.Equal(want) {
		t.Errorf("renewed LockedUntil = %v, want %v", got[0].LockedUntil, want)
	}
	if err := rcv.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	if err := rcv.AbandonMessage(ctx, got[1], &azservicebus.AbandonMessageOptions{
		PropertiesToModify: map[string]any{"attempt": int64(1), "note": "retry"},
	}); err != nil {
		t.Fatalf("AbandonMessage: %v", err)
	}
	if err := rcv.DeferMessage(ctx, got[2], &azservicebus.DeferMessageOptions{PropertiesToModify: map[string]any{"deferred": true}}); err != nil {
		t.Fatalf("DeferMessage: %v", err)
	}
	if err := rcv.DeadLetterMessage(ctx, got[3], &azservicebus.DeadLetterOptions{
		Reason: ptr("bad-input"), ErrorDescription: ptr("field x missing"), PropertiesToModify: map[string]any{"dl": "yes"},
	}); err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}

	again := receiveN(t, rcv, 1)[0]
	if string(again.Body) != "abandon" || again.DeliveryCount != 2 ||
		again.ApplicationProperties["attempt"] != int64(1) || again.ApplicationProperties["note"] != "retry" {
		t.Errorf("abandoned message came back as %q count %d props %v", again.Body, again.DeliveryCount, again.ApplicationProperties)
	}
	if err := rcv.CompleteMessage(ctx, again, nil); err != nil {
		t.Fatal(err)
	}

	deferred, err := rcv.ReceiveDeferredMessages(ctx, []int64{*got[2].SequenceNumber}, nil)
	if err != nil || len(deferred) != 1 {
		t.Fatalf("ReceiveDeferredMessages = %d, %v", len(deferred), err)
	}
	if d := deferred[0]; string(d.Body) != "defer" || d.State != azservicebus.MessageStateDeferred || d.ApplicationProperties["deferred"] != true {
		t.Errorf("deferred message: %q state %v props %v", d.Body, d.State, d.ApplicationProperties)
	}
	if err := rcv.CompleteMessage(ctx, deferred[0], nil); err != nil {
		t.Fatalf("completing a deferred message: %v", err)
	}

	dlq := e.receiver(t, "q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dl := receiveN(t, dlq, 1)[0]
	if string(dl.Body) != "dead-letter" || *dl.DeadLetterReason != "bad-input" || *dl.DeadLetterErrorDescription != "field x missing" ||
		dl.ApplicationProperties["dl"] != "yes" || dl.DeadLetterSource != nil {
		t.Errorf("dead letter: %q reason %v description %v props %v source %v", dl.Body, dl.DeadLetterReason,
			dl.DeadLetterErrorDescription, dl.ApplicationProperties, dl.DeadLetterSource)
	}
	if err := dlq.CompleteMessage(ctx, dl, nil); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.Broker.Counts("q"); c.Total != 0 || c.Active != 0 || c.Deferred != 0 || c.DeadLetter != 0 {
		t.Errorf("counts after settling everything = %+v", c)
	}
}

// TestSDKReceiverDeferredMany receives several deferred messages at once,
// in the order asked, and settles them through $management.
func TestSDKReceiverDeferredMany(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	sendBodies(t, e.sender(t, "q"), "d1", "d2", "d3")
	rcv := e.receiver(t, "q", nil)
	var seqs []int64
	for _, m := range receiveN(t, rcv, 3) {
		if err := rcv.DeferMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, *m.SequenceNumber)
	}
	assertEmpty(t, rcv)
	deferred, err := rcv.ReceiveDeferredMessages(ctx, []int64{seqs[2], seqs[0]}, nil)
	if err != nil {
		t.Fatalf("ReceiveDeferredMessages: %v", err)
	}
	slices.SortFunc(deferred, func(a, b *azservicebus.ReceivedMessage) int { return int(*a.SequenceNumber - *b.SequenceNumber) })
	if b := bodies(deferred); !slices.Equal(b, []string{"d1", "d3"}) {
		t.Fatalf("deferred = %q, want [d1 d3]", b)
	}
	if err := rcv.AbandonMessage(ctx, deferred[0], nil); err != nil {
		t.Fatalf("AbandonMessage on a deferred message: %v", err)
	}
	if err := rcv.DeadLetterMessage(ctx, deferred[1], nil); err != nil {
		t.Fatalf("DeadLetterMessage on a deferred message: %v", err)
	}
	// An abandoned deferred message stays deferred.
	again, err := rcv.ReceiveDeferredMessages(ctx, []int64{seqs[0]}, nil)
	if err != nil || len(again) != 1 || again[0].DeliveryCount < 2 {
		t.Fatalf("deferred again = %d, %v", len(again), err)
	}
	if c, _ := e.Broker.Counts("q"); c.Deferred != 2 || c.DeadLetter != 1 {
		t.Errorf("counts = %+v, want 2 deferred 1 dead-lettered", c)
	}
}

// TestSDKReceiverSettleAfterClose settles messages whose receiver link is
// gone: the SDK falls back to update-disposition on $management by lock
// token.
func TestSDKReceiverSettleAfterClose(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	sendBodies(t, e.sender(t, "q"), "c", "a", "dl", "df")
	first, err := e.c.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, first, 4)
	if err := first.Close(ctx); err != nil {
		t.Fatalf("Receiver.Close: %v", err)
	}
	if _, err := first.ReceiveMessages(ctx, 1, nil); sdkCode(err) != azservicebus.CodeClosed {
		t.Errorf("ReceiveMessages after Close = %v, want code closed", err)
	}

	second := e.receiver(t, "q", nil)
	if err := second.RenewMessageLock(ctx, got[0], nil); err != nil {
		t.Errorf("RenewMessageLock from another receiver: %v", err)
	}
	if err := second.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Errorf("CompleteMessage after the receiver closed: %v", err)
	}
	if err := second.AbandonMessage(ctx, got[1], nil); err != nil {
		t.Errorf("AbandonMessage after the receiver closed: %v", err)
	}
	if err := second.DeadLetterMessage(ctx, got[2], &azservicebus.DeadLetterOptions{Reason: ptr("late")}); err != nil {
		t.Errorf("DeadLetterMessage after the receiver closed: %v", err)
	}
	// A message rebuilt from its lock token alone settles the same way.
	if err := second.DeferMessage(ctx, &azservicebus.ReceivedMessage{LockToken: got[3].LockToken}, nil); err != nil {
		t.Errorf("DeferMessage by lock token: %v", err)
	}
	if err := second.CompleteMessage(ctx, got[0], nil); sdkCode(err) != azservicebus.CodeLockLost {
		t.Errorf("completing twice = %v, want code %q", err, azservicebus.CodeLockLost)
	}

	if m := receiveN(t, second, 1)[0]; string(m.Body) != "a" || m.DeliveryCount != 2 {
		t.Errorf("after abandon: %q count %d", m.Body, m.DeliveryCount)
	}
	if c, _ := e.Broker.Counts("q"); c.Deferred != 1 || c.DeadLetter != 1 || c.Total != 3 {
		t.Errorf("counts = %+v, want 3 stored: 1 deferred, 1 dead-lettered, 1 locked", c)
	}
}

// TestSDKReceiverLockLost renews and settles messages whose locks
// expired, one message per operation (go-amqp treats a message it saw
// settled once as settled for good).
func TestSDKReceiverLockLost(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	rcv := e.receiver(t, "q", nil)
	ops := []struct {
		name string
		op   func(*azservicebus.ReceivedMessage) error
	}{
		{"RenewMessageLock", func(m *azservicebus.ReceivedMessage) error { return rcv.RenewMessageLock(ctx, m, nil) }},
		{"CompleteMessage", func(m *azservicebus.ReceivedMessage) error { return rcv.CompleteMessage(ctx, m, nil) }},
		{"AbandonMessage", func(m *azservicebus.ReceivedMessage) error { return rcv.AbandonMessage(ctx, m, nil) }},
		{"DeferMessage", func(m *azservicebus.ReceivedMessage) error { return rcv.DeferMessage(ctx, m, nil) }},
		{"DeadLetterMessage", func(m *azservicebus.ReceivedMessage) error { return rcv.DeadLetterMessage(ctx, m, nil) }},
	}
	for _, o := range ops {
		sendBodies(t, e.sender(t, "q"), o.name)
	}
	got := receiveN(t, rcv, len(ops))
	e.Clock.Advance(got[0].LockedUntil.Sub(e.Clock.Now()) + time.Second)
	for i, o := range ops {
		if err := o.op(got[i]); sdkCode(err) != azservicebus.CodeLockLost {
			t.Errorf("%s with an expired lock = %v, want code %q", o.name, err, azservicebus.CodeLockLost)
		}
	}
	again := receiveN(t, rcv, len(ops))
	for i, m := range again {
		if string(m.Body) != ops[i].name || m.DeliveryCount != 2 {
			t.Errorf("after the lock expired: %q count %d, want %s 2", m.Body, m.DeliveryCount, ops[i].name)
		}
	}
}
