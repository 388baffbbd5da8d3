package frames

import (
	"bytes"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// TestMessageInteropGoAMQP checks our message codec against go-amqp, the
// client library the Go Service Bus SDK uses, in both directions.
func TestMessageInteropGoAMQP(t *testing.T) {
	now := time.UnixMilli(1700000000000).UTC()
	id := "msg-1"
	subject := "label"
	group := "session-1"
	theirs := &amqp.Message{
		Header:                &amqp.MessageHeader{Durable: true, Priority: 4, TTL: time.Minute, DeliveryCount: 3},
		Annotations:           amqp.Annotations{"x-opt-sequence-number": int64(7), "x-opt-enqueued-time": now},
		Properties:            &amqp.MessageProperties{MessageID: id, Subject: &subject, GroupID: &group},
		ApplicationProperties: map[string]any{"k": "v"},
		Data:                  [][]byte{[]byte("hello")},
	}
	enc, err := theirs.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := UnmarshalMessage(enc)
	if err != nil {
		t.Fatalf("UnmarshalMessage(go-amqp bytes): %v", err)
	}
	if ours.Header.TTL != 60000 || ours.Header.DeliveryCount != 3 || !ours.Header.Durable {
		t.Errorf("header %+v", ours.Header)
	}
	if v, _ := ours.MessageAnnotations.GetSymbol("x-opt-sequence-number"); v != int64(7) {
		t.Errorf("sequence number %#v", v)
	}
	if ours.Properties.MessageID != "msg-1" || ours.Properties.Subject != "label" || ours.Properties.GroupID != "session-1" {
		t.Errorf("properties %+v", ours.Properties)
	}
	if diff := cmp.Diff([][]byte{[]byte("hello")}, ours.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}

	// And back: go-amqp must read what the broker emits.
	ours.MessageAnnotations.Set(encoding.Symbol("x-opt-locked-until"), now)
	ours.Properties.CorrelationID = encoding.UUID{1}
	var back amqp.Message
	if err := back.UnmarshalBinary(mustMarshalMessage(t, ours)); err != nil {
		t.Fatalf("go-amqp UnmarshalBinary: %v", err)
	}
	if back.Header.DeliveryCount != 3 || back.Annotations["x-opt-sequence-number"] != int64(7) {
		t.Errorf("go-amqp read header %+v annotations %v", back.Header, back.Annotations)
	}
	if lu, ok := back.Annotations["x-opt-locked-until"].(time.Time); !ok || !lu.Equal(now) {
		t.Errorf("x-opt-locked-until = %#v", back.Annotations["x-opt-locked-until"])
	}
	if back.ApplicationProperties["k"] != "v" || !bytes.Equal(back.GetData(), []byte("hello")) {
		t.Errorf("go-amqp read app props %v data %q", back.ApplicationProperties, back.GetData())
	}
	if back.Properties.CorrelationID != (amqp.UUID{1}) {
		t.Errorf("correlation id %#v", back.Properties.CorrelationID)
	}
}
