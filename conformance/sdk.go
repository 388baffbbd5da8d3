package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// Client returns the scenario's own SDK client: one AMQP connection per
// scenario, closed when it ends (against a cluster, on another node than
// its senders': see nodes.go). Sharing one client between parallel
// scenarios let one scenario's connection recovery (the SDK resets the
// connection on errors such as session-lock-lost, as it would against
// Service Bus) fail another's operations in flight.
func (t *T) Client() *azservicebus.Client {
	t.mu.Lock()
	c := t.client
	t.mu.Unlock()
	if c != nil {
		return c
	}
	c, err := azservicebus.NewClientFromConnectionString(t.clientConnectionString(), nil)
	t.must(err, "SDK client")
	t.mu.Lock()
	t.client = c
	t.mu.Unlock()
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// Sender opens an SDK sender on a queue or topic, closed at the end.
func (t *T) Sender(entity string) *azservicebus.Sender {
	t.live()
	s, err := t.sendClient().NewSender(entity, nil)
	t.must(err, "sender for %s", entity)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// Receiver opens an SDK receiver on a queue (sub == "") or subscription.
func (t *T) Receiver(entity, sub string, opts *azservicebus.ReceiverOptions) *azservicebus.Receiver {
	t.live()
	var r *azservicebus.Receiver
	var err error
	if sub == "" {
		r, err = t.Client().NewReceiverForQueue(entity, opts)
	} else {
		r, err = t.Client().NewReceiverForSubscription(entity, sub, opts)
	}
	t.must(err, "receiver for %s %s", entity, sub)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// DLQ opens a peek-lock receiver on a queue's or subscription's
// dead-letter subqueue.
func (t *T) DLQ(entity, sub string) *azservicebus.Receiver {
	return t.Receiver(entity, sub, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
}

// Send sends messages one by one and fails the scenario on error.
func (t *T) Send(entity string, msgs ...*azservicebus.Message) {
	s := t.Sender(entity)
	for _, m := range msgs {
		t.must(s.SendMessage(t.ctx, m, nil), "sending to %s", entity)
	}
}

// Text is a message with a text body.
func Text(body string) *azservicebus.Message { return &azservicebus.Message{Body: []byte(body)} }

// messageReceiver is what Receiver and SessionReceiver share.
type messageReceiver interface {
	ReceiveMessages(ctx context.Context, max int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// ReceiveN receives until it has n messages or wait passes, and fails the
// scenario if fewer arrived (an assertion); a receive that fails, or the
// scenario's time budget running out first, ends it with an error.
func (t *T) ReceiveN(r messageReceiver, n int, wait time.Duration) []*azservicebus.ReceivedMessage {
	got := t.receiveUpTo(r, n, wait)
	if len(got) < n {
		t.Fatalf("received %d of %d messages within %s", len(got), n, wait)
	}
	return got
}

// ReceiveNone checks that nothing arrives within wait. It never passes
// on a wait it did not make: a receive that fails, or the scenario's time
// budget running out before wait passed, ends the scenario with an error.
func (t *T) ReceiveNone(r messageReceiver, wait time.Duration, why string) {
	if got := t.receiveUpTo(r, 1, wait); len(got) > 0 {
		t.Fatalf("%s, but received %q (sequence %d)", why, got[0].Body, *got[0].SequenceNumber)
	}
}

func (t *T) receiveUpTo(r messageReceiver, n int, wait time.Duration) []*azservicebus.ReceivedMessage {
	deadline := time.Now().Add(wait)
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		ctx, cancel := context.WithTimeout(t.ctx, left)
		// One call waits for all it asks for: between calls the SDK
		// releases what arrives on the leftover credit, and a released
		// message comes back after later ones, which would make a FIFO
		// check fail on the SDK's doing (see amqpserver's receiveN).
		msgs, err := r.ReceiveMessages(ctx, n-len(got), &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: left})
		cancel()
		got = append(got, msgs...)
		if t.ctx.Err() != nil {
			// The scenario's budget, not wait, ended the receive: what
			// did not arrive may still have been on its way.
			t.Abortf("time budget exhausted while receiving (%d of %d messages after %s of %s)",
				len(got), n, wait-time.Until(deadline), wait)
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				break // wait is over: nothing more arrived
			}
			t.Abortf("receive: %v", err)
		}
	}
	return got
}

// peeker is what Receiver and SessionReceiver share for peeking.
type peeker interface {
	PeekMessages(ctx context.Context, max int, o *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// expectNothingStored peeks r's entity from its first sequence number and
// fails if it stores anything, locked or not. A receive cannot see a
// locked message: after a settlement that did nothing, the message stays
// out of sight until its lock lapses. A peek shows it at once.
func (t *T) expectNothingStored(r peeker, why string) {
	msgs, err := r.PeekMessages(t.ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr[int64](0)})
	t.must(err, "peek")
	if len(msgs) > 0 {
		t.Fatalf("%s, but %q (sequence %d) is still stored", why, msgs[0].Body, *msgs[0].SequenceNumber)
	}
}

// Complete completes a message, failing the scenario on error.
func (t *T) Complete(r interface {
	CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error
}, m *azservicebus.ReceivedMessage) {
	t.must(r.CompleteMessage(t.ctx, m, nil), "complete")
}

// Code returns the SDK error code of err ("" if none).
func Code(err error) azservicebus.Code {
	var e *azservicebus.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// amqpCondition returns the AMQP error condition err carries ("" if
// none): the SDK passes some of Service Bus's refusals on as go-amqp
// errors, with no Code of its own (session-cannot-be-locked among them).
func amqpCondition(err error) string {
	var e *amqp.Error
	if errors.As(err, &e) {
		return string(e.Condition)
	}
	var le *amqp.LinkError
	if errors.As(err, &le) && le.RemoteErr != nil {
		return string(le.RemoteErr.Condition)
	}
	var ce *amqp.ConnError
	if errors.As(err, &ce) && ce.RemoteErr != nil {
		return string(ce.RemoteErr.Condition)
	}
	return ""
}

// expectBodies checks that msgs carry exactly the given bodies in order.
func (t *T) expectBodies(msgs []*azservicebus.ReceivedMessage, want ...string) {
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if string(m.Body) != want[i] {
			t.Errorf("message %d: body %q, want %q", i, m.Body, want[i])
		}
	}
}

func contextWithTimeout(t *T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.ctx, d)
}
