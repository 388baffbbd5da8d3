package encoding

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

func TestTypedReadersAcceptNarrowerTypes(t *testing.T) {
	tests := []struct {
		name string
		in   any
		read func(*buffer.Buffer) (any, error)
		want any
	}{
		{"uint from ubyte", uint8(9), func(r *buffer.Buffer) (any, error) { return ReadUint(r) }, uint32(9)},
		{"uint from ushort", uint16(999), func(r *buffer.Buffer) (any, error) { return ReadUint(r) }, uint32(999)},
		{"uint from null", nil, func(r *buffer.Buffer) (any, error) { return ReadUint(r) }, uint32(0)},
		{"ulong from uint", uint32(70000), func(r *buffer.Buffer) (any, error) { return ReadUlong(r) }, uint64(70000)},
		{"ulong from uint0", uint32(0), func(r *buffer.Buffer) (any, error) { return ReadUlong(r) }, uint64(0)},
		{"ushort from ubyte", uint8(3), func(r *buffer.Buffer) (any, error) { return ReadUshort(r) }, uint16(3)},
		{"long from int", int32(-70000), func(r *buffer.Buffer) (any, error) { return ReadLong(r) }, int64(-70000)},
		{"long from smalllong", int64(-3), func(r *buffer.Buffer) (any, error) { return ReadLong(r) }, int64(-3)},
		{"int from short", int16(-2), func(r *buffer.Buffer) (any, error) { return ReadInt(r) }, int32(-2)},
		{"bool 0x56", Raw{0x56, 0x01}, func(r *buffer.Buffer) (any, error) { return ReadBool(r) }, true},
		{"bool from null", nil, func(r *buffer.Buffer) (any, error) { return ReadBool(r) }, false},
		{"symbols from one symbol", Symbol("a"), func(r *buffer.Buffer) (any, error) { return ReadSymbols(r) }, []Symbol{"a"}},
		{"symbols from array", SymbolArray("a", "b"), func(r *buffer.Buffer) (any, error) { return ReadSymbols(r) }, []Symbol{"a", "b"}},
		{"symbols from null", nil, func(r *buffer.Buffer) (any, error) { return ReadSymbols(r) }, []Symbol(nil)},
		{"timestamp", time.UnixMilli(5).UTC(), func(r *buffer.Buffer) (any, error) { return ReadTimestamp(r) }, time.UnixMilli(5).UTC()},
		{"binary copies", []byte{1}, func(r *buffer.Buffer) (any, error) { return ReadBinary(r) }, []byte{1}},
		{"ubyte", uint8(4), func(r *buffer.Buffer) (any, error) { return ReadUbyte(r) }, uint8(4)},
		{"string", "s", func(r *buffer.Buffer) (any, error) { return ReadString(r) }, "s"},
		{"symbol", Symbol("s"), func(r *buffer.Buffer) (any, error) { return ReadSymbol(r) }, Symbol("s")},
		{"map", Map{{Key: "a", Value: true}}, func(r *buffer.Buffer) (any, error) { return ReadMap(r) }, Map{{Key: "a", Value: true}}},
		{"descriptor", Described{Descriptor: uint64(0x13), Value: nil}, func(r *buffer.Buffer) (any, error) { return ReadDescriptor(r) }, uint64(0x13)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.read(buffer.New(mustMarshal(t, tt.in)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpOpts); diff != "" {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTypedReadersRejectWrongTypes(t *testing.T) {
	tests := []struct {
		name string
		in   any
		read func(*buffer.Buffer) error
	}{
		{"uint from ulong", uint64(1), func(r *buffer.Buffer) error { _, err := ReadUint(r); return err }},
		{"uint from string", "1", func(r *buffer.Buffer) error { _, err := ReadUint(r); return err }},
		{"string from symbol", Symbol("a"), func(r *buffer.Buffer) error { _, err := ReadString(r); return err }},
		{"symbol from string", "a", func(r *buffer.Buffer) error { _, err := ReadSymbol(r); return err }},
		{"bool from uint", uint32(1), func(r *buffer.Buffer) error { _, err := ReadBool(r); return err }},
		{"symbols from list", []any{Symbol("a")}, func(r *buffer.Buffer) error { _, err := ReadSymbols(r); return err }},
		{"symbols from string array", Array{Type: TypeCodeStr32, Elems: []any{"a"}}, func(r *buffer.Buffer) error { _, err := ReadSymbols(r); return err }},
		{"descriptor from list", []any{}, func(r *buffer.Buffer) error { _, err := ReadDescriptor(r); return err }},
		{"symbolic descriptor", Described{Descriptor: Symbol("x"), Value: nil}, func(r *buffer.Buffer) error { _, err := ReadDescriptor(r); return err }},
		{"map from list", []any{}, func(r *buffer.Buffer) error { _, err := ReadMap(r); return err }},
		{"timestamp from long", int64(5), func(r *buffer.Buffer) error { _, err := ReadTimestamp(r); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.read(buffer.New(mustMarshal(t, tt.in))); !errors.Is(err, ErrMalformed) {
				t.Errorf("error = %v, want ErrMalformed", err)
			}
		})
	}
}

// TestListWriterKeepsEveryField: trailing nulls are written, as Service
// Bus writes them (clients read composite fields by position), and only
// a composite without fields is list0.
func TestListWriterKeepsEveryField(t *testing.T) {
	var w buffer.Buffer
	l := BeginList(&w)
	WriteUint(&w, 7)
	l.Field()
	l.Null()
	WriteBool(&w, true)
	l.Field()
	l.Null()
	l.Null()
	l.End()
	want := []byte{0xc0, 7, 5, 0x52, 7, 0x40, 0x41, 0x40, 0x40}
	if diff := cmp.Diff(want, w.Bytes()); diff != "" {
		t.Errorf("encoding (-want +got):\n%s", diff)
	}

	var oneNull buffer.Buffer
	l = BeginList(&oneNull)
	l.Null()
	l.End()
	if diff := cmp.Diff([]byte{0xc0, 2, 1, 0x40}, oneNull.Bytes()); diff != "" {
		t.Errorf("one null field (-want +got):\n%s", diff)
	}

	var none buffer.Buffer
	l = BeginList(&none)
	l.End()
	if diff := cmp.Diff([]byte{TypeCodeList0}, none.Bytes()); diff != "" {
		t.Errorf("no fields (-want +got):\n%s", diff)
	}
}

func TestListWriterLarge(t *testing.T) {
	var w buffer.Buffer
	w.AppendByte(0xee) // unrelated prefix must be preserved
	l := BeginList(&w)
	for range 300 {
		WriteUint(&w, 1000)
		l.Field()
	}
	l.End()
	r := buffer.New(w.Bytes()[1:])
	got, err := ReadList(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 300 || got[299] != uint32(1000) {
		t.Errorf("decoded %d elements, last %v", len(got), got[len(got)-1])
	}
	if w.Bytes()[0] != 0xee || w.Bytes()[1] != TypeCodeList32 {
		t.Errorf("header bytes % x", w.Bytes()[:2])
	}
}

func TestListReaderSkipsNulls(t *testing.T) {
	r := buffer.New(mustMarshal(t, []any{nil, "a", nil, uint32(3)}))
	l, err := NewListReader(r)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for {
		i, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		if i < 0 {
			break
		}
		idx = append(idx, i)
		if err := Skip(l.Buf()); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.End(); err != nil {
		t.Errorf("End: %v", err)
	}
	if diff := cmp.Diff([]int{1, 3}, idx); diff != "" {
		t.Errorf("indices (-want +got):\n%s", diff)
	}
	if l.Len() != 4 {
		t.Errorf("Len = %d, want 4", l.Len())
	}
}

func TestListReaderEndDetectsLeftovers(t *testing.T) {
	l, err := NewListReader(buffer.New(mustMarshal(t, []any{"a", "b"})))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(); err != nil {
		t.Fatal(err)
	}
	if err := l.End(); !errors.Is(err, ErrMalformed) {
		t.Errorf("End with unread elements = %v, want ErrMalformed", err)
	}
}

// TestListWindowReadsInPlace checks that a ListWindow sees what a
// ListReader sees, limits its buffer to the list while open (a read past
// the list's end fails), and gives back the bytes after the list on
// Close, with the verdicts of End.
func TestListWindowReadsInPlace(t *testing.T) {
	list := mustMarshal(t, []any{nil, "a", nil, uint32(3)})
	r := buffer.New(append(append([]byte{}, list...), 0x41, 0x42)) // two bytes after the list
	l, err := OpenList(r)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for {
		i, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		if i < 0 {
			break
		}
		idx = append(idx, i)
		if err := Skip(l.Buf()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Buf().ReadByte(); err == nil {
		t.Error("a read past the list's end succeeded inside the window")
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if diff := cmp.Diff([]int{1, 3}, idx); diff != "" {
		t.Errorf("indices (-want +got):\n%s", diff)
	}
	if !bytes.Equal(r.Bytes(), []byte{0x41, 0x42}) {
		t.Errorf("after Close the buffer holds % x, want 41 42", r.Bytes())
	}

	r = buffer.New(append(mustMarshal(t, []any{"a", "b"}), 0x41))
	if l, err = OpenList(r); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrMalformed) {
		t.Errorf("Close with unread elements = %v, want ErrMalformed", err)
	}
	if r.Len() == 0 {
		t.Error("Close did not give back the bytes after the window")
	}
}
