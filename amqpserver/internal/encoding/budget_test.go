package encoding

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// allocSlack is what a decode may allocate beyond its budget in the tests:
// an error message, the boxing of the top-level value and the like.
const allocSlack = 2048

// bytesAllocated returns the bytes f allocates per call, averaged over
// runs calls (runtime.MemStats.TotalAlloc counts bytes, where
// testing.AllocsPerRun counts allocations).
func bytesAllocated(runs int, f func()) uint64 {
	f() // warm up: first-call allocations are not the decoder's
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// be32 appends v big-endian.
func be32(p []byte, v int) []byte { return binary.BigEndian.AppendUint32(p, uint32(v)) }

// listOfNulls is a list32 of n nulls: 16 bytes of []any per input byte.
func listOfNulls(n int) []byte {
	p := be32(be32([]byte{TypeCodeList32}, 4+n), n)
	for range n {
		p = append(p, TypeCodeNull)
	}
	return p
}

// zeroWidthArray is an array32 of count elements of a constructor that
// takes no bytes (null, true, uint0, list0, …): ten bytes, whatever count.
func zeroWidthArray(elem byte, count int) []byte {
	return append(be32(be32([]byte{TypeCodeArray32}, 5), count), elem)
}

// nestedNullArrays is an array32 of k array32 elements, each an array of
// count nulls: nine input bytes per inner array.
func nestedNullArrays(k, count int) []byte {
	p := append(be32(be32([]byte{TypeCodeArray32}, 5+9*k), k), TypeCodeArray32)
	for range k {
		p = append(be32(be32(p, 5), count), TypeCodeNull)
	}
	return p
}

// mapOfNullArrays is a map32 of k entries null → array of count nulls.
func mapOfNullArrays(k, count int) []byte {
	var body []byte
	for range k {
		body = append(append(body, TypeCodeNull), zeroWidthArray(TypeCodeNull, count)...)
	}
	return append(be32(be32([]byte{TypeCodeMap32}, 4+len(body)), 2*k), body...)
}

// stringsAndZeros is a map of k string entries and one more whose value is
// an array of zeros uint0 elements: zero-width elements draw on the budget
// the rest of the value brings.
func stringsAndZeros(k, zeros int) []byte {
	var w buffer.Buffer
	m := Map{{Key: "zeros", Value: Raw(zeroWidthArray(TypeCodeUint0, zeros))}}
	for i := range k {
		m = append(m, KeyValue{Key: fmt.Sprintf("key-%04d", i), Value: "value"})
	}
	if err := Marshal(&w, m); err != nil {
		panic(err)
	}
	return w.Bytes()
}

// hostileInputs are encodings that cost far more to decode than their size
// unless the decoder keeps a budget.
func hostileInputs() []struct {
	name string
	in   []byte
} {
	return []struct {
		name string
		in   []byte
	}{
		{"array of 4096 nulls", zeroWidthArray(TypeCodeNull, 4096)},
		{"array of 1M nulls", zeroWidthArray(TypeCodeNull, 1<<20)},
		{"array of 4096 list0", zeroWidthArray(TypeCodeList0, 4096)},
		{"array of 4096 true", zeroWidthArray(TypeCodeBoolTrue, 4096)},
		{"array of 7000 arrays of 4096 nulls", nestedNullArrays(7000, 4096)},
		{"map of 4000 arrays of 4096 nulls", mapOfNullArrays(4000, 4096)},
		{"described array of 4096 nulls", append([]byte{TypeCodeDescribed, TypeCodeNull}, zeroWidthArray(TypeCodeNull, 4096)...)},
	}
}

// TestAllocBudgetHostile decodes inputs that today's attackers use to turn
// a small frame into hundreds of MiB: each must fail with ErrMalformed
// (amqp:decode-error) having allocated at most AllocFactor bytes per input
// byte.
func TestAllocBudgetHostile(t *testing.T) {
	for _, tt := range hostileInputs() {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Unmarshal(buffer.New(tt.in))
			if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrBudget) {
				t.Errorf("Unmarshal = %v, want an ErrBudget that wraps ErrMalformed", err)
			}
			if raceEnabled {
				t.Skip("byte counts are only meaningful without -race (make allocs); see race_on_test.go")
			}
			got := bytesAllocated(3, func() { Unmarshal(buffer.New(tt.in)) })
			limit := uint64(AllocFactor*len(tt.in) + allocSlack)
			t.Logf("%d input bytes, %d bytes allocated (%.1f per byte)", len(tt.in), got, float64(got)/float64(len(tt.in)))
			if got > limit {
				t.Errorf("decoding %d bytes allocated %d, want <= %d", len(tt.in), got, limit)
			}
		})
	}
}

// TestAllocBudgetDense decodes legitimate values whose elements are as
// small as the encoding allows. They must decode, and their cost must stay
// within the documented bound even though it is many times their size.
func TestAllocBudgetDense(t *testing.T) {
	bools := make([]any, 100000)
	smallInts := make([]any, 50000)
	for i := range bools {
		bools[i] = i%2 == 0
	}
	for i := range smallInts {
		smallInts[i] = int64(-1 - i%100)
	}
	negatives := Array{Type: TypeCodeLong, Elems: smallInts}
	shortStrings := make([]any, 50000)
	for i := range shortStrings {
		shortStrings[i] = string(rune('a' + i%26))
	}
	tests := []struct {
		name string
		v    any
		in   []byte
	}{
		{"list of 100k booleans", bools, nil},
		{"list of 1M nulls", nil, listOfNulls(1 << 20)},
		{"array of 50k negative small longs", negatives, nil},
		{"list of 50k one-letter strings", shortStrings, nil},
		{"array of 8 nulls", nil, zeroWidthArray(TypeCodeNull, 8)},
		{"map of 1000 strings with an array of 2000 uint0", nil, stringsAndZeros(1000, 2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if in == nil {
				var w buffer.Buffer
				if err := Marshal(&w, tt.v); err != nil {
					t.Fatal(err)
				}
				in = w.Bytes()
			}
			if _, err := Unmarshal(buffer.New(in)); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if raceEnabled {
				t.Skip("byte counts are only meaningful without -race (make allocs); see race_on_test.go")
			}
			got := bytesAllocated(3, func() { Unmarshal(buffer.New(in)) })
			limit := uint64(AllocFactor*len(in) + allocSlack)
			t.Logf("%d input bytes, %d bytes allocated (%.1f per byte)", len(in), got, float64(got)/float64(len(in)))
			if got > limit {
				t.Errorf("decoding %d bytes allocated %d, want <= %d", len(in), got, limit)
			}
		})
	}
}
