package encoding

import (
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// TestAllocWellKnownSymbols checks that well-known symbols decode to
// shared values and every other symbol still decodes to itself.
func TestAllocWellKnownSymbols(t *testing.T) {
	var w buffer.Buffer
	WriteSymbolArray(&w, []Symbol{"ANONYMOUS", "PLAIN", "com.microsoft:x", "x-opt-partition-key", "PLAIN2", ""})
	array := w.Bytes()
	syms, err := ReadSymbols(buffer.New(array))
	if err != nil {
		t.Fatal(err)
	}
	if want := []Symbol{"ANONYMOUS", "PLAIN", "com.microsoft:x", "x-opt-partition-key", "PLAIN2", ""}; len(syms) != len(want) {
		t.Fatalf("ReadSymbols = %q, want %q", syms, want)
	} else {
		for i := range want {
			if syms[i] != want[i] {
				t.Fatalf("ReadSymbols = %q, want %q", syms, want)
			}
		}
	}
	for _, s := range []Symbol{"x-opt-sequence-number", "x-opt-sequence-numbe", "x-opt-sequence-numberX", "com.microsoft:session-filter"} {
		var w buffer.Buffer
		WriteSymbol(&w, s)
		v, err := Unmarshal(buffer.New(w.Bytes()))
		if err != nil || v != s {
			t.Errorf("Unmarshal(%q) = %#v, %v", s, v, err)
		}
	}

	if raceEnabled {
		t.Skip("allocation counts are only meaningful without -race (make allocs); see race_on_test.go")
	}
	var known buffer.Buffer
	WriteSymbol(&known, "x-opt-enqueued-time")
	if n := testing.AllocsPerRun(100, func() { Unmarshal(buffer.New(known.Bytes())) }); n != 0 {
		t.Errorf("Unmarshal(x-opt-enqueued-time) allocates %v times, want 0", n)
	}
	w.Reset()
	WriteSymbolArray(&w, []Symbol{"ANONYMOUS", "PLAIN"})
	if n := testing.AllocsPerRun(100, func() { ReadSymbols(buffer.New(w.Bytes())) }); n != 1 {
		t.Errorf("ReadSymbols(ANONYMOUS, PLAIN) allocates %v times, want 1 (the slice)", n)
	}
}
