package encoding

import (
	"encoding/binary"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// The typed readers below decode one value of an expected type. Each
// accepts every encoding of its type (and of narrower unsigned or signed
// types where widening is lossless, as some peers send a ubyte where a uint
// is due), treats an AMQP null as the zero value, and fails with
// [ErrMalformed] on any other constructor.

// readCode reads the next constructor, mapping end of input to errShort.
func readCode(r *buffer.Buffer) (byte, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, errShort
	}
	return c, nil
}

// readFixed reads the data bytes of a fixed-width constructor.
func readFixed(r *buffer.Buffer, code byte) ([]byte, error) {
	p, ok := r.Next(int64(fixedWidth(code)))
	if !ok {
		return nil, errShort
	}
	return p, nil
}

func wrongType(code byte, want string) error {
	return malformed("constructor 0x%02x where %s expected", code, want)
}

// ReadBool decodes a boolean.
func ReadBool(r *buffer.Buffer) (bool, error) {
	code, err := readCode(r)
	if err != nil {
		return false, err
	}
	switch code {
	case TypeCodeNull, TypeCodeBoolFalse:
		return false, nil
	case TypeCodeBoolTrue:
		return true, nil
	case TypeCodeBool:
		b, err := r.ReadByte()
		if err != nil {
			return false, errShort
		}
		return b != 0, nil
	}
	return false, wrongType(code, "boolean")
}

// ReadUlong decodes a ulong, also accepting uint, ushort and ubyte.
func ReadUlong(r *buffer.Buffer) (uint64, error) { return readUnsigned(r, 8, "ulong") }

// ReadUint decodes a uint, also accepting ushort and ubyte.
func ReadUint(r *buffer.Buffer) (uint32, error) {
	v, err := readUnsigned(r, 4, "uint")
	return uint32(v), err
}

// ReadUshort decodes a ushort, also accepting ubyte.
func ReadUshort(r *buffer.Buffer) (uint16, error) {
	v, err := readUnsigned(r, 2, "ushort")
	return uint16(v), err
}

// ReadUbyte decodes a ubyte.
func ReadUbyte(r *buffer.Buffer) (uint8, error) {
	v, err := readUnsigned(r, 1, "ubyte")
	return uint8(v), err
}

// ReadLong decodes a long, also accepting int, short and byte.
func ReadLong(r *buffer.Buffer) (int64, error) { return readSigned(r, 8, "long") }

// ReadInt decodes an int, also accepting short and byte.
func ReadInt(r *buffer.Buffer) (int32, error) {
	v, err := readSigned(r, 4, "int")
	return int32(v), err
}

// integerWidth returns the width in bytes of the values an integer
// constructor can carry (the small forms carry the full type's range
// compressed: smalluint is a uint), and whether the type is signed. ok is
// false for every other constructor.
func integerWidth(code byte) (width int, signed, ok bool) {
	switch code {
	case TypeCodeUbyte:
		return 1, false, true
	case TypeCodeUshort:
		return 2, false, true
	case TypeCodeUint0, TypeCodeSmallUint, TypeCodeUint:
		return 4, false, true
	case TypeCodeUlong0, TypeCodeSmallUlong, TypeCodeUlong:
		return 8, false, true
	case TypeCodeByte:
		return 1, true, true
	case TypeCodeShort:
		return 2, true, true
	case TypeCodeSmallInt, TypeCodeInt:
		return 4, true, true
	case TypeCodeSmallLong, TypeCodeLong:
		return 8, true, true
	}
	return 0, false, false
}

// readUnsigned decodes an unsigned integer of a type at most maxWidth
// bytes wide (a narrower type widens losslessly); null reads as 0.
func readUnsigned(r *buffer.Buffer, maxWidth int, name string) (uint64, error) {
	code, err := readCode(r)
	if err != nil || code == TypeCodeNull {
		return 0, err
	}
	if w, signed, ok := integerWidth(code); !ok || signed || w > maxWidth {
		return 0, wrongType(code, name)
	}
	p, err := readFixed(r, code)
	if err != nil {
		return 0, err
	}
	return beUint(p), nil
}

// readSigned is readUnsigned for signed integers.
func readSigned(r *buffer.Buffer, maxWidth int, name string) (int64, error) {
	code, err := readCode(r)
	if err != nil || code == TypeCodeNull {
		return 0, err
	}
	if w, signed, ok := integerWidth(code); !ok || !signed || w > maxWidth {
		return 0, wrongType(code, name)
	}
	p, err := readFixed(r, code)
	if err != nil {
		return 0, err
	}
	return beInt(p), nil
}

// ReadTimestamp decodes a timestamp as a UTC time. A null yields the zero
// time.Time.
func ReadTimestamp(r *buffer.Buffer) (time.Time, error) {
	code, err := readCode(r)
	if err != nil {
		return time.Time{}, err
	}
	switch code {
	case TypeCodeNull:
		return time.Time{}, nil
	case TypeCodeTimestamp:
		p, err := readFixed(r, code)
		if err != nil {
			return time.Time{}, err
		}
		return time.UnixMilli(int64(binary.BigEndian.Uint64(p))).UTC(), nil
	}
	return time.Time{}, wrongType(code, "timestamp")
}

// ReadString decodes a string.
func ReadString(r *buffer.Buffer) (string, error) {
	code, err := readCode(r)
	if err != nil {
		return "", err
	}
	switch code {
	case TypeCodeNull:
		return "", nil
	case TypeCodeStr8, TypeCodeStr32:
		p, err := readVariable(r, code == TypeCodeStr32)
		return string(p), err
	}
	return "", wrongType(code, "string")
}

// ReadSymbol decodes a symbol.
func ReadSymbol(r *buffer.Buffer) (Symbol, error) {
	code, err := readCode(r)
	if err != nil {
		return "", err
	}
	switch code {
	case TypeCodeNull:
		return "", nil
	case TypeCodeSym8, TypeCodeSym32:
		p, err := readVariable(r, code == TypeCodeSym32)
		if s, ok := lookupSymbol(p); ok {
			return s.sym, err
		}
		return Symbol(p), err
	}
	return "", wrongType(code, "symbol")
}

// ReadBinary decodes a binary into a fresh slice (never aliasing r). A null
// yields nil.
func ReadBinary(r *buffer.Buffer) ([]byte, error) {
	return AppendBinary([]byte{}, r)
}

// AppendBinary decodes a binary and appends it to dst, which it returns:
// into dst's room when it fits there, as a fresh slice otherwise (never
// aliasing r). A null yields nil, whatever dst.
func AppendBinary(dst []byte, r *buffer.Buffer) ([]byte, error) {
	code, err := readCode(r)
	if err != nil {
		return nil, err
	}
	switch code {
	case TypeCodeNull:
		return nil, nil
	case TypeCodeVbin8, TypeCodeVbin32:
		p, err := readVariable(r, code == TypeCodeVbin32)
		if err != nil {
			return nil, err
		}
		return append(dst, p...), nil
	}
	return nil, wrongType(code, "binary")
}

// ReadSymbols decodes a multiple="true" symbol field (§1.3): an array of
// symbols, a single symbol (a one-element set) or null (nil).
func ReadSymbols(r *buffer.Buffer) ([]Symbol, error) {
	d := newDecoder(r)
	code, err := readCode(r)
	if err != nil {
		return nil, err
	}
	switch code {
	case TypeCodeNull:
		return nil, nil
	case TypeCodeSym8, TypeCodeSym32:
		p, err := readVariable(r, code == TypeCodeSym32)
		if err != nil {
			return nil, err
		}
		return []Symbol{Symbol(p)}, nil
	case TypeCodeArray8, TypeCodeArray32:
		return d.readSymbolArray(r, code)
	}
	return nil, wrongType(code, "symbol array")
}

// readSymbolArray decodes an array of symbols straight into a []Symbol.
func (d *decoder) readSymbolArray(r *buffer.Buffer, code byte) ([]Symbol, error) {
	content, count, err := readCompoundHeader(r, code, TypeCodeArray8, TypeCodeArray32, false)
	if err != nil {
		return nil, err
	}
	sub := buffer.Make(content)
	elem, err := sub.ReadByte()
	if err != nil {
		return nil, malformed("array without element constructor")
	}
	if elem != TypeCodeSym8 && elem != TypeCodeSym32 {
		return nil, malformed("array of 0x%02x where symbols expected", arrayFamily(elem))
	}
	if count > sub.Len() { // every element has a length prefix
		return nil, malformed("array count %d exceeds its size", count)
	}
	if err := d.charge(sliceCost(count, symbolSize)); err != nil {
		return nil, err
	}
	syms := make([]Symbol, count)
	for i := range syms {
		p, err := readVariable(&sub, elem == TypeCodeSym32)
		if err != nil {
			return nil, err
		}
		if s, ok := lookupSymbol(p); ok {
			syms[i] = s.sym
			continue
		}
		if err := d.charge(dataCost(len(p))); err != nil {
			return nil, err
		}
		syms[i] = Symbol(p)
	}
	if sub.Len() != 0 {
		return nil, malformed("array has %d trailing bytes", sub.Len())
	}
	return syms, nil
}

// ReadList decodes a list. A null yields nil.
func ReadList(r *buffer.Buffer) ([]any, error) {
	d := newDecoder(r)
	code, err := readCode(r)
	if err != nil {
		return nil, err
	}
	switch code {
	case TypeCodeNull:
		return nil, nil
	case TypeCodeList0, TypeCodeList8, TypeCodeList32:
		return d.readList(r, code, 0)
	}
	return nil, wrongType(code, "list")
}

// ReadArray decodes an array. A null yields the zero Array.
func ReadArray(r *buffer.Buffer) (Array, error) {
	d := newDecoder(r)
	code, err := readCode(r)
	if err != nil {
		return Array{}, err
	}
	switch code {
	case TypeCodeNull:
		return Array{}, nil
	case TypeCodeArray8, TypeCodeArray32:
		return d.readArray(r, code, 0)
	}
	return Array{}, wrongType(code, "array")
}

// ReadDescriptor reads the 0x00 constructor and a numeric descriptor of a
// described type, leaving r at the described value. Symbolic descriptors
// are rejected: the performatives, sections and delivery states that the
// frames package decodes all use numeric codes in practice.
func ReadDescriptor(r *buffer.Buffer) (uint64, error) {
	code, err := readCode(r)
	if err != nil {
		return 0, err
	}
	if code != TypeCodeDescribed {
		return 0, wrongType(code, "described type")
	}
	code, err = readCode(r)
	if err != nil {
		return 0, err
	}
	switch code {
	case TypeCodeUlong0, TypeCodeSmallUlong, TypeCodeUlong:
		p, err := readFixed(r, code)
		if err != nil {
			return 0, err
		}
		return beUint(p), nil
	}
	return 0, wrongType(code, "numeric descriptor")
}

// PeekCode returns the constructor of the next value without consuming it.
func PeekCode(r *buffer.Buffer) (byte, error) {
	c, err := r.PeekByte()
	if err != nil {
		return 0, errShort
	}
	return c, nil
}

// beUint decodes a big-endian unsigned integer of 0 to 8 bytes.
func beUint(p []byte) uint64 {
	var v uint64
	for _, b := range p {
		v = v<<8 | uint64(b)
	}
	return v
}

// beInt decodes a big-endian two's-complement integer of 1 to 8 bytes.
func beInt(p []byte) int64 {
	v := int64(int8(p[0]))
	for _, b := range p[1:] {
		v = v<<8 | int64(b)
	}
	return v
}
