package encoding

import (
	"bytes"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// FuzzDecode checks that decoding arbitrary bytes never panics, that Skip
// agrees with Unmarshal on where a value ends, and that every value the
// decoder accepts re-encodes to something that decodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, v := range []any{
		nil, true, uint32(300), int64(-5), "str", Symbol("sym"), []byte{1},
		[]any{uint64(1), Map{{Key: Symbol("k"), Value: "v"}}},
		SymbolArray("PLAIN", "ANONYMOUS"),
		Described{Descriptor: uint64(0x137000000C), Value: "session"},
		Array{Type: TypeCodeList32, Elems: []any{[]any{int32(1)}}},
	} {
		var w buffer.Buffer
		if err := Marshal(&w, v); err != nil {
			f.Fatal(err)
		}
		f.Add(w.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := buffer.New(in)
		v, err := Unmarshal(r)
		n := len(in) - r.Len()

		sr := buffer.New(in)
		skipErr := Skip(sr)
		if err == nil {
			if skipErr != nil {
				t.Fatalf("Unmarshal accepted % x but Skip failed: %v", in, skipErr)
			}
			if m := len(in) - sr.Len(); m != n {
				t.Fatalf("Skip consumed %d bytes, Unmarshal %d", m, n)
			}
		}
		if err != nil {
			return
		}
		var w buffer.Buffer
		if err := Marshal(&w, v); err != nil {
			t.Fatalf("re-encoding %#v: %v", v, err)
		}
		v2, err := Unmarshal(buffer.New(w.Bytes()))
		if err != nil {
			t.Fatalf("decoding re-encoded % x: %v", w.Bytes(), err)
		}
		var w2 buffer.Buffer
		if err := Marshal(&w2, v2); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), w2.Bytes()) {
			t.Fatalf("encoding not stable: % x then % x", w.Bytes(), w2.Bytes())
		}
	})
}
