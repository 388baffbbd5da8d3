package encoding

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// fuzzSlack is what a fuzzed decode may allocate beyond AllocFactor bytes
// per input byte: an error message, a boxed result.
const fuzzSlack = 1024

// checkBudget runs f, which makes decodes decodes of n bytes each, and
// fails t if it allocated more than AllocFactor bytes per byte plus
// fuzzSlack per decode. f must do the same
// work each time it is called: an allocation by another goroutine of the
// fuzzing engine can land inside a measurement, so one over the limit is
// repeated, and only a decode over it three times in a row fails.
func checkBudget(t *testing.T, what string, decodes, n int, f func()) {
	if raceEnabled {
		f() // see race_on_test.go
		return
	}
	limit := uint64(decodes * (AllocFactor*n + fuzzSlack))
	var got uint64
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		if got = after.TotalAlloc - before.TotalAlloc; got <= limit {
			return
		}
	}
	t.Fatalf("%s of %d bytes allocated %d bytes, more than the budget of %d", what, n, got, limit)
}

// FuzzDecode runs every decoder of the package on arbitrary bytes. None
// may panic or allocate more than AllocFactor bytes per input byte.
// Unmarshal, Skip and Validate must agree on where a value ends and on
// whether it is well-formed (Validate accepts what only the budget
// refuses), and every value the decoder accepts must re-encode to
// something that decodes to the same bytes (or, when the re-encoding is
// shorter, exceeds its smaller budget).
func FuzzDecode(f *testing.F) {
	for _, v := range []any{
		nil, true, uint32(300), int64(-5), "str", Symbol("sym"), []byte{1},
		[]any{uint64(1), Map{{Key: Symbol("k"), Value: "v"}}},
		SymbolArray("PLAIN", "ANONYMOUS"),
		Described{Descriptor: uint64(0x137000000C), Value: "session"},
		Array{Type: TypeCodeList32, Elems: []any{[]any{int32(1)}}},
		Map{{Key: "bench-seq", Value: int64(7)}, {Key: Symbol("sym-key"), Value: "v"}, {Key: "nested", Value: Map{{Key: "a", Value: nil}}}},
	} {
		var w buffer.Buffer
		if err := Marshal(&w, v); err != nil {
			f.Fatal(err)
		}
		f.Add(w.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// One measurement for all the decoders (ReadMemStats stops the
		// world, so each costs tens of microseconds) of the nine decodes.
		var v any
		var err, skipErr, validErr, mapErr, intoErr error
		var n, skipped, validated int
		var m Map
		var into mapCollector
		var listed, windowed listWalk
		checkBudget(t, "the decoders together", 10, len(in), func() {
			r := buffer.New(in)
			v, err = Unmarshal(r)
			n = len(in) - r.Len()
			m, mapErr = ReadMap(buffer.New(in))
			intoErr = ReadMapInto(buffer.New(in), &into)
			ReadList(buffer.New(in))
			ReadArray(buffer.New(in))
			ReadSymbols(buffer.New(in))
			ReadRaw(buffer.New(in))
			listed = walkList(buffer.New(in))
			windowed = walkWindow(buffer.New(in))
			sr := buffer.New(in)
			skipErr = Skip(sr)
			skipped = len(in) - sr.Len()
			vr := buffer.New(in)
			validErr = Validate(vr)
			validated = len(in) - vr.Len()
		})
		// A ListWindow reads a list as a ListReader does: the same
		// elements, the same verdict, the same bytes taken when both
		// read it all.
		if listed.ok != windowed.ok || !slices.Equal(listed.idx, windowed.idx) || (listed.ok && listed.took != windowed.took) {
			t.Fatalf("ListReader saw %+v, ListWindow %+v in % x", listed, windowed, in)
		}
		// ReadMapInto is ReadMap without the Map: the same entries, the
		// same verdict.
		if (mapErr == nil) != (intoErr == nil) {
			t.Fatalf("ReadMap said %v, ReadMapInto %v for % x", mapErr, intoErr, in)
		}
		if mapErr == nil && !reflect.DeepEqual(m, into.m) && (len(m) > 0 || len(into.m) > 0) {
			t.Fatalf("ReadMap gave %v, ReadMapInto %v", m, into.m)
		}
		switch {
		case err == nil && (skipErr != nil || validErr != nil):
			t.Fatalf("Unmarshal accepted % x but Skip said %v and Validate %v", in, skipErr, validErr)
		case err == nil && (skipped != n || validated != n):
			t.Fatalf("Unmarshal consumed %d bytes, Skip %d, Validate %d", n, skipped, validated)
		case err != nil && validErr == nil && !errors.Is(err, ErrBudget):
			t.Fatalf("Validate accepted % x but Unmarshal said %v", in, err)
		case err != nil && !errors.Is(err, ErrMalformed):
			t.Fatalf("Unmarshal error %v does not wrap ErrMalformed", err)
		}
		if err != nil {
			return
		}
		var w buffer.Buffer
		if err := Marshal(&w, v); err != nil {
			t.Fatalf("re-encoding %#v: %v", v, err)
		}
		v2, err := Unmarshal(buffer.New(w.Bytes()))
		if errors.Is(err, ErrBudget) && w.Len() < n {
			// The budget follows the size of the input, and the encoder
			// picks the smallest encodings: a value at the edge of its
			// budget (an array of nulls) can exceed it once re-encoded.
			return
		}
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

// listWalk is what walking a list saw: the indices of its non-null
// elements, whether it ended without error, and how many bytes of the
// input it took.
type listWalk struct {
	idx  []int
	ok   bool
	took int
}

// elementCursor is what walkList needs of a ListReader or a ListWindow.
type elementCursor interface {
	Next() (int, error)
	Buf() *buffer.Buffer
}

// walkList reads r as a composite's list the way the frames package did
// before ListWindow, reading every field with the typed reader that fits
// its constructor.
func walkList(r *buffer.Buffer) listWalk {
	n := r.Len()
	l, err := NewListReader(r)
	if err != nil {
		return listWalk{}
	}
	w := walkElements(&l)
	if err := l.End(); err != nil {
		w.ok = false
	}
	w.took = n - r.Len()
	return w
}

// walkWindow is walkList with a ListWindow, as the frames package reads
// a performative's fields.
func walkWindow(r *buffer.Buffer) listWalk {
	n := r.Len()
	l, err := OpenList(r)
	if err != nil {
		return listWalk{}
	}
	w := walkElements(&l)
	if err := l.Close(); err != nil {
		w.ok = false
	}
	w.took = n - r.Len()
	return w
}

func walkElements(l elementCursor) listWalk {
	var w listWalk
	for {
		i, err := l.Next()
		if err != nil {
			return w
		}
		if i < 0 {
			w.ok = true
			return w
		}
		w.idx = append(w.idx, i)
		code, _ := PeekCode(l.Buf())
		switch code {
		case TypeCodeStr8, TypeCodeStr32:
			_, err = ReadString(l.Buf())
		case TypeCodeVbin8, TypeCodeVbin32:
			_, err = ReadBinary(l.Buf())
		case TypeCodeTimestamp:
			_, err = ReadTimestamp(l.Buf())
		case TypeCodeUlong, TypeCodeSmallUlong, TypeCodeUlong0, TypeCodeUint, TypeCodeSmallUint, TypeCodeUint0:
			_, err = ReadUlong(l.Buf())
		case TypeCodeDescribed:
			_, err = ReadDescriptor(l.Buf())
			if err == nil {
				err = Skip(l.Buf())
			}
		default:
			_, err = Unmarshal(l.Buf())
		}
		if err != nil {
			return w
		}
	}
}

// mapCollector gathers what ReadMapInto decodes as a Map.
type mapCollector struct{ m Map }

func (c *mapCollector) Len(n int)                 { c.m = make(Map, 0, n) }
func (c *mapCollector) StringKey(p []byte) string { return string(p) }
func (c *mapCollector) Put(k string, v any) error { return c.PutOther(k, v) }
func (c *mapCollector) PutOther(k, v any) error {
	c.m = append(c.m, KeyValue{Key: k, Value: v})
	return nil
}
