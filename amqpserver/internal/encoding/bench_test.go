package encoding

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// annotations is a typical Service Bus message-annotations map.
var annotations = Map{
	{Key: Symbol("x-opt-sequence-number"), Value: int64(42)},
	{Key: Symbol("x-opt-enqueued-time"), Value: time.UnixMilli(1700000000000).UTC()},
	{Key: Symbol("x-opt-locked-until"), Value: time.UnixMilli(1700000060000).UTC()},
	{Key: Symbol("x-opt-partition-key"), Value: "pk"},
}

func TestMarshalAllocs(t *testing.T) {
	var w buffer.Buffer
	w.Grow(512)
	var v any = annotations // box once, as a caller holding an any would
	allocs := testing.AllocsPerRun(100, func() {
		w.Reset()
		if err := Marshal(&w, v); err != nil {
			t.Fatal(err)
		}
	})
	// Encoding must not allocate once the buffer has grown.
	if allocs > 0 {
		t.Errorf("Marshal(annotations) allocates %v times, want 0", allocs)
	}
}

func BenchmarkMarshalMap(b *testing.B) {
	var w buffer.Buffer
	var v any = annotations
	for b.Loop() {
		w.Reset()
		if err := Marshal(&w, v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalMap(b *testing.B) {
	var w buffer.Buffer
	if err := Marshal(&w, annotations); err != nil {
		b.Fatal(err)
	}
	enc := w.Bytes()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := Unmarshal(buffer.New(enc)); err != nil {
			b.Fatal(err)
		}
	}
}

// mixedList is a list such as a $management request carries.
var mixedList = []any{
	int64(1), int64(2), "lock-token", UUID{1, 2, 3}, Symbol("com.microsoft:x"), true, nil,
	[]byte{1, 2, 3, 4}, Map{{Key: "k", Value: int32(-7)}}, time.UnixMilli(1700000000000).UTC(),
}

func BenchmarkUnmarshalList(b *testing.B) {
	var w buffer.Buffer
	if err := Marshal(&w, mixedList); err != nil {
		b.Fatal(err)
	}
	enc := w.Bytes()
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Unmarshal(buffer.New(enc)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadSymbols(b *testing.B) {
	var w buffer.Buffer
	WriteSymbolArray(&w, []Symbol{"com.microsoft:session-filter", "com.microsoft:timeout", "ANONYMOUS", "PLAIN"})
	enc := w.Bytes()
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadSymbols(buffer.New(enc)); err != nil {
			b.Fatal(err)
		}
	}
}
