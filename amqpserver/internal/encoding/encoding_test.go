package encoding

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// mustMarshal encodes v or fails the test.
func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	var w buffer.Buffer
	if err := Marshal(&w, v); err != nil {
		t.Fatalf("Marshal(%#v): %v", v, err)
	}
	return w.Bytes()
}

// cmpOpts compares decoded values: times by instant.
var cmpOpts = cmp.Options{cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}

func TestRoundTripPrimitives(t *testing.T) {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	tests := []struct {
		name string
		in   any
	}{
		{"null", nil},
		{"true", true},
		{"false", false},
		{"ubyte", uint8(200)},
		{"ushort", uint16(65000)},
		{"uint0", uint32(0)},
		{"smalluint", uint32(255)},
		{"uint", uint32(math.MaxUint32)},
		{"ulong0", uint64(0)},
		{"smallulong", uint64(7)},
		{"ulong", uint64(math.MaxUint64)},
		{"byte", int8(-128)},
		{"short", int16(-30000)},
		{"smallint", int32(-5)},
		{"int", int32(math.MinInt32)},
		{"smalllong", int64(127)},
		{"long", int64(math.MinInt64)},
		{"float", float32(1.5)},
		{"double", -2.25},
		{"decimal32", Decimal32{1, 2, 3, 4}},
		{"decimal64", Decimal64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"decimal128", Decimal128{15: 9}},
		{"char", Char('€')},
		{"timestamp", ts},
		{"timestamp before epoch", time.UnixMilli(-1).UTC()},
		{"uuid", UUID{0: 0xde, 15: 0xad}},
		{"binary", []byte{0, 1, 2}},
		{"empty binary", []byte{}},
		{"long binary", bytes.Repeat([]byte{7}, 300)},
		{"string", "héllo"},
		{"empty string", ""},
		{"long string", strings.Repeat("s", 256)},
		{"symbol", Symbol("amqp:not-found")},
		{"long symbol", Symbol(strings.Repeat("x", 1000))},
		{"list0", []any{}},
		{"list8", []any{uint32(1), "two", nil}},
		{"list32", []any{strings.Repeat("a", 300), nil}},
		{"nested list", []any{[]any{[]any{true}}}},
		{"map", Map{{Key: Symbol("k"), Value: int64(1)}, {Key: "s", Value: nil}, {Key: uint64(5), Value: []any{}}}},
		{"empty map", Map{}},
		{"map32", Map{{Key: "big", Value: strings.Repeat("v", 300)}}},
		{"described", Described{Descriptor: uint64(0x137000000C), Value: "session-1"}},
		{"described symbol", Described{Descriptor: Symbol("apache.org:selector-filter:string"), Value: "a = 1"}},
		{"symbol array", SymbolArray("PLAIN", "ANONYMOUS")},
		{"empty symbol array", SymbolArray()},
		{"wide symbol array", SymbolArray(Symbol(strings.Repeat("y", 300)))},
		{"uint array", Array{Type: TypeCodeUint, Elems: []any{uint32(1), uint32(70000)}}},
		{"small uint array", Array{Type: TypeCodeUint, Elems: []any{uint32(1), uint32(2)}}},
		{"long array", Array{Type: TypeCodeLong, Elems: []any{int64(-1), int64(1) << 40}}},
		{"small long array", Array{Type: TypeCodeLong, Elems: []any{int64(-1), int64(3)}}},
		{"ulong array", Array{Type: TypeCodeUlong, Elems: []any{uint64(1), uint64(1) << 40}}},
		{"int array", Array{Type: TypeCodeInt, Elems: []any{int32(1), int32(-1000)}}},
		{"bool array", Array{Type: TypeCodeBool, Elems: []any{true, false}}},
		{"timestamp array", Array{Type: TypeCodeTimestamp, Elems: []any{ts, ts.Add(time.Second)}}},
		{"uuid array", Array{Type: TypeCodeUUID, Elems: []any{UUID{1}, UUID{2}}}},
		{"string array", Array{Type: TypeCodeStr32, Elems: []any{"a", "b"}}},
		{"binary array", Array{Type: TypeCodeVbin32, Elems: []any{[]byte{1}, []byte{}}}},
		{"double array", Array{Type: TypeCodeDouble, Elems: []any{1.0, 2.0}}},
		{"ushort array", Array{Type: TypeCodeUshort, Elems: []any{uint16(1), uint16(2)}}},
		{"null array", Array{Type: TypeCodeNull, Elems: []any{nil, nil}}},
		{"list array", Array{Type: TypeCodeList32, Elems: []any{[]any{"x"}, []any{}}}},
		{"map array", Array{Type: TypeCodeMap32, Elems: []any{Map{{Key: "a", Value: int32(1)}}}}},
		{"array array", Array{Type: TypeCodeArray32, Elems: []any{SymbolArray("a")}}},
		{"described array", Array{Type: TypeCodeStr32, Descriptor: uint64(0x77), Elems: []any{"a"}}},
		{"list in map in list", []any{Map{{Key: Symbol("l"), Value: []any{SymbolArray("z")}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := mustMarshal(t, tt.in)
			r := buffer.New(enc)
			got, err := Unmarshal(r)
			if err != nil {
				t.Fatalf("Unmarshal(% x): %v", enc, err)
			}
			if diff := cmp.Diff(tt.in, got, cmpOpts); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
			if r.Len() != 0 {
				t.Errorf("%d bytes left after Unmarshal", r.Len())
			}
			// Skip and ReadRaw must agree with the decoder on the value's extent.
			raw, err := ReadRaw(buffer.New(enc))
			if err != nil || !bytes.Equal(raw, enc) {
				t.Errorf("ReadRaw = % x, %v; want % x", raw, err, enc)
			}
			// Re-encoding the decoded value must reproduce the bytes.
			if again := mustMarshal(t, got); !bytes.Equal(again, enc) {
				t.Errorf("re-encoding gave % x, want % x", again, enc)
			}
		})
	}
}

func TestGoldenEncodings(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want []byte
	}{
		// Examples follow AMQP 1.0 part 1 §1.6 (constructor tables).
		{"null", nil, []byte{0x40}},
		{"true", true, []byte{0x41}},
		{"false", false, []byte{0x42}},
		{"uint0", uint32(0), []byte{0x43}},
		{"smalluint", uint32(5), []byte{0x52, 0x05}},
		{"uint", uint32(256), []byte{0x70, 0, 0, 1, 0}},
		{"ulong0", uint64(0), []byte{0x44}},
		{"smallulong", uint64(0x10), []byte{0x53, 0x10}},
		{"smallint", int32(-1), []byte{0x54, 0xff}},
		{"smalllong", int64(-2), []byte{0x55, 0xfe}},
		{"long", int64(128), []byte{0x81, 0, 0, 0, 0, 0, 0, 0, 0x80}},
		{"str8", "hello", []byte{0xa1, 5, 'h', 'e', 'l', 'l', 'o'}},
		{"sym8", Symbol("PLAIN"), []byte{0xa3, 5, 'P', 'L', 'A', 'I', 'N'}},
		{"vbin8", []byte{1, 2}, []byte{0xa0, 2, 1, 2}},
		{"timestamp", time.UnixMilli(1).UTC(), []byte{0x83, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"list0", []any{}, []byte{0x45}},
		{"list8", []any{true, uint32(0)}, []byte{0xc0, 3, 2, 0x41, 0x43}},
		{"map8", Map{{Key: Symbol("a"), Value: nil}}, []byte{0xc1, 5, 2, 0xa3, 1, 'a', 0x40}},
		{"sym array", SymbolArray("PLAIN", "ANONYMOUS"), append(append(
			[]byte{0xe0, 18, 2, 0xa3, 5}, "PLAIN"...), append([]byte{9}, "ANONYMOUS"...)...)},
		{"described", Described{Descriptor: uint64(0x24), Value: []any{}}, []byte{0x00, 0x53, 0x24, 0x45}},
		{"int as long", 300, []byte{0x81, 0, 0, 0, 0, 0, 0, 1, 0x2c}},
		{"[]Symbol", []Symbol{"x"}, []byte{0xe0, 4, 1, 0xa3, 1, 'x'}},
		{"Raw", Raw{0x52, 0x09}, []byte{0x52, 0x09}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustMarshal(t, tt.in); !bytes.Equal(got, tt.want) {
				t.Errorf("Marshal(%#v) = % x, want % x", tt.in, got, tt.want)
			}
		})
	}
}

func TestArraysAndListsStayDistinct(t *testing.T) {
	arr := mustMarshal(t, SymbolArray("a", "b"))
	list := mustMarshal(t, []any{Symbol("a"), Symbol("b")})
	if arr[0] != TypeCodeArray8 || list[0] != TypeCodeList8 {
		t.Fatalf("constructors: array 0x%02x, list 0x%02x", arr[0], list[0])
	}
	gotArr, err := Unmarshal(buffer.New(arr))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gotArr.(Array); !ok {
		t.Errorf("array decoded as %T, want Array", gotArr)
	}
	gotList, err := Unmarshal(buffer.New(list))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := gotList.([]any); !ok {
		t.Errorf("list decoded as %T, want []any", gotList)
	}
	if _, err := ReadList(buffer.New(arr)); !errors.Is(err, ErrMalformed) {
		t.Errorf("ReadList(array) error = %v, want ErrMalformed", err)
	}
	if _, err := ReadArray(buffer.New(list)); !errors.Is(err, ErrMalformed) {
		t.Errorf("ReadArray(list) error = %v, want ErrMalformed", err)
	}
}

func TestArrayRejectsMixedElements(t *testing.T) {
	var w buffer.Buffer
	err := Marshal(&w, Array{Type: TypeCodeSym32, Elems: []any{Symbol("a"), "b"}})
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("Marshal(mixed array) error = %v, want ErrUnsupported", err)
	}
}

func TestMarshalUnsupported(t *testing.T) {
	var w buffer.Buffer
	if err := Marshal(&w, make(chan int)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Marshal(chan) error = %v, want ErrUnsupported", err)
	}
}

func TestMarshalConvenienceMaps(t *testing.T) {
	got, err := Unmarshal(buffer.New(mustMarshal(t, map[string]any{"b": int32(2), "a": int32(1)})))
	if err != nil {
		t.Fatal(err)
	}
	want := Map{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(2)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("map[string]any (-want +got):\n%s", diff)
	}
}

func TestUUIDString(t *testing.T) {
	u := UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	if got, want := u.String(), "12345678-9abc-def0-0123-456789abcdef"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
