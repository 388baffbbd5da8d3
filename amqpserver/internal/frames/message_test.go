package frames

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// fullMessage returns a message with every section set and a data body.
func fullMessage() *Message {
	now := time.UnixMilli(1700000000123).UTC()
	return &Message{
		Header:              &MessageHeader{Durable: true, Priority: 9, TTL: 60000, FirstAcquirer: true, DeliveryCount: 2},
		DeliveryAnnotations: encoding.Map{{Key: encoding.Symbol("x-opt-d"), Value: "d"}},
		MessageAnnotations: encoding.Map{
			{Key: encoding.Symbol("x-opt-sequence-number"), Value: int64(42)},
			{Key: encoding.Symbol("x-opt-enqueued-time"), Value: now},
		},
		Properties: &MessageProperties{
			MessageID: "id-1", UserID: []byte("user"), To: "q", Subject: "label", ReplyTo: "reply",
			CorrelationID: encoding.UUID{1, 2}, ContentType: "application/json", ContentEncoding: "gzip",
			AbsoluteExpiryTime: now.Add(time.Hour), CreationTime: now, GroupID: "session",
			GroupSequence: ptr(uint32(3)), ReplyToGroupID: "rs",
		},
		ApplicationProperties: encoding.Map{{Key: "b", Value: int32(2)}, {Key: "a", Value: nil}},
		BodyKind:              BodyData,
		Data:                  [][]byte{[]byte("hello"), bytes.Repeat([]byte{1}, 300)},
		Footer:                encoding.Map{{Key: encoding.Symbol("f"), Value: true}},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		m    *Message
	}{
		{"full data", fullMessage()},
		{"empty", &Message{}},
		{"header only", &Message{Header: &MessageHeader{Priority: DefaultPriority}}},
		{"value", &Message{BodyKind: BodyValue, Value: encoding.Map{{Key: "k", Value: []any{int64(1)}}}}},
		{"null value", &Message{BodyKind: BodyValue}},
		{"sequence", &Message{BodyKind: BodySequence, Sequence: [][]any{{"a"}, {}}}},
		{"ulong message id", &Message{Properties: &MessageProperties{MessageID: uint64(7), CorrelationID: []byte{9}}, Data: [][]byte{{}}}},
		{"empty sections", &Message{DeliveryAnnotations: encoding.Map{}, MessageAnnotations: encoding.Map{}, ApplicationProperties: encoding.Map{}, Footer: encoding.Map{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := mustMarshalMessage(t, tt.m)
			got, err := UnmarshalMessage(enc)
			if err != nil {
				t.Fatalf("UnmarshalMessage(% x): %v", enc, err)
			}
			want := *tt.m
			if want.BodyKind == BodyNone && want.Data != nil {
				want.BodyKind = BodyData
			}
			want.RawBody = got.RawBody // checked separately below
			if diff := cmp.Diff(&want, got, cmpOpts); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
			if again := mustMarshalMessage(t, got); !bytes.Equal(again, enc) {
				t.Errorf("re-encoding differs:\n got % x\nwant % x", again, enc)
			}
		})
	}
}

func TestMessageRawBodyIsVerbatim(t *testing.T) {
	// A body a client encoded with wide forms (str32, uint) that the
	// encoder itself would never choose must survive unchanged.
	body := []byte{0x00, 0x53, 0x77, 0xb1, 0, 0, 0, 2, 'h', 'i'}
	in := append(mustMarshalMessage(t, &Message{Header: &MessageHeader{Priority: 4, DeliveryCount: 0}}), body...)
	in = append(in, mustMarshalMessage(t, &Message{Footer: encoding.Map{{Key: encoding.Symbol("f"), Value: nil}}})...)
	m, err := UnmarshalMessage(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.RawBody, body) {
		t.Errorf("RawBody = % x, want % x", m.RawBody, body)
	}
	if m.BodyKind != BodyValue || m.Value != "hi" {
		t.Errorf("decoded body %v %#v", m.BodyKind, m.Value)
	}
	// The broker changes the header and re-emits; the body stays verbatim.
	m.Header.DeliveryCount = 1
	out := mustMarshalMessage(t, m)
	if !bytes.Contains(out, body) {
		t.Errorf("re-emitted message % x lacks the verbatim body", out)
	}
	in[bytes.Index(in, body)+8] = 'X'
	if m.RawBody[8] != 'h' {
		t.Error("RawBody aliases the input")
	}
}

// TestUnmarshalMessageSharing decodes the same bytes as UnmarshalMessage
// does, but its body is the input's memory, not a copy.
func TestUnmarshalMessageSharing(t *testing.T) {
	in := mustMarshalMessage(t, &Message{
		Properties:            &MessageProperties{MessageID: "m1"},
		ApplicationProperties: encoding.Map{{Key: "k", Value: int64(-7)}, {Key: uint64(3), Value: "v"}},
		BodyKind:              BodyData,
		Data:                  [][]byte{[]byte("payload")},
	})
	m, err := UnmarshalMessageSharing(in)
	if err != nil {
		t.Fatal(err)
	}
	// The application properties are kept encoded, and decode to what
	// the full decode gives.
	full, err := UnmarshalMessage(in)
	if err != nil {
		t.Fatal(err)
	}
	var sink mapSink
	if m.ApplicationProperties != nil || m.RawApplicationProperties == nil {
		t.Fatalf("stored decode: properties %v, raw % x", m.ApplicationProperties, m.RawApplicationProperties)
	}
	if err := m.DecodeApplicationProperties(&sink); err != nil || !reflect.DeepEqual(sink.m, full.ApplicationProperties) {
		t.Fatalf("DecodeApplicationProperties: %v, %v; the full decode has %v", sink.m, err, full.ApplicationProperties)
	}
	var w buffer.Buffer
	if err := m.MarshalAMQP(&w); err != nil || !bytes.Equal(w.Bytes(), in) {
		t.Fatalf("re-encoding the stored decode: %v\n% x\nwant\n% x", err, w.Bytes(), in)
	}
	if m.BodyKind != BodyData || len(m.Data) != 1 || string(m.Data[0]) != "payload" || m.Properties.MessageID != "m1" {
		t.Fatalf("decoded %+v", m)
	}
	in[bytes.Index(in, []byte("payload"))] = 'P'
	if string(m.Data[0]) != "Payload" {
		t.Errorf("body %q does not share the input's memory", m.Data[0])
	}
	if len(m.RawBody) != cap(m.RawBody) {
		t.Error("RawBody's capacity reaches past the body: an append would write into the input")
	}
}

func TestMessageMalformed(t *testing.T) {
	data := func(p ...byte) []byte { return append([]byte{0x00, 0x53, 0x75, 0xa0, byte(len(p))}, p...) }
	header := []byte{0x00, 0x53, 0x70, 0x45}
	tests := []struct {
		name string
		in   []byte
	}{
		{"not described", []byte{0x45}},
		{"unknown section", []byte{0x00, 0x53, 0x79, 0x45}},
		{"header twice", append(append([]byte{}, header...), header...)},
		{"header after body", append(data(1), header...)},
		{"mixed body kinds", append(data(1), 0x00, 0x53, 0x77, 0x40)},
		{"two amqp-values", []byte{0x00, 0x53, 0x77, 0x40, 0x00, 0x53, 0x77, 0x40}},
		{"data not binary", []byte{0x00, 0x53, 0x75, 0xa1, 0x01, 'x'}},
		{"truncated data", []byte{0x00, 0x53, 0x75, 0xb0, 0, 0, 1, 0, 1}},
		{"sequence not a list", []byte{0x00, 0x53, 0x76, 0x43}},
		{"properties wrong type", []byte{0x00, 0x53, 0x73, 0xc0, 0x03, 0x02, 0x40, 0x43}},
		{"annotations not a map", []byte{0x00, 0x53, 0x72, 0x45}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m, err := UnmarshalMessage(tt.in); !errors.Is(err, ErrMalformed) {
				t.Errorf("UnmarshalMessage(% x) = %#v, %v; want ErrMalformed", tt.in, m, err)
			}
		})
	}
}

func TestSplitBatch(t *testing.T) {
	inner := []*Message{
		{Properties: &MessageProperties{MessageID: "m1"}, Data: [][]byte{[]byte("one")}},
		{Properties: &MessageProperties{MessageID: "m2"}, ApplicationProperties: encoding.Map{{Key: "k", Value: "v"}}, Data: [][]byte{[]byte("two")}},
	}
	batch := &Message{MessageAnnotations: encoding.Map{{Key: encoding.Symbol("x-opt-partition-key"), Value: "pk"}}}
	for _, m := range inner {
		batch.Data = append(batch.Data, mustMarshalMessage(t, m))
	}
	decoded, err := UnmarshalMessage(mustMarshalMessage(t, batch))
	if err != nil {
		t.Fatal(err)
	}
	got, err := SplitBatch(decoded)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d messages, want 2", len(got))
	}
	for i, m := range got {
		if m.Properties.MessageID != inner[i].Properties.MessageID || !bytes.Equal(m.Data[0], inner[i].Data[0]) {
			t.Errorf("message %d = %+v", i, m)
		}
	}
	if _, err := SplitBatch(&Message{BodyKind: BodyValue, Value: "x"}); !errors.Is(err, ErrMalformed) {
		t.Errorf("SplitBatch(value body) = %v", err)
	}
	if _, err := SplitBatch(&Message{Data: [][]byte{{0x45}}}); !errors.Is(err, ErrMalformed) {
		t.Errorf("SplitBatch(garbage) = %v", err)
	}
}

func TestMessageAsMarshaler(t *testing.T) {
	// A Message nests as a value, e.g. inside a Raw data section.
	var w buffer.Buffer
	if err := encoding.Marshal(&w, &Message{Data: [][]byte{{1}}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]byte{0x00, 0x53, 0x75, 0xa0, 0x01, 0x01}, w.Bytes()); diff != "" {
		t.Errorf("encoding (-want +got):\n%s", diff)
	}
}

// A StoreDecoder gives what UnmarshalMessageSharing gives, message after
// message, without allocating the message, its header, its properties or
// its data slice.
func TestStoreDecoderReusesItsMessage(t *testing.T) {
	var sd StoreDecoder
	for _, m := range []*Message{
		fullMessage(),
		{Header: &MessageHeader{Durable: true}, Properties: &MessageProperties{GroupID: "g"}, Data: [][]byte{[]byte("a"), []byte("b")}},
		{BodyKind: BodyValue, Value: "v"},
		{Properties: &MessageProperties{To: "q"}},
	} {
		in := mustMarshalMessage(t, m)
		want, err := UnmarshalMessageSharing(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sd.Decode(in)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("StoreDecoder differs (-sharing +decoder):\n%s", d)
		}
	}
	in := mustMarshalMessage(t, &Message{Header: &MessageHeader{Durable: true}, Properties: &MessageProperties{To: "q"}, Data: [][]byte{[]byte("body")}})
	if !raceEnabled {
		sharing := testing.AllocsPerRun(50, func() { _, _ = UnmarshalMessageSharing(in) })
		reused := testing.AllocsPerRun(50, func() { _, _ = sd.Decode(in) })
		if reused > sharing-4 {
			t.Errorf("StoreDecoder.Decode: %v allocations, UnmarshalMessageSharing %v; want 4 fewer", reused, sharing)
		}
	}
	sd.Clear()
	if sd.m.RawBody != nil || sd.data[0] != nil {
		t.Error("Clear kept the last message's input")
	}
}
