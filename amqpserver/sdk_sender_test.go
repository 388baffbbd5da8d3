package amqpserver

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	gocmp "github.com/google/go-cmp/cmp"
)

// Tests of azservicebus.Sender.

func TestSDKSenderSendMessageProperties(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	ttl := 90 * time.Minute
	sent := &azservicebus.Message{
		Body:             []byte("payload"),
		MessageID:        ptr("mid-1"),
		ContentType:      ptr("text/plain"),
		CorrelationID:    ptr("corr"),
		Subject:          ptr("subj"),
		To:               ptr("to-addr"),
		ReplyTo:          ptr("reply-q"),
		ReplyToSessionID: ptr("reply-session"),
		PartitionKey:     ptr("pk"),
		TimeToLive:       &ttl,
		ApplicationProperties: map[string]any{
			"string": "s", "bool": true, "int32": int32(-7), "int64": int64(1) << 40,
			"uint8": uint8(200), "float64": 2.5, "bytes": []byte{1, 2},
			"time": time.Date(2026, 3, 4, 5, 6, 7, 8e6, time.UTC),
		},
	}
	if err := e.sender(t, "q").SendMessage(ctx, sent, nil); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	got := receiveN(t, e.receiver(t, "q", nil), 1)[0]
	if string(got.Body) != "payload" || got.MessageID != "mid-1" || *got.ContentType != "text/plain" ||
		*got.CorrelationID != "corr" || *got.Subject != "subj" || *got.To != "to-addr" || *got.ReplyTo != "reply-q" ||
		*got.ReplyToSessionID != "reply-session" || got.PartitionKey == nil || *got.PartitionKey != "pk" ||
		got.TimeToLive == nil || *got.TimeToLive != ttl {
		t.Errorf("received system properties differ: %+v", got)
	}
	if got.EnqueuedTime == nil || got.ExpiresAt == nil || !got.ExpiresAt.Equal(got.EnqueuedTime.Add(ttl)) {
		t.Errorf("enqueued %v expires %v, want expiry = enqueued + %v", got.EnqueuedTime, got.ExpiresAt, ttl)
	}
	if got.SequenceNumber == nil || *got.SequenceNumber != 1 || got.State != azservicebus.MessageStateActive {
		t.Errorf("sequence number %v state %v, want 1 active", got.SequenceNumber, got.State)
	}
	if diff := gocmp.Diff(sent.ApplicationProperties, got.ApplicationProperties); diff != "" {
		t.Errorf("application properties (-sent +received):\n%s", diff)
	}
}

// TestSDKSenderAnnotatedBodies sends the three AMQP body kinds and checks
// that RawAMQPMessage returns each as sent.
func TestSDKSenderAnnotatedBodies(t *testing.T) {
	tests := []struct {
		name string
		body azservicebus.AMQPAnnotatedMessageBody
	}{
		{"one data section", azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("d1")}}},
		{"three data sections", azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("a"), {}, []byte("ccc")}}},
		{"string value", azservicebus.AMQPAnnotatedMessageBody{Value: "hello"}},
		{"int64 value", azservicebus.AMQPAnnotatedMessageBody{Value: int64(-42)}},
		{"list value", azservicebus.AMQPAnnotatedMessageBody{Value: []any{"x", int32(1), true}}},
		{"map value", azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"k": "v", "n": int64(3)}}},
		{"one sequence", azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"s", int32(9)}}}},
		{"two sequences", azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a"}, {int64(2), 3.5}}}},
	}
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	snd := e.sender(t, "q")
	rcv := e.receiver(t, "q", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &azservicebus.AMQPAnnotatedMessage{
				Body:                  tt.body,
				ApplicationProperties: map[string]any{"case": tt.name},
				MessageAnnotations:    map[any]any{"x-opt-custom": "note"},
				Properties:            &azservicebus.AMQPAnnotatedMessageProperties{Subject: ptr("annotated")},
			}
			if err := snd.SendAMQPAnnotatedMessage(ctx, m, nil); err != nil {
				t.Fatalf("SendAMQPAnnotatedMessage: %v", err)
			}
			got := receiveN(t, rcv, 1)[0]
			raw := got.RawAMQPMessage
			if diff := gocmp.Diff(tt.body, raw.Body); diff != "" {
				t.Errorf("body (-sent +received):\n%s", diff)
			}
			if raw.ApplicationProperties["case"] != tt.name || raw.MessageAnnotations["x-opt-custom"] != "note" ||
				raw.Properties == nil || raw.Properties.Subject == nil || *raw.Properties.Subject != "annotated" {
				t.Errorf("envelope: props %v annotations %v properties %+v", raw.ApplicationProperties, raw.MessageAnnotations, raw.Properties)
			}
			if raw.MessageAnnotations["x-opt-sequence-number"] != *got.SequenceNumber {
				t.Errorf("x-opt-sequence-number = %v, want %d", raw.MessageAnnotations["x-opt-sequence-number"], *got.SequenceNumber)
			}
			if err := rcv.CompleteMessage(ctx, got, nil); err != nil {
				t.Fatalf("CompleteMessage: %v", err)
			}
		})
	}
}

// TestSDKSenderBatchNearLimit fills a batch up to the 256 KiB limit the
// "small" queue advertises and sends it in one transfer.
func TestSDKSenderBatchNearLimit(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	snd := e.sender(t, "small")
	batch, err := snd.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatalf("NewMessageBatch: %v", err)
	}
	var added [][]byte
	for i := 0; ; i++ {
		body := bytes.Repeat([]byte{byte('a' + i%26)}, 10*1024)
		err := batch.AddMessage(&azservicebus.Message{Body: body, ApplicationProperties: map[string]any{"i": int64(i)}}, nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) {
			break
		}
		if err != nil {
			t.Fatalf("AddMessage %d: %v", i, err)
		}
		added = append(added, body)
	}
	if n := int(batch.NumMessages()); n != len(added) || n < 20 {
		t.Fatalf("batch holds %d messages, added %d; want about 25", n, len(added))
	}
	if sz := batch.NumBytes(); sz > 256*1024 || sz < 240*1024 {
		t.Errorf("batch size %d bytes, want just under 256 KiB", sz)
	}
	if err := snd.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatalf("SendMessageBatch near the limit: %v", err)
	}
	got := receiveN(t, e.receiver(t, "small", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), len(added))
	for i, m := range got {
		if !bytes.Equal(m.Body, added[i]) || m.ApplicationProperties["i"] != int64(i) || *m.SequenceNumber != int64(i+1) {
			t.Errorf("message %d: %d bytes, props %v, seq %d", i, len(m.Body), m.ApplicationProperties, *m.SequenceNumber)
		}
	}

	// A single message over the limit never fits in a batch.
	empty, err := snd.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.AddMessage(&azservicebus.Message{Body: make([]byte, 300*1024)}, nil); !errors.Is(err, azservicebus.ErrMessageTooLarge) {
		t.Errorf("AddMessage(300 KiB) = %v, want ErrMessageTooLarge", err)
	}
}

func TestSDKSenderMessageTooLarge(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	snd := e.sender(t, "small")
	if err := snd.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 300*1024)}, nil); err == nil {
		t.Fatal("SendMessage of 300 KiB to a 256 KiB queue succeeded")
	}
	// The sender is still usable afterwards.
	sendBodies(t, snd, "fits")
	if m := receiveN(t, e.receiver(t, "small", nil), 1)[0]; string(m.Body) != "fits" {
		t.Errorf("received %q, want fits", m.Body)
	}
	if c, _ := e.Broker.Counts("small"); c.Active != 1 {
		t.Errorf("active = %d, want only the message that fits", c.Active)
	}
}

// TestSDKSenderScheduleAndCancel schedules plain and annotated messages,
// cancels one of each, and receives the rest once the broker's clock
// reaches their time.
func TestSDKSenderScheduleAndCancel(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	snd := e.sender(t, "q")
	at := e.Clock.Now().Add(time.Hour).Truncate(time.Millisecond)
	plain, err := snd.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("p1")}, {Body: []byte("p2")}}, at, nil)
	if err != nil || len(plain) != 2 {
		t.Fatalf("ScheduleMessages = %v, %v", plain, err)
	}
	annotated, err := snd.ScheduleAMQPAnnotatedMessages(ctx, []*azservicebus.AMQPAnnotatedMessage{
		{Body: azservicebus.AMQPAnnotatedMessageBody{Value: "a1"}},
		{Body: azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a2"}}}},
	}, at, nil)
	if err != nil || len(annotated) != 2 {
		t.Fatalf("ScheduleAMQPAnnotatedMessages = %v, %v", annotated, err)
	}
	if annotated[0] <= plain[1] {
		t.Errorf("sequence numbers %v then %v, want increasing", plain, annotated)
	}
	if err := snd.CancelScheduledMessages(ctx, []int64{plain[1], annotated[0]}, nil); err != nil {
		t.Fatalf("CancelScheduledMessages: %v", err)
	}

	rcv := e.receiver(t, "q", nil)
	peeked, err := rcv.PeekMessages(ctx, 10, nil)
	if err != nil {
		t.Fatalf("PeekMessages: %v", err)
	}
	if len(peeked) != 2 || *peeked[0].SequenceNumber != plain[0] || *peeked[1].SequenceNumber != annotated[1] {
		t.Fatalf("peeked %d scheduled messages, want %d and %d", len(peeked), plain[0], annotated[1])
	}
	for _, m := range peeked {
		if m.State != azservicebus.MessageStateScheduled || !m.ScheduledEnqueueTime.Equal(at) {
			t.Errorf("peeked %d: state %v at %v, want scheduled at %v", *m.SequenceNumber, m.State, m.ScheduledEnqueueTime, at)
		}
	}
	assertEmpty(t, rcv)

	e.Clock.Advance(time.Hour)
	// The SDK releases messages that arrive between ReceiveMessages calls
	// (assertEmpty left credit on the link), so the order is not kept.
	got := receiveN(t, rcv, 2)
	slices.SortFunc(got, func(a, b *azservicebus.ReceivedMessage) int { return cmp.Compare(*a.SequenceNumber, *b.SequenceNumber) })
	if string(got[0].Body) != "p1" || *got[0].SequenceNumber != plain[0] {
		t.Errorf("first due message %q seq %d, want p1 %d", got[0].Body, *got[0].SequenceNumber, plain[0])
	}
	if diff := gocmp.Diff(azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"a2"}}}, got[1].RawAMQPMessage.Body); diff != "" {
		t.Errorf("scheduled annotated body (-want +got):\n%s", diff)
	}

	// Cancelling a message that is no longer scheduled is ignored and
	// leaves it where it is.
	if err := snd.CancelScheduledMessages(ctx, []int64{plain[0], 999}, nil); err != nil {
		t.Errorf("cancelling an enqueued and an unknown message: %v", err)
	}
	if err := rcv.AbandonMessage(ctx, got[0], nil); err != nil {
		t.Fatal(err)
	}
	if m := receiveN(t, rcv, 1)[0]; *m.SequenceNumber != plain[0] {
		t.Errorf("after cancel, received seq %d, want %d still there", *m.SequenceNumber, plain[0])
	}
}

func TestSDKSenderClose(t *testing.T) {
	e := newSDKEnv(t, nil)
	ctx := sdkCtx(t)
	snd := e.sender(t, "q")
	sendBodies(t, snd, "one")
	if err := snd.Close(ctx); err != nil {
		t.Fatalf("Sender.Close: %v", err)
	}
	err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte("two")}, nil)
	if sdkCode(err) != azservicebus.CodeClosed {
		t.Errorf("SendMessage after Close = %v, want code %q", err, azservicebus.CodeClosed)
	}
	// Another sender on the same client still works.
	sendBodies(t, e.sender(t, "q"), "three")
	if b := bodies(receiveN(t, e.receiver(t, "q", nil), 2)); b[0] != "one" || b[1] != "three" {
		t.Errorf("received %q, want [one three]", b)
	}
}
