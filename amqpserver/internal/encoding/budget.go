package encoding

import (
	"encoding/binary"
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// AllocFactor bounds the memory a decode may allocate: decoding a value
// whose encoding takes n bytes allocates at most AllocFactor × n bytes
// (plus the error, if it fails). Every list, map and array element and
// every boxed value is charged against that budget before it is allocated.
//
// The figure leaves room for the densest legitimate encodings: a list
// element takes 16 bytes in Go ([]any) for as little as one byte on the
// wire, and an array of negative small longs 24. What it stops are values
// whose cost is not tied to their size at all: an array of null, true,
// uint0 or list0 elements has no bytes per element, so ten bytes can claim
// billions of elements, and nested, such arrays turned a 63 KB frame into
// 437 MiB.
const AllocFactor = 32

// ErrBudget is wrapped by the error of a decode that would allocate more
// than [AllocFactor] bytes per input byte. It wraps [ErrMalformed], so a
// server answers it with amqp:decode-error like any undecodable input.
var ErrBudget = fmt.Errorf("%w: the value takes more memory to decode than %d bytes per byte of its encoding", ErrMalformed, AllocFactor)

// decoder carries the allocation budget of one top-level decode through
// the recursion.
type decoder struct {
	budget int // bytes the decode may still allocate
}

// newDecoder returns a decoder for the value at the start of r, with a
// budget of AllocFactor bytes per byte of that value's encoding.
func newDecoder(r *buffer.Buffer) decoder {
	return decoder{budget: AllocFactor * encodedLen(r)}
}

// encodedLen returns the length of the encoding of the value at the start
// of r, read from its constructor and size or length field; a described
// value is measured with skip. The result never exceeds r.Len(); for a
// value that is malformed it may be anything up to that, as its decode
// fails anyway.
func encodedLen(r *buffer.Buffer) int {
	p := r.Bytes()
	if len(p) == 0 {
		return 0
	}
	n := 0
	switch code := p[0]; code {
	case TypeCodeDescribed:
		rest := *r
		if skip(&rest, 0) != nil {
			return len(p)
		}
		return len(p) - rest.Len()
	case TypeCodeVbin8, TypeCodeStr8, TypeCodeSym8, TypeCodeList8, TypeCodeMap8, TypeCodeArray8:
		if len(p) >= 2 {
			n = 2 + int(p[1])
		}
	case TypeCodeVbin32, TypeCodeStr32, TypeCodeSym32, TypeCodeList32, TypeCodeMap32, TypeCodeArray32:
		if len(p) >= 5 {
			n = 5 + int(binary.BigEndian.Uint32(p[1:]))
		}
	default:
		n = 1 + max(fixedWidth(code), 0)
	}
	return min(n, len(p))
}

// charge takes n bytes from the budget, failing with ErrBudget if there
// are not that many left.
func (d *decoder) charge(n int) error {
	d.budget -= n
	if d.budget < 0 {
		return ErrBudget
	}
	return nil
}

// What the decoder allocates, in bytes (amd64; smaller on 32-bit
// platforms). Slices are charged an eighth more than their size: Go rounds
// allocations up to a size class, which wastes at most that much for the
// sizes that matter.
const (
	slotSize     = 16 // one element of a []any
	pairSize     = 32 // one KeyValue of a Map
	symbolSize   = 16 // one element of a []Symbol
	sliceBox     = 24 // a slice header in an interface
	stringBox    = 16 // a string header in an interface
	describedBox = 32 // a Described in an interface
	arrayBox     = 48 // an Array in an interface
	timeBox      = 24 // a time.Time in an interface
)

// sliceCost is the charge for a slice of n elements of size bytes each.
func sliceCost(n, size int) int {
	b := n * size
	return b + b>>3
}

// dataCost is the charge for a copy of n bytes (a binary's or a string's
// contents): their size plus what rounding to a size class may add.
func dataCost(n int) int { return sliceCost(n, 1) + 7 }

// stringCost is the charge for a string or symbol of n bytes in an
// interface. (Go allocates nothing for the empty string and keeps one-byte
// strings in a static table; charging them anyway keeps the hot path
// free of branches.)
func stringCost(n int) int { return stringBox + dataCost(n) }

// fixedBox is the charge for putting the value of a fixed-width constructor
// in an interface. Go boxes single-byte values and small unsigned integers
// without allocating; a negative small int or long does allocate.
func fixedBox(code byte) int { return int(fixedBoxes[code]) }

// fixedBoxes holds fixedBox for every constructor: a table, as the
// decoder looks it up for every fixed-width value.
var fixedBoxes = func() (t [256]uint8) {
	for c := range t {
		switch code := byte(c); {
		case code == TypeCodeSmallInt || code == TypeCodeSmallLong:
			t[c] = 8
		case code == TypeCodeTimestamp:
			t[c] = timeBox
		case fixedWidth(code) == 16:
			t[c] = 16
		case fixedWidth(code) >= 2:
			t[c] = 8
		}
	}
	return t
}()
