package core

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// checkAllocs fails t if f allocates other than want times per run. Not
// under -race, whose instrumentation allocates on its own.
func checkAllocs(t *testing.T, what string, want float64, f func()) {
	t.Helper()
	if raceEnabled {
		return
	}
	if n := testing.AllocsPerRun(100, f); n != want {
		t.Errorf("%s: %v allocations, want %v", what, n, want)
	}
}

// recordTestMessage is a message as applications send them: an id, a
// session, three application properties and a 1 KiB body.
func recordTestMessage() *Message {
	return &Message{
		MessageID:   "order-17",
		SessionID:   "s1",
		ContentType: "application/json",
		ApplicationProperties: map[string]any{
			"bench-run": "6f1c2d9e4b7a4c0e", "bench-seq": int64(123456), "bench-sent": int64(1795000000123456789),
		},
		Annotations:  map[string]any{"x-opt-custom": "v"},
		EnqueuedTime: time.Unix(1795000000, 0),
		Body:         make([]byte, 1024),
	}
}

// The body and state records are written with one allocation each (the
// send path's buffers grew field by field before), and still decode.
func TestRecordEncodingAllocatesOnce(t *testing.T) {
	m := recordTestMessage()
	checkAllocs(t, "encodeBody", 1, func() {
		if _, err := encodeBody(nil, m); err != nil {
			t.Fatal(err)
		}
	})
	b, err := encodeBody(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if est := bodyRecordSize(m); est < len(b) || est > 2*len(b) {
		t.Errorf("bodyRecordSize %d for a %d-byte record", est, len(b))
	}
	back, err := decodeBody(b)
	if err != nil || back.MessageID != m.MessageID || back.ApplicationProperties["bench-sent"] != int64(1795000000123456789) ||
		len(back.Body) != len(m.Body) {
		t.Fatalf("decodeBody: %+v, %v", back, err)
	}

	st := stateRec{state: StateActive, deliveryCount: 1 << 30, owner: 1 << 63, expiresAt: -1 << 62,
		scheduledAt: 1 << 62, size: 1 << 30, sessionID: "a-session"}
	checkAllocs(t, "stateRec.encode", 1, func() { st.encode(nil) })
	if got, err := decodeState(st.encode(nil)); err != nil || got != st {
		t.Fatalf("decodeState: %+v, %v; want %+v", got, err, st)
	}
}

// idLen, which Size uses to count an id without formatting it, agrees
// with the id's text form for every kind of id.
func TestIDLenMatchesIDString(t *testing.T) {
	for _, id := range []any{nil, "", "order-17", NewUUID(), []byte{1, 2, 3}, uint64(42), Symbol("sym")} {
		if got, want := idLen(id), len(idString(id)); got != want {
			t.Errorf("idLen(%#v) = %d, want %d", id, got, want)
		}
	}
	m := recordTestMessage()
	m.MessageID = []byte{0xde, 0xad}
	checkAllocs(t, "Size", 0, func() { m.Size() })
}

// measure, the send path's one walk over a message's properties, agrees
// with Size, with HeaderSize's definition (Size without the body, plus
// the annotations) and with the body record's length (never less, at
// most twice), for messages with and without properties, annotations and
// a body; and it walks without allocating.
func TestMeasureAgreesWithEachSize(t *testing.T) {
	full := recordTestMessage()
	full.UserID = []byte("user")
	full.CorrelationID = NewUUID()
	full.ApplicationProperties["nested"] = map[string]any{"a": []any{int32(1), "two", 3.0}}
	for name, m := range map[string]*Message{
		"empty":       {},
		"body only":   {Body: make([]byte, 12)},
		"application": recordTestMessage(),
		"everything":  full,
	} {
		ms := measure(m)
		if ms.size != m.Size() {
			t.Errorf("%s: measure says size %d, Size %d", name, ms.size, m.Size())
		}
		header := m.Size() - len(m.Body)
		for k, v := range m.Annotations {
			header += len(k) + valueSize(v)
		}
		if ms.header != header {
			t.Errorf("%s: measure says header %d, want %d", name, ms.header, header)
		}
		b, err := encodeBody(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if ms.record < len(b) || ms.record > 2*len(b)+96 {
			t.Errorf("%s: measure says record %d for a %d-byte record", name, ms.record, len(b))
		}
	}
	checkAllocs(t, "measure", 0, func() { measure(full) })
}

// A read-ahead decodes its run of bodies with one keyCache: the property
// keys the messages share are allocated once for the run, not per
// message, and the cache stays within its bounds.
func TestDecodeShareKeysWithinARun(t *testing.T) {
	b, err := encodeBody(nil, recordTestMessage())
	if err != nil {
		t.Fatal(err)
	}
	keys := make(keyCache)
	first, err := decodeBodyKeys(b, keys)
	if err != nil {
		t.Fatal(err)
	}
	second, err := decodeBodyKeys(b, keys)
	if err != nil {
		t.Fatal(err)
	}
	for k := range first.ApplicationProperties {
		for k2 := range second.ApplicationProperties {
			if k == k2 && unsafe.StringData(k) != unsafe.StringData(k2) {
				t.Errorf("key %q decoded twice into two strings", k)
			}
		}
	}
	if !reflect.DeepEqual(first.ApplicationProperties, recordTestMessage().ApplicationProperties) {
		t.Errorf("properties %v", first.ApplicationProperties)
	}
	var without, with float64
	if !raceEnabled {
		without = testing.AllocsPerRun(50, func() { _, _ = decodeBody(b) })
		with = testing.AllocsPerRun(50, func() { _, _ = decodeBodyKeys(b, keys) })
		if with > without-3 {
			t.Errorf("decoding with the run's keys: %v allocations, without: %v; want 3 fewer (the three property keys)", with, without)
		}
	}
	for i := range 3 * maxCachedKeys {
		keys.key([]byte(fmt.Sprintf("key-%d", i)))
		keys.key(bytes.Repeat([]byte("k"), maxCachedKeyLen+1+i))
	}
	if len(keys) > maxCachedKeys {
		t.Errorf("the cache holds %d keys, more than its bound %d", len(keys), maxCachedKeys)
	}
	for k := range keys {
		if len(k) > maxCachedKeyLen {
			t.Errorf("the cache holds a %d-byte key, longer than its bound %d", len(k), maxCachedKeyLen)
		}
	}
}

// goldenV1Body is a version 1 body record as the release before version
// 2 wrote it (main at 81493f7), for a message with every field set.
const goldenV1Body = "010d086f726465722d313710010200000000000000000000000000000273310002746f0172056c6162656c106170706c69636174696f6e2f6a736f6e0000000080e0ba84bf03008a809cbdabbf8fe93180a8f2f6b2bf8fe93112017504010001016e0605010c782d6f70742d637573746f6d0d01760568656c6c6f"

// goldenMessage is the message goldenV1Body holds.
func goldenMessage() *Message {
	return &Message{
		MessageID: "order-17", CorrelationID: UUID{1, 2}, SessionID: "s1", To: "to", ReplyTo: "r", Subject: "label",
		ContentType: "application/json", TimeToLive: time.Minute, CreationTime: time.Unix(1795000000, 5).UTC(),
		EnqueuedTime: time.Unix(1795000001, 0).UTC(), EnqueuedSequenceNumber: 9, UserID: []byte("u"), Priority: 4, Durable: true,
		ApplicationProperties: map[string]any{"n": int64(-3)},
		Annotations:           map[string]any{"x-opt-custom": "v"},
		BodyType:              BodyBinary, Body: []byte("hello"),
	}
}

// Records written before version 2 still read back whole, and a message
// whose properties are decoded is still written as version 1, byte for
// byte as before; one whose properties are encoded is written as version
// 2 and reads back with them as they were.
func TestBodyRecordVersions(t *testing.T) {
	v1, err := hex.DecodeString(goldenV1Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBody(v1)
	if err != nil {
		t.Fatal(err)
	}
	if want := goldenMessage(); !reflect.DeepEqual(got, want) {
		t.Errorf("version 1 record decodes to\n%+v\nwant\n%+v", got, want)
	}
	if b, err := encodeBody(nil, goldenMessage()); err != nil || !bytes.Equal(b, v1) {
		t.Errorf("a message with decoded properties encodes to %x, %v; want version 1 as before", b, err)
	}

	m := WithEncodedProperties(goldenMessage())
	b, err := encodeBody(nil, m)
	if err != nil || b[0] != bodyVersionEncoded {
		t.Fatalf("encoded properties: record %x, %v; want version %d", b, err, bodyVersionEncoded)
	}
	if est := bodyRecordSize(m); est < len(b) || est > 2*len(b)+96 {
		t.Errorf("bodyRecordSize %d for a %d-byte record", est, len(b))
	}
	if got, err = decodeBody(b); err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("version 2 record decodes to\n%+v, %v\nwant\n%+v", got, err, m)
	}
	for n := range len(b) {
		if _, err := decodeBody(b[:n]); !errors.Is(err, errCorrupt) {
			t.Fatalf("version 2 record cut to %d of %d bytes: %v, want errCorrupt", n, len(b), err)
		}
	}
}
