package amqpserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core"
)

// The sdk_*_test.go files drive every exported method of the official Go
// SDK (azservicebus) against the server, connected with the emulator
// connection string. This file holds their shared helpers and the tests of
// azservicebus.Client itself.

// sdkEnv is a server with the SDK entities: queue "q" (1 MiB), session
// queue "sq", topic "t" with subscription "s" and session subscription
// "ss", and queue "small" with the default 256 KiB message limit.
type sdkEnv struct {
	*testServer
	c *azservicebus.Client
}

func newSDKEnv(t testing.TB, cfg func(*Config)) *sdkEnv {
	t.Helper()
	ts := newTestServer(t, cfg)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "small"})
	ts.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	ts.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
	ts.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "ss", RequiresSession: true})
	return &sdkEnv{testServer: ts, c: newSDKClient(t, ts)}
}

func (e *sdkEnv) sender(t testing.TB, entity string) *azservicebus.Sender {
	t.Helper()
	s, err := e.c.NewSender(entity, nil)
	if err != nil {
		t.Fatalf("NewSender(%q): %v", entity, err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func (e *sdkEnv) receiver(t testing.TB, queue string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.Helper()
	r, err := e.c.NewReceiverForQueue(queue, opts)
	if err != nil {
		t.Fatalf("NewReceiverForQueue(%q): %v", queue, err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// sendBodies sends one message per body.
func sendBodies(t testing.TB, s *azservicebus.Sender, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if err := s.SendMessage(sdkCtx(t), &azservicebus.Message{Body: []byte(b)}, nil); err != nil {
			t.Fatalf("SendMessage(%q): %v", b, err)
		}
	}
}

// messageReceiver is what Receiver and SessionReceiver share.
type messageReceiver interface {
	ReceiveMessages(ctx context.Context, max int, opts *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// receiveN calls ReceiveMessages until it has n messages. Each call waits
// for all it asks for (TimeAfterFirstMessage up to the deadline): between
// two calls the SDK releases whatever arrives on the link's leftover
// credit (its "releaser"), and a message released while a later one
// waits in go-amqp's buffer comes back after it, so messages gathered by
// several calls need not be in the order the broker sent them (a1 a2 a4
// a3, with every delivery count 1). That is the SDK's doing, against
// Service Bus too; within one call the order is the broker's.
func receiveN(t testing.TB, r messageReceiver, n int) []*azservicebus.ReceivedMessage {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: time.Until(deadline)})
		if err != nil {
			t.Fatalf("ReceiveMessages after %d of %d: %v", len(got), n, err)
		}
		got = append(got, msgs...)
	}
	return got
}

// bodies returns the messages' bodies as strings.
func bodies(msgs []*azservicebus.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

// assertEmpty checks that r has nothing to receive right now: a short
// ReceiveMessages ends with its context and no messages.
func assertEmpty(t testing.TB, r messageReceiver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if len(msgs) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ReceiveMessages on an empty entity = %q, %v; want nothing and the deadline", bodies(msgs), err)
	}
}

// sdkCode returns the Code of an *azservicebus.Error in err's chain, or "".
func sdkCode(err error) azservicebus.Code {
	var e *azservicebus.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// amqpCond returns the condition of an *amqp.Error in err's chain, or "".
func amqpCond(err error) amqp.ErrCond {
	var e *amqp.Error
	if errors.As(err, &e) {
		return e.Condition
	}
	return ""
}

func TestSDKClientReceiverForSubscription(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	sendBodies(t, e.sender(t, "t"), "to-sub", "to-dlq")
	r, err := e.c.NewReceiverForSubscription("t", "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	got := receiveN(t, r, 2)
	if b := bodies(got); b[0] != "to-sub" || b[1] != "to-dlq" {
		t.Fatalf("subscription received %q", b)
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}
	if err := r.DeadLetterMessage(ctx, got[1], &azservicebus.DeadLetterOptions{Reason: ptr("sub-reason")}); err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}

	dlq, err := e.c.NewReceiverForSubscription("t", "s", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close(ctx)
	d := receiveN(t, dlq, 1)[0]
	if string(d.Body) != "to-dlq" || d.DeadLetterReason == nil || *d.DeadLetterReason != "sub-reason" {
		t.Errorf("subscription dead letter: body %q reason %v", d.Body, d.DeadLetterReason)
	}
	if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatalf("CompleteMessage on the subscription DLQ: %v", err)
	}
	if c, _ := e.Broker.Counts("t/subscriptions/s"); c.Active != 0 || c.DeadLetter != 0 {
		t.Errorf("subscription counts after settling = %+v, want empty", c)
	}
	assertEmpty(t, r)
}

func TestSDKClientClose(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	snd := e.sender(t, "q")
	sendBodies(t, snd, "before-close")
	rcv := e.receiver(t, "q", nil)
	if m := receiveN(t, rcv, 1)[0]; string(m.Body) != "before-close" {
		t.Fatalf("received %q", m.Body)
	}
	if err := e.c.Close(ctx); err != nil {
		t.Fatalf("Client.Close: %v", err)
	}
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("after-close")}, nil); err == nil {
		t.Error("SendMessage on a closed client succeeded")
	}
	if _, err := rcv.ReceiveMessages(ctx, 1, nil); err == nil {
		t.Error("ReceiveMessages on a closed client succeeded")
	}
	// The unsettled message's lock outlives the connection; once it
	// expires another client gets the message again.
	e.Clock.Advance(core.DefaultLockDuration + time.Second)
	r2, err := newSDKClient(t, e.testServer).NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := receiveN(t, r2, 1)[0]; string(m.Body) != "before-close" || m.DeliveryCount != 2 {
		t.Errorf("after the lock expired: %q delivery count %d, want before-close 2", m.Body, m.DeliveryCount)
	}
}

func TestSDKClientMissingEntity(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)

	snd, err := e.c.NewSender("missing", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	if amqpCond(err) != amqp.ErrCondNotFound && sdkCode(err) != azservicebus.CodeNotFound {
		t.Errorf("SendMessage to a missing queue: %v (%T), want amqp:not-found", err, err)
	}

	rcv, err := e.c.NewReceiverForQueue("missing", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rcv.ReceiveMessages(ctx, 1, nil)
	if amqpCond(err) != amqp.ErrCondNotFound && sdkCode(err) != azservicebus.CodeNotFound {
		t.Errorf("ReceiveMessages from a missing queue: %v, want amqp:not-found", err)
	}
	_, err = rcv.PeekMessages(ctx, 1, nil)
	if amqpCond(err) != amqp.ErrCondNotFound && sdkCode(err) != azservicebus.CodeNotFound {
		t.Errorf("PeekMessages on a missing queue: %v, want not found", err)
	}

	_, err = e.c.AcceptSessionForQueue(ctx, "missing", "a", nil)
	if amqpCond(err) != amqp.ErrCondNotFound && sdkCode(err) != azservicebus.CodeNotFound {
		t.Errorf("AcceptSessionForQueue on a missing queue: %v, want not found", err)
	}
	sub, err := e.c.NewReceiverForSubscription("t", "missing", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sub.ReceiveMessages(ctx, 1, nil)
	if amqpCond(err) != amqp.ErrCondNotFound && sdkCode(err) != azservicebus.CodeNotFound {
		t.Errorf("ReceiveMessages from a missing subscription: %v, want amqp:not-found", err)
	}
}
