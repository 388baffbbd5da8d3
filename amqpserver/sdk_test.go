package amqpserver

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// sdkClient connects the official Go SDK with the emulator connection
// string (SASL ANONYMOUS + $cbs put-token for every link).
func (ts *testServer) sdkClient(t testing.TB) *azservicebus.Client {
	t.Helper()
	cs := "Endpoint=sb://" + ts.addr + ";SharedAccessKeyName=" + testKeyName + ";SharedAccessKey=" + testKey + ";UseDevelopmentEmulator=true"
	c, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func receiveOne(t testing.TB, r *azservicebus.Receiver) *azservicebus.ReceivedMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		t.Fatalf("ReceiveMessages: %v", err)
	}
	if len(msgs) != 1 {
		t.Fatalf("received %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

func TestSDKSendReceiveSettle(t *testing.T) {
	ts := newTestServer(t, nil)
	client := ts.sdkClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	snd, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(ctx)
	for _, body := range []string{"complete-me", "abandon-me", "dead-letter-me"} {
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(body), ApplicationProperties: map[string]any{"k": body}}, nil); err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
	}

	rcv, err := client.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close(ctx)

	m := receiveOne(t, rcv)
	if string(m.Body) != "complete-me" || m.DeliveryCount != 1 || m.SequenceNumber == nil || m.LockedUntil == nil {
		t.Errorf("first message: body %q delivery count %d seq %v locked until %v", m.Body, m.DeliveryCount, m.SequenceNumber, m.LockedUntil)
	}
	if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}

	m = receiveOne(t, rcv)
	if err := rcv.AbandonMessage(ctx, m, nil); err != nil {
		t.Fatalf("AbandonMessage: %v", err)
	}
	m = receiveOne(t, rcv)
	if string(m.Body) != "abandon-me" || m.DeliveryCount != 2 {
		t.Errorf("after abandon: body %q delivery count %d, want abandon-me 2", m.Body, m.DeliveryCount)
	}
	if err := rcv.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("CompleteMessage: %v", err)
	}

	m = receiveOne(t, rcv)
	reason, desc := "why", "because"
	if err := rcv.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc}); err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}

	dlq, err := client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close(ctx)
	m = receiveOne(t, dlq)
	if string(m.Body) != "dead-letter-me" || m.DeadLetterReason == nil || *m.DeadLetterReason != reason ||
		m.DeadLetterErrorDescription == nil || *m.DeadLetterErrorDescription != desc {
		t.Errorf("dead-lettered message: body %q reason %v description %v", m.Body, m.DeadLetterReason, m.DeadLetterErrorDescription)
	}
	if err := dlq.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("CompleteMessage on the DLQ: %v", err)
	}
}

func TestSDKReceiveAndDelete(t *testing.T) {
	ts := newTestServer(t, nil)
	client := ts.sdkClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	snd, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := snd.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"x", "y"} {
		if err := batch.AddMessage(&azservicebus.Message{Body: []byte(b)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := snd.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatalf("SendMessageBatch: %v", err)
	}
	rcv, err := client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		msgs, err := rcv.ReceiveMessages(ctx, 2, nil)
		if err != nil {
			t.Fatalf("ReceiveMessages: %v", err)
		}
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
	}
	if got[0] != "x" || got[1] != "y" {
		t.Errorf("received %q, want [x y]", got)
	}
	if c, _ := ts.Broker.Counts("q"); c.Active != 0 {
		t.Errorf("active = %d after receive-and-delete, want 0", c.Active)
	}
}
