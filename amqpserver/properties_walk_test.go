package amqpserver

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"encoding/binary"
	"math"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// plainPropertiesByEntry is plainProperties as it was until it read the
// map in one pass (issue 30): each entry read with the encoding
// package's general readers (encoding.MapReader), then classified. It is
// the reference the one pass must agree with, whatever the input.
func plainPropertiesByEntry(raw []byte) (n, size int, ok bool) {
	mr, err := encoding.NewMapReader(raw)
	if err != nil || mr.Len() > maxPlainProperties {
		return 0, 0, false
	}
	var keys [maxPlainProperties][]byte
	for mr.Len() > 0 {
		k, v, err := mr.Next()
		if err != nil || (k[0] != encoding.TypeCodeStr8 && k[0] != encoding.TypeCodeStr32) {
			return 0, 0, false
		}
		key, ok := encoding.VariableData(k)
		if !ok {
			return 0, 0, false
		}
		for _, seen := range keys[:n] {
			if string(seen) == string(key) {
				return 0, 0, false
			}
		}
		vs, ok := plainValueSizeByEntry(v)
		if !ok {
			return 0, 0, false
		}
		keys[n] = key
		n++
		size += len(key) + vs
	}
	return n, size, true
}

// plainValueSize returns the accounted size of the scalar value whose
// encoding is v (core's valueSize of what valueFromAMQP makes of it), and
// false for a value plainProperties does not keep as it is.
func plainValueSizeByEntry(v []byte) (int, bool) {
	switch v[0] {
	case encoding.TypeCodeVbin8, encoding.TypeCodeVbin32, encoding.TypeCodeStr8, encoding.TypeCodeStr32,
		encoding.TypeCodeSym8, encoding.TypeCodeSym32:
		p, ok := encoding.VariableData(v)
		return len(p), ok
	case encoding.TypeCodeNull, encoding.TypeCodeBool, encoding.TypeCodeBoolTrue, encoding.TypeCodeBoolFalse,
		encoding.TypeCodeUbyte, encoding.TypeCodeUshort, encoding.TypeCodeUint, encoding.TypeCodeSmallUint,
		encoding.TypeCodeUint0, encoding.TypeCodeUlong, encoding.TypeCodeSmallUlong, encoding.TypeCodeUlong0,
		encoding.TypeCodeByte, encoding.TypeCodeShort, encoding.TypeCodeInt, encoding.TypeCodeSmallInt,
		encoding.TypeCodeLong, encoding.TypeCodeSmallLong, encoding.TypeCodeFloat, encoding.TypeCodeDouble,
		encoding.TypeCodeTimestamp, encoding.TypeCodeUUID:
		_, ok := encoding.FixedData(v)
		return 8, ok
	case encoding.TypeCodeDescribed:
		return 8, isTimeSpan(v[1:])
	}
	return 0, false // char, decimals, lists, maps, arrays
}

// isTimeSpan reports whether d, a described value after its 0x00, is a
// .NET TimeSpan that valueFromAMQP keeps: the timespan descriptor symbol
// and a long whose ticks fit a time.Duration.
func isTimeSpan(d []byte) bool {
	r := buffer.New(d)
	desc, err := encoding.SkipRaw(r)
	if err != nil || (desc[0] != encoding.TypeCodeSym8 && desc[0] != encoding.TypeCodeSym32) {
		return false
	}
	if sym, ok := encoding.VariableData(desc); !ok || string(sym) != string(timeSpanDescriptor) {
		return false
	}
	v := r.Bytes()
	p, ok := encoding.FixedData(v)
	if !ok {
		return false
	}
	var ticks int64
	switch v[0] {
	case encoding.TypeCodeLong:
		ticks = int64(binary.BigEndian.Uint64(p))
	case encoding.TypeCodeSmallLong:
		ticks = int64(int8(p[0]))
	default:
		return false
	}
	return ticks <= math.MaxInt64/100 && ticks >= math.MinInt64/100
}

// TestPlainPropertiesIsTheWalk checks plainProperties' one pass against
// the entry-by-entry walk it replaced, on sections of every kind it
// keeps or declines and on every truncation and one-byte change of them:
// the same decision, entry count and accounted size.
func TestPlainPropertiesIsTheWalk(t *testing.T) {
	many := func(n int) encoding.Map {
		var m encoding.Map
		for i := range n {
			m = append(m, encoding.KeyValue{Key: fmt.Sprintf("k%02d", i), Value: int32(i)})
		}
		return m
	}
	ts := func(v any) encoding.Described { return encoding.Described{Descriptor: timeSpanDescriptor, Value: v} }
	sections := [][]byte{
		{encoding.TypeCodeNull},
		{encoding.TypeCodeNull, encoding.TypeCodeNull},
		{encoding.TypeCodeMap8, 1, 0},
		{encoding.TypeCodeMap8, 2, 0, encoding.TypeCodeNull},
		{encoding.TypeCodeMap32, 0, 0, 0, 4, 0, 0, 0, 0},
		append([]byte{encoding.TypeCodeMap32, 0, 0, 0, 13, 0, 0, 0, 2, encoding.TypeCodeStr32, 0, 0, 0, 1, 'k'}, encoding.TypeCodeSmallLong, 0xff),
		append([]byte{encoding.TypeCodeMap8, 6, 2, encoding.TypeCodeStr8, 1, 'k'}, encoding.TypeCodeBool, 1),
		{encoding.TypeCodeMap8, 5, 2, encoding.TypeCodeSym8, 1, 'k', encoding.TypeCodeNull},
		{encoding.TypeCodeMap8, 5, 2, encoding.TypeCodeStr8, 1, 'k', encoding.TypeCodeList0},
		{encoding.TypeCodeMap8, 4, 2, encoding.TypeCodeStr8, 0, encoding.TypeCodeLong},
		{encoding.TypeCodeStr8, 1, 'x'},
		{encoding.TypeCodeMap8, 9, 2, encoding.TypeCodeStr8, 1, 'a', encoding.TypeCodeArray8, 3, 1, encoding.TypeCodeSmallUint, 1},
	}
	for _, m := range []encoding.Map{
		{{Key: "bench-run", Value: "6f1c2d9e4b7a4c0e"}, {Key: "bench-seq", Value: int64(123456)}, {Key: "bench-sent", Value: int64(1700000000000000000)}},
		{{Key: "null", Value: nil}, {Key: "bool", Value: true}, {Key: "false", Value: false}, {Key: "ubyte", Value: uint8(200)},
			{Key: "ushort", Value: uint16(60000)}, {Key: "uint", Value: uint32(1 << 31)}, {Key: "uint0", Value: uint32(0)},
			{Key: "ulong", Value: uint64(1 << 63)}, {Key: "ulong0", Value: uint64(0)}, {Key: "sulong", Value: uint64(7)},
			{Key: "byte", Value: int8(-5)}, {Key: "short", Value: int16(-300)}, {Key: "int", Value: int32(-70000)},
			{Key: "smallint", Value: int32(-1)}, {Key: "long", Value: int64(-1 << 40)}, {Key: "smalllong", Value: int64(3)},
			{Key: "float", Value: float32(1.5)}, {Key: "double", Value: 2.25}, {Key: "timestamp", Value: time.UnixMilli(1700000000123)},
			{Key: "uuid", Value: encoding.UUID{9}}, {Key: "bin", Value: []byte{1, 2}}, {Key: "str", Value: "s"},
			{Key: "sym", Value: encoding.Symbol("y")}, {Key: "long str", Value: string(bytes.Repeat([]byte{'s'}, 300))}},
		{{Key: "ts", Value: ts(int64(15_000_000))}, {Key: "ts small", Value: ts(int64(-3))}},
		{{Key: "ts too long", Value: ts(int64(math.MaxInt64))}},
		{{Key: "ts as int", Value: ts(int32(1))}},
		{{Key: "ts list", Value: ts([]any{int64(1)})}},
		{{Key: "other described", Value: encoding.Described{Descriptor: encoding.Symbol("com.microsoft:uri"), Value: int64(1)}}},
		{{Key: "ulong described", Value: encoding.Described{Descriptor: uint64(1), Value: "x"}}},
		{{Key: "k", Value: int32(1)}, {Key: "k", Value: int32(2)}},
		{{Key: "l", Value: []any{"a"}}},
		{{Key: "m", Value: encoding.Map{{Key: "a", Value: int32(1)}}}},
		{{Key: "c", Value: encoding.Char('x')}},
		{{Key: "d32", Value: encoding.Decimal32{}}, {Key: "d64", Value: encoding.Decimal64{}}, {Key: "d128", Value: encoding.Decimal128{}}},
		{{Key: encoding.Symbol("symbol key"), Value: int32(1)}},
		{{Key: int64(1), Value: int32(1)}},
		many(maxPlainProperties), many(maxPlainProperties + 1),
	} {
		sections = append(sections, propertiesSection(t, m))
	}
	subst := []byte{0x00, 0x01, 0x02, 0x03, 0x40, 0x41, 0x43, 0x45, 0x50, 0x55, 0x56, 0x60, 0x70, 0x81, 0x83, 0x94, 0x98,
		0xa0, 0xa1, 0xa3, 0xb0, 0xb1, 0xb3, 0xc0, 0xc1, 0xd0, 0xd1, 0xe0, 0xff}
	compare := func(what string, raw []byte) {
		t.Helper()
		n, size, ok := plainProperties(raw)
		wn, wsize, wok := plainPropertiesByEntry(raw)
		if n != wn || size != wsize || ok != wok {
			t.Fatalf("%s % x: one pass says %d entries of %d bytes, %v; the walk %d, %d, %v", what, raw, n, size, ok, wn, wsize, wok)
		}
	}
	changed := make([]byte, 0, 4096)
	for _, raw := range sections {
		compare("as sent", raw)
		compare("with a byte after it", append(bytes.Clone(raw), 0))
		for n := range len(raw) {
			compare("truncated", raw[:n])
		}
		for i := range raw {
			for _, b := range append(subst, raw[i]+1, raw[i]-1) {
				changed = append(changed[:0], raw...)
				changed[i] = b
				compare("changed", changed)
			}
		}
	}
}
