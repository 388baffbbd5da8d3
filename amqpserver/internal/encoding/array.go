package encoding

import (
	"fmt"
	"math"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// Array is an AMQP array: a sequence of values that share one element
// constructor (§1.6.24). It is a distinct type from a list ([]any) because
// peers tell them apart: capability and locale fields must be arrays of
// symbols, while Service Bus management replies must use lists where clients
// expect []any.
type Array struct {
	// Type is the element type, given as the widest constructor of its
	// family: TypeCodeNull, TypeCodeBool, TypeCodeUbyte, TypeCodeUshort,
	// TypeCodeUint, TypeCodeUlong, TypeCodeByte, TypeCodeShort, TypeCodeInt,
	// TypeCodeLong, TypeCodeFloat, TypeCodeDouble, TypeCodeDecimal32/64/128,
	// TypeCodeChar, TypeCodeTimestamp, TypeCodeUUID, TypeCodeVbin32,
	// TypeCodeStr32, TypeCodeSym32, TypeCodeList32, TypeCodeMap32 or
	// TypeCodeArray32. The decoder normalises the constructor it reads to
	// this form (a sym8 array has Type TypeCodeSym32), and the encoder picks
	// the narrowest constructor that fits every element.
	Type byte

	// Descriptor, if not nil, makes this an array of described values that
	// all share this descriptor; Elems then hold the undescribed values.
	Descriptor any

	// Elems are the elements, each of the Go type that [Unmarshal] returns
	// for Type (for example Symbol for TypeCodeSym32).
	Elems []any
}

// SymbolArray returns an array of symbols.
func SymbolArray(syms ...Symbol) Array {
	a := Array{Type: TypeCodeSym32, Elems: make([]any, len(syms))}
	for i, s := range syms {
		a.Elems[i] = s
	}
	return a
}

// Symbols returns the elements of an undescribed array of symbols, and false
// if a is any other kind of array.
func (a Array) Symbols() ([]Symbol, bool) {
	if a.Type != TypeCodeSym32 || a.Descriptor != nil {
		return nil, false
	}
	out := make([]Symbol, len(a.Elems))
	for i, e := range a.Elems {
		s, ok := e.(Symbol)
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// arrayFamily maps any constructor to the widest constructor of its type,
// the form stored in [Array.Type].
func arrayFamily(code byte) byte {
	switch code {
	case TypeCodeBoolTrue, TypeCodeBoolFalse:
		return TypeCodeBool
	case TypeCodeUint0, TypeCodeSmallUint:
		return TypeCodeUint
	case TypeCodeUlong0, TypeCodeSmallUlong:
		return TypeCodeUlong
	case TypeCodeSmallInt:
		return TypeCodeInt
	case TypeCodeSmallLong:
		return TypeCodeLong
	case TypeCodeVbin8:
		return TypeCodeVbin32
	case TypeCodeStr8:
		return TypeCodeStr32
	case TypeCodeSym8:
		return TypeCodeSym32
	case TypeCodeList0, TypeCodeList8:
		return TypeCodeList32
	case TypeCodeMap8:
		return TypeCodeMap32
	case TypeCodeArray8:
		return TypeCodeArray32
	}
	return code
}

// elementCode picks the narrowest constructor of a's type that can encode
// every element.
func elementCode(a *Array) byte {
	fits := func(ok func(any) bool) bool {
		for _, e := range a.Elems {
			if !ok(e) {
				return false
			}
		}
		return true
	}
	t := arrayFamily(a.Type)
	switch t {
	case TypeCodeUint:
		if fits(func(e any) bool { v, ok := e.(uint32); return ok && v <= math.MaxUint8 }) {
			return TypeCodeSmallUint
		}
	case TypeCodeUlong:
		if fits(func(e any) bool { v, ok := e.(uint64); return ok && v <= math.MaxUint8 }) {
			return TypeCodeSmallUlong
		}
	case TypeCodeInt:
		if fits(func(e any) bool { v, ok := e.(int32); return ok && v >= math.MinInt8 && v <= math.MaxInt8 }) {
			return TypeCodeSmallInt
		}
	case TypeCodeLong:
		if fits(func(e any) bool { v, ok := e.(int64); return ok && v >= math.MinInt8 && v <= math.MaxInt8 }) {
			return TypeCodeSmallLong
		}
	case TypeCodeVbin32:
		if fits(func(e any) bool { v, ok := e.([]byte); return ok && len(v) <= math.MaxUint8 }) {
			return TypeCodeVbin8
		}
	case TypeCodeStr32:
		if fits(func(e any) bool { v, ok := e.(string); return ok && len(v) <= math.MaxUint8 }) {
			return TypeCodeStr8
		}
	case TypeCodeSym32:
		if fits(func(e any) bool { v, ok := e.(Symbol); return ok && len(v) <= math.MaxUint8 }) {
			return TypeCodeSym8
		}
	}
	return t
}

func writeArray(w *buffer.Buffer, a *Array, mode compoundMode) error {
	start := beginCompound(w, mode)
	if a.Descriptor != nil {
		w.AppendByte(TypeCodeDescribed)
		if err := Marshal(w, a.Descriptor); err != nil {
			return err
		}
	}
	code := elementCode(a)
	w.AppendByte(code)
	for i, e := range a.Elems {
		if err := writeElement(w, code, e); err != nil {
			return fmt.Errorf("array element %d: %w", i, err)
		}
	}
	endCompound(w, start, len(a.Elems), TypeCodeArray8, TypeCodeArray32, mode)
	return nil
}

// writeElement writes e without a constructor, in the layout of code.
func writeElement(w *buffer.Buffer, code byte, e any) error {
	bad := func() error { return fmt.Errorf("%w: %T in an array with constructor 0x%02x", ErrUnsupported, e, code) }
	switch code {
	case TypeCodeNull:
		if e != nil {
			return bad()
		}
	case TypeCodeBool:
		v, ok := e.(bool)
		if !ok {
			return bad()
		}
		if v {
			w.AppendByte(1)
		} else {
			w.AppendByte(0)
		}
	case TypeCodeUbyte, TypeCodeSmallUint, TypeCodeSmallUlong, TypeCodeByte, TypeCodeSmallInt, TypeCodeSmallLong:
		b, ok := smallValue(code, e)
		if !ok {
			return bad()
		}
		w.AppendByte(b)
	case TypeCodeVbin8, TypeCodeVbin32:
		v, ok := e.([]byte)
		if !ok {
			return bad()
		}
		writeLength(w, code == TypeCodeVbin32, len(v))
		w.Append(v)
	case TypeCodeStr8, TypeCodeStr32:
		v, ok := e.(string)
		if !ok {
			return bad()
		}
		writeLength(w, code == TypeCodeStr32, len(v))
		w.AppendString(v)
	case TypeCodeSym8, TypeCodeSym32:
		v, ok := e.(Symbol)
		if !ok {
			return bad()
		}
		writeLength(w, code == TypeCodeSym32, len(v))
		w.AppendString(string(v))
	case TypeCodeList32:
		v, ok := e.([]any)
		if !ok {
			return bad()
		}
		return writeList(w, v, elementWide)
	case TypeCodeMap32:
		v, ok := e.(Map)
		if !ok {
			return bad()
		}
		return writeMap(w, v, elementWide)
	case TypeCodeArray32:
		v, ok := e.(Array)
		if !ok {
			return bad()
		}
		return writeArray(w, &v, elementWide)
	default:
		return writeFixedElement(w, code, e, bad)
	}
	return nil
}

// smallValue returns the single data byte of a one-byte element.
func smallValue(code byte, e any) (byte, bool) {
	switch v := e.(type) {
	case uint8:
		return v, code == TypeCodeUbyte
	case uint32:
		return byte(v), code == TypeCodeSmallUint
	case uint64:
		return byte(v), code == TypeCodeSmallUlong
	case int8:
		return byte(v), code == TypeCodeByte
	case int32:
		return byte(int8(v)), code == TypeCodeSmallInt
	case int64:
		return byte(int8(v)), code == TypeCodeSmallLong
	}
	return 0, false
}

// writeFixedElement writes a fixed-width element of two bytes or more by
// encoding it with its constructor and dropping the constructor byte.
func writeFixedElement(w *buffer.Buffer, code byte, e any, bad func() error) error {
	var ok bool
	switch code {
	case TypeCodeUshort:
		_, ok = e.(uint16)
	case TypeCodeShort:
		_, ok = e.(int16)
	case TypeCodeUint:
		_, ok = e.(uint32)
	case TypeCodeUlong:
		_, ok = e.(uint64)
	case TypeCodeInt:
		_, ok = e.(int32)
	case TypeCodeLong:
		_, ok = e.(int64)
	case TypeCodeFloat:
		_, ok = e.(float32)
	case TypeCodeDouble:
		_, ok = e.(float64)
	case TypeCodeDecimal32:
		_, ok = e.(Decimal32)
	case TypeCodeDecimal64:
		_, ok = e.(Decimal64)
	case TypeCodeDecimal128:
		_, ok = e.(Decimal128)
	case TypeCodeChar:
		_, ok = e.(Char)
	case TypeCodeTimestamp:
		_, ok = e.(time.Time)
	case TypeCodeUUID:
		_, ok = e.(UUID)
	default:
		return fmt.Errorf("%w: array element constructor 0x%02x", ErrUnsupported, code)
	}
	if !ok {
		return bad()
	}
	mark := w.Size()
	switch v := e.(type) {
	case uint32: // Marshal would pick a compact form; the array needs all 4 bytes.
		w.AppendByte(code)
		w.AppendUint32(v)
	case uint64:
		w.AppendByte(code)
		w.AppendUint64(v)
	case int32:
		w.AppendByte(code)
		w.AppendUint32(uint32(v))
	case int64:
		w.AppendByte(code)
		w.AppendUint64(uint64(v))
	default:
		if err := Marshal(w, e); err != nil {
			return err
		}
	}
	raw := w.Raw()
	copy(raw[mark:], raw[mark+1:])
	w.Truncate(len(raw) - 1)
	return nil
}

func writeLength(w *buffer.Buffer, wide bool, n int) {
	if wide {
		w.AppendUint32(uint32(n))
	} else {
		w.AppendByte(byte(n))
	}
}

func (d *decoder) readArray(r *buffer.Buffer, code byte, depth int) (Array, error) {
	if depth >= MaxDepth {
		return Array{}, malformed("nesting deeper than %d", MaxDepth)
	}
	content, count, err := readCompoundHeader(r, code, TypeCodeArray8, TypeCodeArray32, false)
	if err != nil {
		return Array{}, err
	}
	sub := buffer.Make(content)
	var a Array
	elem, err := sub.ReadByte()
	if err != nil {
		return Array{}, malformed("array without element constructor")
	}
	if elem == TypeCodeDescribed {
		if a.Descriptor, err = d.readAny(&sub, depth+1); err != nil {
			return Array{}, err
		}
		if elem, err = sub.ReadByte(); err != nil {
			return Array{}, malformed("array without element constructor")
		}
		if elem == TypeCodeDescribed {
			return Array{}, malformed("array element constructor is described twice")
		}
	}
	// Elements of a constructor that carries its value (null, true, uint0,
	// list0, …) take no bytes, so only the budget limits their count.
	if fixedWidth(elem) != 0 && count > sub.Len() {
		return Array{}, malformed("array count %d exceeds its size", count)
	}
	if err := d.charge(sliceCost(count, slotSize)); err != nil {
		return Array{}, err
	}
	a.Type = arrayFamily(elem)
	a.Elems = make([]any, count)
	for i := range a.Elems {
		if a.Elems[i], err = d.readValue(&sub, elem, depth+1); err != nil {
			return Array{}, err
		}
	}
	if sub.Len() != 0 {
		return Array{}, malformed("array has %d trailing bytes", sub.Len())
	}
	return a, nil
}
