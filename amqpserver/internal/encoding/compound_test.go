package encoding

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// TestCompoundFormsAtTheirLimits encodes lists, maps and arrays either
// side of the 8-bit form's limits (a size of 255 bytes, 255 elements):
// each comes out in the form and with the header the spec's tables give,
// with the content right after it, and decodes to the value encoded;
// also when it follows other bytes in the buffer and when one is nested
// in another of the other form.
func TestCompoundFormsAtTheirLimits(t *testing.T) {
	str := func(n int) string { return string(bytes.Repeat([]byte{'x'}, n)) }
	// A list of one str8 of n bytes has content 2+n bytes: size 3+n.
	cases := []struct {
		name  string
		v     any
		code  byte
		count int
	}{
		{"list, size 254", []any{str(251)}, TypeCodeList8, 1},
		{"list, size 255", []any{str(252)}, TypeCodeList8, 1},
		{"list, size 256", []any{str(253)}, TypeCodeList32, 1},
		{"list, 254 elements, size 255", make([]any, 254), TypeCodeList8, 254},
		{"list, 256 elements", make([]any, 256), TypeCodeList32, 256},
		{"map, size 255", Map{{Key: "k", Value: str(249)}}, TypeCodeMap8, 2},
		{"map, size 256", Map{{Key: "k", Value: str(250)}}, TypeCodeMap32, 2},
		{"map, small", Map{{Key: "k", Value: "v"}}, TypeCodeMap8, 2},
		{"array, size 255", SymbolArray(Symbol(str(252))), TypeCodeArray8, 1},
		{"array, size 256", SymbolArray(Symbol(str(253))), TypeCodeArray32, 1},
		{"nested, large in small", []any{[]any{str(300)}}, TypeCodeList32, 1},
		{"nested, small in large", []any{[]any{"a"}, str(300)}, TypeCodeList32, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w buffer.Buffer
			w.Append([]byte("prefix"))
			if err := Marshal(&w, c.v); err != nil {
				t.Fatal(err)
			}
			got := w.Bytes()
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatalf("the bytes before the compound changed: % x", got[:6])
			}
			enc := got[6:]
			if enc[0] != c.code {
				t.Fatalf("constructor 0x%02x, want 0x%02x", enc[0], c.code)
			}
			// size counts what follows the size field: the count and the
			// content.
			var size, count, wantSize int
			if c.code == TypeCodeList8 || c.code == TypeCodeMap8 || c.code == TypeCodeArray8 {
				size, count, wantSize = int(enc[1]), int(enc[2]), len(enc)-2
			} else {
				size, count, wantSize = int(binary.BigEndian.Uint32(enc[1:])), int(binary.BigEndian.Uint32(enc[5:])), len(enc)-5
			}
			if size != wantSize {
				t.Errorf("size %d, want %d (an encoding of %d bytes)", size, wantSize, len(enc))
			}
			if count != c.count {
				t.Errorf("count %d, want %d", count, c.count)
			}
			back, err := Unmarshal(buffer.New(enc))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.v, back, cmpOpts); d != "" && !equalEncoding(t, c.v, back) {
				t.Errorf("decoded differs (-sent +decoded):\n%s", d)
			}
		})
	}
}

// equalEncoding reports whether a and b encode to the same bytes (decoded
// values may differ in Go type from those sent, as arrays do).
func equalEncoding(t *testing.T, a, b any) bool {
	t.Helper()
	return bytes.Equal(mustMarshal(t, a), mustMarshal(t, b))
}
