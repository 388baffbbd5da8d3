package amqpserver

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// mustMarshalMessage encodes an AMQP message as a client would send it.
func mustMarshalMessage(t testing.TB, m *frames.Message) []byte {
	t.Helper()
	var w buffer.Buffer
	if err := m.MarshalAMQP(&w); err != nil {
		t.Fatalf("marshal message: %v", err)
	}
	return append([]byte(nil), w.Bytes()...)
}

// mustDecodeOne decodes a non-batch payload holding one message.
func mustDecodeOne(t testing.TB, raw []byte) *core.Message {
	t.Helper()
	msgs, err := decodeMessage(raw, 0)
	if err != nil {
		t.Fatalf("decodeMessage: %v", err)
	}
	if len(msgs) != 1 {
		t.Fatalf("decodeMessage returned %d messages, want 1", len(msgs))
	}
	return msgs[0]
}

// mustEncodeDelivery encodes m for delivery and decodes it back the way a
// client does.
func mustEncodeDelivery(t testing.TB, m *core.Message, peekLock bool) *frames.Message {
	t.Helper()
	raw, err := encodeDelivery(m, peekLock)
	if err != nil {
		t.Fatalf("encodeDelivery: %v", err)
	}
	am, err := frames.UnmarshalMessage(raw)
	if err != nil {
		t.Fatalf("delivered message does not decode: %v", err)
	}
	return am
}

var msgTime = time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)

func TestDecodeMessageProperties(t *testing.T) {
	seq := uint32(7)
	am := &frames.Message{
		Header: &frames.MessageHeader{Durable: true, Priority: 6, TTL: 90_000, DeliveryCount: 3},
		MessageAnnotations: encoding.Map{
			{Key: annPartitionKey, Value: "pk"},
			{Key: annViaPartitionKey, Value: "via"},
			{Key: annScheduledEnqueueTime, Value: msgTime},
			{Key: annSequenceNumber, Value: int64(99)}, // stale, from a re-sent message
			{Key: annLockedUntil, Value: msgTime},
			{Key: encoding.Symbol("x-custom"), Value: encoding.Symbol("kept")},
			{Key: encoding.Symbol("x-weird"), Value: encoding.Char('x')}, // not storable: dropped
		},
		Properties: &frames.MessageProperties{
			MessageID:          "id-1",
			UserID:             []byte("user"),
			To:                 "to",
			Subject:            "label",
			ReplyTo:            "reply",
			CorrelationID:      encoding.UUID{1, 2, 3},
			ContentType:        "application/json",
			ContentEncoding:    "gzip",
			AbsoluteExpiryTime: msgTime.Add(time.Hour), // ignored, as by Service Bus
			CreationTime:       msgTime,
			GroupID:            "session",
			GroupSequence:      &seq,
			ReplyToGroupID:     "reply-session",
		},
		ApplicationProperties: encoding.Map{{Key: "color", Value: "red"}},
		Data:                  [][]byte{[]byte("hello")},
	}
	got := mustDecodeOne(t, mustMarshalMessage(t, am))
	// The application properties are kept as they arrived (properties.go).
	if ep := got.EncodedProperties; ep.Codec != propertyCodecID || ep.Size != len("color")+len("red") {
		t.Errorf("encoded properties: codec %d, size %d; want codec %d, size %d", ep.Codec, ep.Size, propertyCodecID, len("colorred"))
	}
	props, err := got.Properties()
	if err != nil {
		t.Fatal(err)
	}
	got.ApplicationProperties, got.EncodedProperties = props, core.EncodedProperties{}
	want := &core.Message{
		MessageID:             "id-1",
		CorrelationID:         core.UUID{1, 2, 3},
		SessionID:             "session",
		ReplyToSessionID:      "reply-session",
		To:                    "to",
		ReplyTo:               "reply",
		Subject:               "label",
		ContentType:           "application/json",
		ContentEncoding:       "gzip",
		PartitionKey:          "pk",
		ViaPartitionKey:       "via",
		TimeToLive:            90 * time.Second,
		ScheduledEnqueueTime:  msgTime,
		CreationTime:          msgTime,
		UserID:                []byte("user"),
		Priority:              6,
		Durable:               true,
		ApplicationProperties: map[string]any{"color": "red"},
		Annotations:           map[string]any{"x-custom": core.Symbol("kept")},
		BodyType:              core.BodyBinary,
		Body:                  []byte("hello"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded message (-want +got):\n%s", diff)
	}
}

func TestDecodeMessageDefaults(t *testing.T) {
	got := mustDecodeOne(t, mustMarshalMessage(t, &frames.Message{Data: [][]byte{[]byte("x")}}))
	if got.Priority != frames.DefaultPriority || got.TimeToLive != 0 || got.MessageID != nil || got.Durable {
		t.Errorf("headerless message decoded as priority %d ttl %v id %v durable %v; want defaults",
			got.Priority, got.TimeToLive, got.MessageID, got.Durable)
	}
}

func TestMessageIDTypesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		wire any // as on the wire
		core any // as core keeps it
	}{
		{"string", "abc", "abc"},
		{"uuid", encoding.UUID{0xde, 0xad}, core.UUID{0xde, 0xad}},
		{"ulong", uint64(1 << 40), uint64(1 << 40)},
		{"binary", []byte{1, 2, 3}, []byte{1, 2, 3}},
		{"absent", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			am := &frames.Message{
				Properties: &frames.MessageProperties{MessageID: tc.wire, CorrelationID: tc.wire},
				Data:       [][]byte{nil},
			}
			m := mustDecodeOne(t, mustMarshalMessage(t, am))
			if !cmp.Equal(m.MessageID, tc.core) || !cmp.Equal(m.CorrelationID, tc.core) {
				t.Fatalf("decoded ids %#v / %#v, want %#v", m.MessageID, m.CorrelationID, tc.core)
			}
			out := mustEncodeDelivery(t, m, false)
			if !cmp.Equal(out.Properties.MessageID, tc.wire) || !cmp.Equal(out.Properties.CorrelationID, tc.wire) {
				t.Errorf("delivered ids %#v / %#v, want %#v", out.Properties.MessageID, out.Properties.CorrelationID, tc.wire)
			}
		})
	}
}

func TestDecodeRejectsBadMessageID(t *testing.T) {
	am := &frames.Message{Properties: &frames.MessageProperties{MessageID: int32(5)}, Data: [][]byte{nil}}
	if _, err := decodeMessage(mustMarshalMessage(t, am), 0); !errors.Is(err, errUnsupportedValue) {
		t.Errorf("int message-id: err = %v, want errUnsupportedValue", err)
	}
}

// TestApplicationPropertyTypesRoundTrip sends every property type a client
// may use and checks it comes back with the same AMQP type.
func TestApplicationPropertyTypesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		wire any
		core any // what core stores; nil means the same as wire
	}{
		{"null", nil, nil},
		{"bool", true, nil},
		{"byte", int8(-3), nil},
		{"short", int16(-300), nil},
		{"int", int32(-70000), nil},
		{"long", int64(-1 << 40), nil},
		{"ubyte", uint8(200), nil},
		{"ushort", uint16(60000), nil},
		{"uint", uint32(1 << 31), nil},
		{"ulong", uint64(1 << 63), nil},
		{"float", float32(1.5), nil},
		{"double", 2.25, nil},
		{"string", "text", nil},
		{"binary", []byte{0, 1}, nil},
		{"timestamp", msgTime, nil},
		{"uuid", encoding.UUID{9}, core.UUID{9}},
		{"symbol", encoding.Symbol("sym"), core.Symbol("sym")},
		{"list", []any{"a", int32(1)}, nil},
		{"map", encoding.Map{{Key: "k", Value: int64(2)}}, map[string]any{"k": int64(2)}},
		{"timespan", encoding.Described{Descriptor: timeSpanDescriptor, Value: int64(15_000_000)}, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			am := &frames.Message{
				ApplicationProperties: encoding.Map{{Key: "p", Value: tc.wire}},
				Data:                  [][]byte{nil},
			}
			m := mustDecodeOne(t, mustMarshalMessage(t, am))
			want := tc.core
			if want == nil {
				want = tc.wire
			}
			props, err := m.Properties()
			if err != nil {
				t.Fatal(err)
			}
			if got := props["p"]; !cmp.Equal(got, want) {
				t.Fatalf("core property = %#v (%T), want %#v (%T)", got, got, want, want)
			}
			out := mustEncodeDelivery(t, m, false)
			got, _ := out.ApplicationProperties.GetString("p")
			if !cmp.Equal(got, tc.wire) {
				t.Errorf("delivered property = %#v (%T), want %#v (%T)", got, got, tc.wire, tc.wire)
			}
		})
	}
}

func TestDecodeRejectsUnstorableProperty(t *testing.T) {
	for name, v := range map[string]any{
		"char":      encoding.Char('x'),
		"decimal":   encoding.Decimal64{},
		"described": encoding.Described{Descriptor: uint64(1), Value: "x"},
	} {
		am := &frames.Message{ApplicationProperties: encoding.Map{{Key: "p", Value: v}}, Data: [][]byte{nil}}
		if _, err := decodeMessage(mustMarshalMessage(t, am), 0); !errors.Is(err, errUnsupportedValue) {
			t.Errorf("%s property: err = %v, want errUnsupportedValue", name, err)
		}
	}
}

// A non-string key is refused as before the properties were decoded
// straight into core's map, and so is a section that is not a map.
func TestDecodeRejectsBadPropertySections(t *testing.T) {
	am := &frames.Message{ApplicationProperties: encoding.Map{{Key: uint64(1), Value: "x"}}, Data: [][]byte{nil}}
	if _, err := decodeMessage(mustMarshalMessage(t, am), 0); !errors.Is(err, errUnsupportedValue) ||
		!strings.Contains(err.Error(), "keys must be strings") {
		t.Errorf("ulong key: err = %v, want errUnsupportedValue (keys must be strings)", err)
	}
	// application-properties (0x74) holding a string instead of a map.
	raw := append([]byte{0x00, 0x53, 0x74, 0xa1, 0x01, 'x'}, 0x00, 0x53, 0x75, 0xa0, 0x00)
	if _, err := decodeMessage(raw, 0); !errors.Is(err, encoding.ErrMalformed) {
		t.Errorf("section not a map: err = %v, want ErrMalformed", err)
	}
}

// A connection decodes every message's application properties with one
// propsDecoder, which allocates a key the connection's senders repeat
// once, not per message, and keeps a bounded number of such keys.
func TestPropertyKeysAllocatedOncePerConnection(t *testing.T) {
	enc := func(props encoding.Map) []byte {
		return mustMarshalMessage(t, &frames.Message{ApplicationProperties: props, Data: [][]byte{[]byte("b")}})
	}
	// A list value: properties that are decoded, not kept as they arrived.
	list := encoding.KeyValue{Key: "list", Value: []any{int32(1)}}
	var pd propsDecoder
	first, err := appendMessages(nil, enc(encoding.Map{{Key: "bench-seq", Value: int64(1)}, list}), 0, &pd)
	if err != nil {
		t.Fatal(err)
	}
	second, err := appendMessages(nil, enc(encoding.Map{{Key: "bench-seq", Value: int64(2)}, list}), 0, &pd)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].ApplicationProperties["bench-seq"] != int64(1) || second[0].ApplicationProperties["bench-seq"] != int64(2) {
		t.Fatalf("properties %v, %v", first[0].ApplicationProperties, second[0].ApplicationProperties)
	}
	key := func(m map[string]any) *byte {
		for k := range m {
			if k == "bench-seq" {
				return unsafe.StringData(k)
			}
		}
		return nil
	}
	if key(first[0].ApplicationProperties) != key(second[0].ApplicationProperties) {
		t.Error("the second message's key is a new string: the connection's key cache did not serve it")
	}
	for i := range 3 * maxCachedKeys {
		long := strings.Repeat("k", maxCachedKeyLen+1)
		if _, err := appendMessages(nil, enc(encoding.Map{{Key: fmt.Sprintf("key-%d", i), Value: nil}, {Key: long, Value: nil}}), 0, &pd); err != nil {
			t.Fatal(err)
		}
	}
	if len(pd.keys) > maxCachedKeys {
		t.Errorf("the key cache holds %d keys, more than its bound of %d", len(pd.keys), maxCachedKeys)
	}
	for k := range pd.keys {
		if len(k) > maxCachedKeyLen {
			t.Errorf("the key cache holds a %d-byte key, longer than its bound of %d", len(k), maxCachedKeyLen)
		}
	}
}

func TestBodyMapping(t *testing.T) {
	for _, tc := range []struct {
		name     string
		am       *frames.Message
		wantType core.BodyType
	}{
		{"one data section", &frames.Message{Data: [][]byte{[]byte("payload")}}, core.BodyBinary},
		{"empty data section", &frames.Message{Data: [][]byte{{}}}, core.BodyBinary},
		{"two data sections", &frames.Message{Data: [][]byte{[]byte("a"), []byte("b")}}, core.BodyAMQP},
		{"amqp-value", &frames.Message{Value: encoding.Map{{Key: "k", Value: "v"}}}, core.BodyAMQP},
		{"amqp-sequence", &frames.Message{Sequence: [][]any{{int32(1)}, {"two"}}}, core.BodyAMQP},
		{"no body", &frames.Message{Properties: &frames.MessageProperties{To: "x"}}, core.BodyAMQP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := mustMarshalMessage(t, tc.am)
			in, _ := frames.UnmarshalMessage(raw)
			m := mustDecodeOne(t, raw)
			if m.BodyType != tc.wantType {
				t.Fatalf("BodyType = %v, want %v", m.BodyType, tc.wantType)
			}
			if tc.wantType == core.BodyBinary && !bytes.Equal(m.Body, tc.am.Data[0]) {
				t.Errorf("Body = %q, want %q", m.Body, tc.am.Data[0])
			}
			out := mustEncodeDelivery(t, m, false)
			if !bytes.Equal(out.RawBody, in.RawBody) {
				t.Errorf("delivered body sections % x, want verbatim % x", out.RawBody, in.RawBody)
			}
		})
	}
}

func TestDecodeBatch(t *testing.T) {
	inner := make([][]byte, 3)
	for i := range inner {
		inner[i] = mustMarshalMessage(t, &frames.Message{
			Properties:         &frames.MessageProperties{MessageID: string(rune('a' + i)), GroupID: "s"},
			MessageAnnotations: encoding.Map{{Key: annPartitionKey, Value: "pk"}},
			Data:               [][]byte{{byte(i)}},
		})
	}
	batch := mustMarshalMessage(t, &frames.Message{
		Properties: &frames.MessageProperties{MessageID: "a", GroupID: "s"},
		Data:       inner,
	})
	msgs, err := decodeMessage(batch, frames.MessageFormatBatch)
	if err != nil {
		t.Fatalf("decodeMessage(batch): %v", err)
	}
	if len(msgs) != 3 {
		t.Fatalf("batch decoded into %d messages, want 3", len(msgs))
	}
	for i, m := range msgs {
		if m.MessageID != string(rune('a'+i)) || m.SessionID != "s" || m.PartitionKey != "pk" ||
			m.BodyType != core.BodyBinary || !bytes.Equal(m.Body, []byte{byte(i)}) {
			t.Errorf("batch message %d = id %v session %q pk %q body %v", i, m.MessageID, m.SessionID, m.PartitionKey, m.Body)
		}
	}

	// The same payload without the batch format is one message whose body
	// is the data sections, kept verbatim.
	if m := mustDecodeOne(t, batch); m.BodyType != core.BodyAMQP {
		t.Errorf("batch payload sent as format 0 decoded with body type %v, want BodyAMQP", m.BodyType)
	}
}

func TestDecodeBatchErrors(t *testing.T) {
	notData := mustMarshalMessage(t, &frames.Message{Value: "x"})
	if _, err := decodeMessage(notData, frames.MessageFormatBatch); err == nil {
		t.Error("batch with an amqp-value body decoded without error")
	}
	badInner := mustMarshalMessage(t, &frames.Message{Data: [][]byte{{0xff, 0x00}}})
	if _, err := decodeMessage(badInner, frames.MessageFormatBatch); err == nil {
		t.Error("batch with a malformed inner message decoded without error")
	}
	if _, err := decodeMessage([]byte{0x00, 0x53}, 0); err == nil {
		t.Error("truncated message decoded without error")
	}
}

// deliveredMessage is a fully stamped message as core returns it from a
// peek-lock receive.
func deliveredMessage() *core.Message {
	return &core.Message{
		MessageID:              "m1",
		SessionID:              "s1",
		PartitionKey:           "s1",
		ViaPartitionKey:        "via",
		TimeToLive:             time.Minute,
		ScheduledEnqueueTime:   msgTime.Add(-time.Second),
		ApplicationProperties:  map[string]any{"DeadLetterReason": "why", "DeadLetterErrorDescription": "because", "n": int32(1)},
		Annotations:            map[string]any{"x-custom": "c"},
		BodyType:               core.BodyBinary,
		Body:                   []byte("body"),
		Priority:               frames.DefaultPriority,
		SequenceNumber:         42,
		EnqueuedSequenceNumber: 41,
		EnqueuedTime:           msgTime,
		ExpiresAt:              msgTime.Add(time.Minute),
		DeliveryCount:          3,
		State:                  core.StateDeferred,
		DeadLetterSource:       "q",
		LockToken:              core.LockToken{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 1},
		LockedUntil:            msgTime.Add(30 * time.Second),
	}
}

// TestDeliveryAnnotationTypes pins the exact AMQP type of every annotation
// (amqp.md §4.2): the Go SDK type-asserts them and panics on a mismatch.
func TestDeliveryAnnotationTypes(t *testing.T) {
	m := deliveredMessage()
	raw, err := encodeDelivery(m, true)
	if err != nil {
		t.Fatal(err)
	}
	am, err := frames.UnmarshalMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := encoding.Map{
		{Key: annSequenceNumber, Value: int64(42)},
		{Key: annEnqueuedTime, Value: msgTime.Truncate(time.Millisecond)},
		{Key: annLockedUntil, Value: msgTime.Add(30 * time.Second)},
		{Key: annEnqueueSequenceNumber, Value: int64(41)},
		{Key: annMessageState, Value: int32(1)},
		{Key: annScheduledEnqueueTime, Value: msgTime.Add(-time.Second)},
		{Key: annPartitionKey, Value: "s1"},
		{Key: annViaPartitionKey, Value: "via"},
		{Key: annDeadLetterSource, Value: "q"},
		{Key: encoding.Symbol("x-custom"), Value: "c"},
	}
	if diff := cmp.Diff(want, am.MessageAnnotations); diff != "" {
		t.Errorf("message annotations (-want +got):\n%s", diff)
	}
	// Byte-level: the sequence number is a long even when it is small
	// (smalllong 0x55 is a long), the state an int (smallint 0x54).
	for _, golden := range [][]byte{
		append([]byte{0xa3, 21}, "x-opt-sequence-number\x55\x2a"...),
		append([]byte{0xa3, 19}, "x-opt-message-state\x54\x01"...),
		append([]byte{0xa3, 19}, "x-opt-enqueued-time\x83"...),
	} {
		if !bytes.Contains(raw, golden) {
			t.Errorf("encoding lacks % x", golden)
		}
	}
	if got, _ := am.DeliveryAnnotations.GetSymbol(annLockToken); got != encoding.UUID(m.LockToken) {
		t.Errorf("x-opt-lock-token = %v, want %v", got, encoding.UUID(m.LockToken))
	}
	for _, k := range []string{"DeadLetterReason", "DeadLetterErrorDescription"} {
		if v, _ := am.ApplicationProperties.GetString(k); v != m.ApplicationProperties[k] {
			t.Errorf("%s = %#v, want the string %q", k, v, m.ApplicationProperties[k])
		}
	}
	h := am.Header
	if h == nil || h.DeliveryCount != 2 || h.TTL != 60_000 || h.Priority != frames.DefaultPriority {
		t.Errorf("header = %+v, want delivery-count 2, ttl 60000", h)
	}
	p := am.Properties
	if p.AbsoluteExpiryTime != msgTime.Add(time.Minute) || p.GroupID != "s1" || p.MessageID != "m1" {
		t.Errorf("properties = %+v", p)
	}
}

func TestDeliveryPeekOmitsLock(t *testing.T) {
	m := deliveredMessage()
	am := mustEncodeDelivery(t, m, false)
	if _, ok := am.MessageAnnotations.GetSymbol(annLockedUntil); ok {
		t.Error("peeked message carries x-opt-locked-until")
	}
	if am.DeliveryAnnotations != nil {
		t.Errorf("peeked message carries delivery annotations %v", am.DeliveryAnnotations)
	}
}

func TestDeliveryHeaderEdges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		m         core.Message
		wantCount uint32
		wantTTL   uint32
	}{
		{"never delivered (peek)", core.Message{DeliveryCount: 0}, 0, 0},
		{"first delivery", core.Message{DeliveryCount: 1}, 0, 0},
		{"entity default ttl", core.Message{DeliveryCount: 2, EnqueuedTime: msgTime, ExpiresAt: msgTime.Add(5 * time.Second)}, 1, 5000},
		{"ttl beyond a uint", core.Message{TimeToLive: 100 * 24 * time.Hour}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mustEncodeDelivery(t, &tc.m, true).Header
			if h.DeliveryCount != tc.wantCount || h.TTL != tc.wantTTL {
				t.Errorf("header delivery-count %d ttl %d, want %d and %d", h.DeliveryCount, h.TTL, tc.wantCount, tc.wantTTL)
			}
		})
	}
}

func TestLockTokenDeliveryTag(t *testing.T) {
	tok, err := core.ParseUUID("01234567-89ab-cdef-0123-456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x67, 0x45, 0x23, 0x01, 0xab, 0x89, 0xef, 0xcd, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	tag := lockTokenToDeliveryTag(tok)
	if !bytes.Equal(tag, want) {
		t.Errorf("delivery tag = % x, want % x", tag, want)
	}
	back, ok := deliveryTagToLockToken(tag)
	if !ok || back != tok {
		t.Errorf("deliveryTagToLockToken = %v, %v; want %v", back, ok, tok)
	}
	if _, ok := deliveryTagToLockToken(tag[:15]); ok {
		t.Error("15-byte tag accepted as a lock token")
	}
}

// A delivery's application-properties section is what marshalling the
// sorted Map of its converted values gave before it was written straight
// from core's map: the same bytes, in key order, for every value type.
func TestDeliveredPropertiesAreTheMapsEncoding(t *testing.T) {
	props := map[string]any{
		"z-last": "text", "a-first": int64(-1) << 40, "m-uuid": core.UUID{1, 2}, "m-sym": core.Symbol("s"),
		"span": 1500 * time.Millisecond, "list": []any{int32(1), "two"}, "map": map[string]any{"k": true},
		"nil": nil, "bin": []byte{0xde, 0xad},
	}
	m := &core.Message{SequenceNumber: 7, EnqueuedTime: time.Unix(1700000000, 0), ApplicationProperties: props, Body: []byte("b")}
	for range 2 { // the second time with the pooled scratch the first left
		got, err := encodeDelivery(m, false)
		if err != nil {
			t.Fatal(err)
		}
		var want buffer.Buffer
		encoding.WriteDescriptor(&want, 0x74)
		if err := encoding.Marshal(&want, valueToAMQP(props).(encoding.Map)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(got, want.Bytes()) {
			t.Fatalf("delivered message % x lacks the properties' encoding % x", got, want.Bytes())
		}
		am := mustEncodeDelivery(t, m, false)
		if len(am.ApplicationProperties) != len(props) {
			t.Fatalf("delivered %d properties, want %d", len(am.ApplicationProperties), len(props))
		}
	}
}

// appendDeliveryAnnotations is how the broker built a delivered message's
// annotations until writeDeliveryAnnotations wrote them by type: a Map of
// boxed values, kept as the reference the writer must match byte for byte.
func appendDeliveryAnnotations(anns encoding.Map, m *core.Message, peekLock bool) encoding.Map {
	anns = append(anns,
		encoding.KeyValue{Key: annSequenceNumber, Value: m.SequenceNumber},
		encoding.KeyValue{Key: annEnqueuedTime, Value: m.EnqueuedTime})
	if peekLock && !m.LockedUntil.IsZero() {
		anns = append(anns, encoding.KeyValue{Key: annLockedUntil, Value: m.LockedUntil})
	}
	if m.EnqueuedSequenceNumber != 0 {
		anns = append(anns, encoding.KeyValue{Key: annEnqueueSequenceNumber, Value: m.EnqueuedSequenceNumber})
	}
	anns = append(anns, encoding.KeyValue{Key: annMessageState, Value: int32(m.State)})
	if !m.ScheduledEnqueueTime.IsZero() {
		anns = append(anns, encoding.KeyValue{Key: annScheduledEnqueueTime, Value: m.ScheduledEnqueueTime})
	}
	if m.PartitionKey != "" {
		anns = append(anns, encoding.KeyValue{Key: annPartitionKey, Value: m.PartitionKey})
	}
	if m.ViaPartitionKey != "" {
		anns = append(anns, encoding.KeyValue{Key: annViaPartitionKey, Value: m.ViaPartitionKey})
	}
	if m.DeadLetterSource != "" {
		anns = append(anns, encoding.KeyValue{Key: annDeadLetterSource, Value: m.DeadLetterSource})
	}
	keys := make([]string, 0, len(m.Annotations))
	for k := range m.Annotations {
		if !brokerOwned(encoding.Symbol(k)) && !isMappedAnnotation(encoding.Symbol(k)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		anns = append(anns, encoding.KeyValue{Key: encoding.Symbol(k), Value: valueToAMQP(m.Annotations[k])})
	}
	return anns
}

// The message annotations a delivery carries are written by type exactly
// as marshalling their Map wrote them: every broker annotation, present
// or not, and the sender's own in key order, broker-owned and mapped keys
// among them left out.
func TestDeliveryAnnotationsWrittenAsTheirMap(t *testing.T) {
	at := time.Unix(1700000000, 123e6).UTC()
	for name, m := range map[string]*core.Message{
		"bare": {SequenceNumber: 1, EnqueuedTime: at},
		"everything": {SequenceNumber: 1 << 40, EnqueuedSequenceNumber: 7, EnqueuedTime: at, LockedUntil: at.Add(time.Minute),
			State: core.StateDeferred, ScheduledEnqueueTime: at.Add(time.Hour), PartitionKey: "p", ViaPartitionKey: "v",
			DeadLetterSource: "q", Annotations: map[string]any{
				"x-custom": int64(-3), "a-first": "s", "x-opt-sequence-number": int64(9), "x-opt-partition-key": "skip",
				"list": []any{core.Symbol("s"), core.UUID{1}}, "span": 2 * time.Second,
			}},
	} {
		for _, peekLock := range []bool{false, true} {
			var want, got buffer.Buffer
			if err := encoding.Marshal(&want, appendDeliveryAnnotations(nil, m, peekLock)); err != nil {
				t.Fatal(err)
			}
			if err := writeDeliveryAnnotations(&got, m, peekLock, new(deliveryScratch)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("%s, peek-lock %v:\n% x\nwant\n% x", name, peekLock, got.Bytes(), want.Bytes())
			}
		}
	}
}

// TestLockTokenAnnotationWrittenAsItsMap checks that a peek-locked
// delivery's delivery annotations, written by type, are byte for byte
// the Map {x-opt-lock-token: token} they replace, and that a delivery
// carries them (and a peeked one none).
func TestLockTokenAnnotationWrittenAsItsMap(t *testing.T) {
	tok := core.LockToken{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f}
	var want, got buffer.Buffer
	if err := encoding.Marshal(&want, encoding.Map{{Key: annLockToken, Value: encoding.UUID(tok)}}); err != nil {
		t.Fatal(err)
	}
	writeLockTokenAnnotation(&got, tok)
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("lock token annotation:\n% x\nwant\n% x", got.Bytes(), want.Bytes())
	}
	m := &core.Message{SequenceNumber: 1, EnqueuedTime: time.Unix(1700000000, 0).UTC(), LockToken: tok, Body: []byte("x")}
	for _, peekLock := range []bool{false, true} {
		raw, err := encodeDelivery(m, peekLock)
		if err != nil {
			t.Fatal(err)
		}
		am, err := frames.UnmarshalMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := am.DeliveryAnnotations.Get(annLockToken)
		if peekLock && (!ok || v != encoding.UUID(tok)) {
			t.Errorf("peek-lock delivery: x-opt-lock-token %v (%v), want %v", v, ok, encoding.UUID(tok))
		}
		if !peekLock && am.DeliveryAnnotations != nil {
			t.Errorf("peeked delivery has delivery annotations %v", am.DeliveryAnnotations)
		}
	}
}

// TestEncodeDeliveryAllocatesItsBytes checks that encoding a peek-locked
// delivery of a message with stored properties allocates the delivery's
// bytes and nothing else: the structures around it are pooled, the lock
// token and annotations are written by type, the properties as stored.
func TestEncodeDeliveryAllocatesItsBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are only meaningful without -race (make allocs)")
	}
	var props buffer.Buffer
	if err := encoding.WriteMap(&props, encoding.Map{{Key: "bench-run", Value: "6f1c2d9e"}, {Key: "bench-seq", Value: int64(7)}}); err != nil {
		t.Fatal(err)
	}
	raw := props.Bytes()
	m := &core.Message{
		MessageID: "0123456789abcdef0123456789abcdef", SequenceNumber: 42, EnqueuedTime: time.Unix(1700000000, 0).UTC(),
		LockToken: core.LockToken{1, 2, 3}, LockedUntil: time.Unix(1700000060, 0).UTC(), Durable: true, Priority: 4,
		EncodedProperties: core.EncodedProperties{Codec: propertyCodecID, Bytes: raw, Size: 30},
		Body:              make([]byte, 1024),
	}
	if _, err := encodeDelivery(m, true); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = encodeDelivery(m, true) }); n != 1 {
		t.Errorf("encodeDelivery allocates %v times, want 1 (its bytes)", n)
	}
}
