package encoding

import (
	"bytes"
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

func TestMalformedInput(t *testing.T) {
	deep := bytes.Repeat([]byte{0xc0, 0x01, 0x01}, MaxDepth+1) // lists nested too deep
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"unknown constructor", []byte{0x01}},
		{"reserved constructor", []byte{0xff}},
		{"truncated uint", []byte{0x70, 0, 0}},
		{"truncated ulong", []byte{0x80, 1}},
		{"truncated uuid", []byte{0x98, 1, 2}},
		{"str8 length beyond input", []byte{0xa1, 10, 'a'}},
		{"str32 huge length", []byte{0xb1, 0xff, 0xff, 0xff, 0xff, 'a'}},
		{"vbin32 huge length", []byte{0xb0, 0x7f, 0xff, 0xff, 0xff}},
		{"list32 huge size", []byte{0xd0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0x40}},
		{"list32 huge count", []byte{0xd0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40}},
		{"list8 zero size", []byte{0xc0, 0, 0}},
		{"list8 count beyond elements", []byte{0xc0, 2, 3, 0x40}},
		{"list trailing bytes", []byte{0xc0, 3, 1, 0x40, 0x40}},
		{"map odd count", []byte{0xc1, 2, 1, 0x40}},
		{"map32 huge count", []byte{0xd1, 0, 0, 0, 6, 0x7f, 0xff, 0xff, 0xfe, 0x40, 0x40}},
		{"array32 huge size", []byte{0xf0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0xa3}},
		{"array huge count of uints", []byte{0xf0, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0x52, 1}},
		{"array huge count of nulls", []byte{0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40}},
		{"array without constructor", []byte{0xe0, 1, 0}},
		{"array unknown constructor", []byte{0xe0, 3, 1, 0x02, 0x00}},
		{"array doubly described", []byte{0xe0, 5, 1, 0x00, 0x53, 0x01, 0x00}},
		{"array short element", []byte{0xe0, 3, 1, 0x70, 0}},
		{"described without value", []byte{0x00, 0x53, 0x10}},
		{"described without descriptor", []byte{0x00}},
		{"too deep", deep},
		{"deep described", bytes.Repeat([]byte{0x00}, MaxDepth+2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Unmarshal(buffer.New(tt.in))
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("Unmarshal(% x) = %#v, %v; want ErrMalformed", tt.in, v, err)
			}
			// Validate refuses the same, except what only the budget refuses.
			verr := Validate(buffer.New(tt.in))
			if budget := errors.Is(err, ErrBudget); budget != (verr == nil) || !budget && !errors.Is(verr, ErrMalformed) {
				t.Errorf("Validate(% x) = %v where Unmarshal said %v", tt.in, verr, err)
			}
		})
	}
}

func TestSkipRejectsTruncated(t *testing.T) {
	for _, in := range [][]byte{nil, {0x70, 0}, {0xa1, 3, 'a'}, {0xd0, 0, 0, 0, 9, 0, 0, 0, 1}, {0x00, 0x53}, {0x02}} {
		if err := Skip(buffer.New(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Skip(% x) = %v, want ErrMalformed", in, err)
		}
	}
}

// TestValidateAllocatesNothing validates well-formed values, hostile ones
// included: Validate builds nothing, so it allocates nothing.
func TestValidateAllocatesNothing(t *testing.T) {
	var w buffer.Buffer
	if err := Marshal(&w, []any{annotations, mixedList, SymbolArray("a", "b")}); err != nil {
		t.Fatal(err)
	}
	inputs := [][]byte{w.Bytes(), listOfNulls(1000)}
	for _, h := range hostileInputs() {
		inputs = append(inputs, h.in)
	}
	for _, in := range inputs {
		if err := Validate(buffer.New(in)); err != nil {
			t.Fatalf("Validate(% x…): %v", in[:min(len(in), 16)], err)
		}
		r := buffer.Make(in)
		if n := testing.AllocsPerRun(10, func() { r = buffer.Make(in); Validate(&r) }); n != 0 {
			t.Errorf("Validate(% x…) allocates %v times", in[:min(len(in), 16)], n)
		}
	}
}
