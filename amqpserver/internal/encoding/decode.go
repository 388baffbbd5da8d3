package encoding

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// Unmarshal decodes one AMQP value from r into the Go representation listed
// in the package documentation and advances r past it. Binary values are
// copied, so the result never aliases r. Decoding allocates at most
// [AllocFactor] bytes per byte of the value's encoding; a value that would
// need more fails with [ErrBudget].
func Unmarshal(r *buffer.Buffer) (any, error) {
	d := newDecoder(r)
	return d.readAny(r, 0)
}

// Shared results for empty values, so that a list of them costs only its
// slots. They are never written to: appending to an empty slice copies it.
var (
	emptyList   any = []any{}
	emptyMap    any = Map{}
	emptyBinary any = []byte{}
)

func (d *decoder) readAny(r *buffer.Buffer, depth int) (any, error) {
	code, err := r.ReadByte()
	if err != nil {
		return nil, errShort
	}
	return d.readValue(r, code, depth)
}

// readValue decodes the value whose constructor code has already been read,
// charging the decoder for what it allocates (see budget.go for the sizes).
func (d *decoder) readValue(r *buffer.Buffer, code byte, depth int) (any, error) {
	switch code {
	case TypeCodeNull:
		return nil, nil
	case TypeCodeBoolTrue:
		return true, nil
	case TypeCodeBoolFalse:
		return false, nil
	case TypeCodeUint0:
		return uint32(0), nil
	case TypeCodeUlong0:
		return uint64(0), nil
	case TypeCodeList0:
		return emptyList, nil
	case TypeCodeDescribed:
		if err := d.charge(describedBox); err != nil {
			return nil, err
		}
		return d.readDescribed(r, depth)
	case TypeCodeList8, TypeCodeList32:
		l, err := d.readList(r, code, depth)
		if err != nil || len(l) == 0 {
			return emptyList, err
		}
		return l, d.charge(sliceBox)
	case TypeCodeMap8, TypeCodeMap32:
		m, err := d.readMap(r, code, depth)
		if err != nil || len(m) == 0 {
			return emptyMap, err
		}
		return m, d.charge(sliceBox)
	case TypeCodeArray8, TypeCodeArray32:
		if err := d.charge(arrayBox); err != nil {
			return nil, err
		}
		return d.readArray(r, code, depth)
	case TypeCodeVbin8, TypeCodeVbin32:
		p, err := readVariable(r, code == TypeCodeVbin32)
		if err != nil || len(p) == 0 {
			return emptyBinary, err
		}
		if err := d.charge(sliceBox + dataCost(len(p))); err != nil {
			return nil, err
		}
		return append([]byte{}, p...), nil
	case TypeCodeStr8, TypeCodeStr32:
		p, err := readVariable(r, code == TypeCodeStr32)
		if err != nil {
			return "", err
		}
		if err := d.charge(stringCost(len(p))); err != nil {
			return nil, err
		}
		return string(p), nil
	case TypeCodeSym8, TypeCodeSym32:
		p, err := readVariable(r, code == TypeCodeSym32)
		if err != nil {
			return Symbol(""), err
		}
		if s, ok := lookupSymbol(p); ok {
			return s.boxed, nil
		}
		if err := d.charge(stringCost(len(p))); err != nil {
			return nil, err
		}
		return Symbol(p), nil
	}
	// Fixed-width types.
	n := fixedWidth(code)
	if n < 0 {
		return nil, malformed("unknown constructor 0x%02x", code)
	}
	p, ok := r.Next(int64(n))
	if !ok {
		return nil, errShort
	}
	if err := d.charge(fixedBox(code)); err != nil {
		return nil, err
	}
	return decodeFixed(code, p), nil
}

// fixedWidth returns the number of data bytes that follow a fixed-width
// constructor, or -1 if code is not one.
func fixedWidth(code byte) int {
	switch code {
	case TypeCodeNull, TypeCodeBoolTrue, TypeCodeBoolFalse, TypeCodeUint0, TypeCodeUlong0, TypeCodeList0:
		return 0
	case TypeCodeBool, TypeCodeUbyte, TypeCodeByte, TypeCodeSmallUint, TypeCodeSmallUlong,
		TypeCodeSmallInt, TypeCodeSmallLong:
		return 1
	case TypeCodeUshort, TypeCodeShort:
		return 2
	case TypeCodeUint, TypeCodeInt, TypeCodeFloat, TypeCodeChar, TypeCodeDecimal32:
		return 4
	case TypeCodeUlong, TypeCodeLong, TypeCodeDouble, TypeCodeTimestamp, TypeCodeDecimal64:
		return 8
	case TypeCodeUUID, TypeCodeDecimal128:
		return 16
	}
	return -1
}

// decodeFixed converts the data bytes p of a fixed-width constructor (as
// sized by fixedWidth) to its Go value.
func decodeFixed(code byte, p []byte) any {
	switch code {
	case TypeCodeNull:
		return nil
	case TypeCodeBoolTrue:
		return true
	case TypeCodeBoolFalse:
		return false
	case TypeCodeUint0:
		return uint32(0)
	case TypeCodeUlong0:
		return uint64(0)
	case TypeCodeList0:
		return []any{}
	case TypeCodeBool:
		return p[0] != 0
	case TypeCodeUbyte:
		return p[0]
	case TypeCodeByte:
		return int8(p[0])
	case TypeCodeSmallUint:
		return uint32(p[0])
	case TypeCodeSmallUlong:
		return uint64(p[0])
	case TypeCodeSmallInt:
		return int32(int8(p[0]))
	case TypeCodeSmallLong:
		return int64(int8(p[0]))
	case TypeCodeUshort:
		return binary.BigEndian.Uint16(p)
	case TypeCodeShort:
		return int16(binary.BigEndian.Uint16(p))
	case TypeCodeUint:
		return binary.BigEndian.Uint32(p)
	case TypeCodeInt:
		return int32(binary.BigEndian.Uint32(p))
	case TypeCodeFloat:
		return math.Float32frombits(binary.BigEndian.Uint32(p))
	case TypeCodeChar:
		return Char(binary.BigEndian.Uint32(p))
	case TypeCodeDecimal32:
		return Decimal32(p)
	case TypeCodeUlong:
		return binary.BigEndian.Uint64(p)
	case TypeCodeLong:
		return int64(binary.BigEndian.Uint64(p))
	case TypeCodeDouble:
		return math.Float64frombits(binary.BigEndian.Uint64(p))
	case TypeCodeTimestamp:
		return time.UnixMilli(int64(binary.BigEndian.Uint64(p))).UTC()
	case TypeCodeDecimal64:
		return Decimal64(p)
	case TypeCodeUUID:
		return UUID(p)
	case TypeCodeDecimal128:
		return Decimal128(p)
	}
	return nil
}

// readVariable reads the length prefix and data of a vbin, str or sym. The
// result aliases r.
func readVariable(r *buffer.Buffer, wide bool) ([]byte, error) {
	var n int64
	if wide {
		v, err := r.ReadUint32()
		if err != nil {
			return nil, errShort
		}
		n = int64(v)
	} else {
		v, err := r.ReadByte()
		if err != nil {
			return nil, errShort
		}
		n = int64(v)
	}
	p, ok := r.Next(n)
	if !ok {
		return nil, malformed("length %d exceeds the %d bytes left", n, r.Len())
	}
	return p, nil
}

// readCompoundHeader reads the size and count of a list, map or array whose
// constructor (code8 or code32 form) has been read, and returns the content
// bytes after the count. With checkCount it also rejects counts larger than
// the content, which holds for any type whose elements take a byte or more.
func readCompoundHeader(r *buffer.Buffer, code, code8, code32 byte, checkCount bool) ([]byte, int, error) {
	var size, count int64
	switch code {
	case code8:
		p, ok := r.Next(2)
		if !ok {
			return nil, 0, errShort
		}
		size, count = int64(p[0])-1, int64(p[1])
	case code32:
		p, ok := r.Next(8)
		if !ok {
			return nil, 0, errShort
		}
		size, count = int64(binary.BigEndian.Uint32(p))-4, int64(binary.BigEndian.Uint32(p[4:]))
	default:
		return nil, 0, malformed("unexpected constructor 0x%02x", code)
	}
	if size < 0 {
		return nil, 0, malformed("compound size too small")
	}
	content, ok := r.Next(size)
	if !ok {
		return nil, 0, malformed("size %d exceeds the %d bytes left", size, r.Len())
	}
	if checkCount && count > size {
		return nil, 0, malformed("count %d exceeds size %d", count, size)
	}
	return content, int(count), nil
}

func (d *decoder) readList(r *buffer.Buffer, code byte, depth int) ([]any, error) {
	if depth >= MaxDepth {
		return nil, malformed("nesting deeper than %d", MaxDepth)
	}
	if code == TypeCodeList0 {
		return []any{}, nil
	}
	content, count, err := readCompoundHeader(r, code, TypeCodeList8, TypeCodeList32, true)
	if err != nil {
		return nil, err
	}
	if err := d.charge(sliceCost(count, slotSize)); err != nil {
		return nil, err
	}
	sub := buffer.Make(content)
	l := make([]any, count)
	for i := range l {
		if l[i], err = d.readAny(&sub, depth+1); err != nil {
			return nil, err
		}
	}
	if sub.Len() != 0 {
		return nil, malformed("list has %d trailing bytes", sub.Len())
	}
	return l, nil
}

func (d *decoder) readDescribed(r *buffer.Buffer, depth int) (Described, error) {
	if depth >= MaxDepth {
		return Described{}, malformed("nesting deeper than %d", MaxDepth)
	}
	desc, err := d.readAny(r, depth+1)
	if err != nil {
		return Described{}, err
	}
	v, err := d.readAny(r, depth+1)
	if err != nil {
		return Described{}, err
	}
	return Described{Descriptor: desc, Value: v}, nil
}
