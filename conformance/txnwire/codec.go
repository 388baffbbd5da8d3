package txnwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The AMQP 1.0 type system, as much of it as the client needs. Values
// are plain Go values: nil, bool, uint8, uint16, uint32, uint64, int32,
// int64, string, amqpSymbol, []byte, []any (list), amqpMap,
// amqpDescribed; decoding also yields the other fixed-width types as
// their Go counterparts and arrays as []any.

// amqpSymbol is an AMQP symbol.
type amqpSymbol string

// amqpDescribed is a described value: a descriptor (uint64 code or
// symbol) and the value, for a composite a []any of its fields.
type amqpDescribed struct {
	code  any
	value any
}

// amqpMap is an AMQP map, its pairs in order.
type amqpMap [][2]any

// get returns the value of key k (a string or symbol key).
func (m amqpMap) get(k string) (any, bool) {
	for _, kv := range m {
		switch key := kv[0].(type) {
		case string:
			if key == k {
				return kv[1], true
			}
		case amqpSymbol:
			if string(key) == k {
				return kv[1], true
			}
		}
	}
	return nil, false
}

// describedCode returns v's descriptor code, 0 if v is not described by
// a numeric code.
func describedCode(v any) (uint64, []any) {
	d, ok := v.(amqpDescribed)
	if !ok {
		return 0, nil
	}
	code, _ := d.code.(uint64)
	fields, _ := d.value.([]any)
	return code, fields
}

// field returns fields[i], nil past the end.
func field(fields []any, i int) any {
	if i < len(fields) {
		return fields[i]
	}
	return nil
}

// appendAMQP appends the encoding of v.
func appendAMQP(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, 0x40)
	case bool:
		if v {
			return append(b, 0x41)
		}
		return append(b, 0x42)
	case uint8:
		return append(b, 0x50, v)
	case uint16:
		return binary.BigEndian.AppendUint16(append(b, 0x60), v)
	case uint32:
		if v <= math.MaxUint8 {
			return append(b, 0x52, byte(v))
		}
		return binary.BigEndian.AppendUint32(append(b, 0x70), v)
	case uint64:
		if v <= math.MaxUint8 {
			return append(b, 0x53, byte(v))
		}
		return binary.BigEndian.AppendUint64(append(b, 0x80), v)
	case int32:
		return binary.BigEndian.AppendUint32(append(b, 0x71), uint32(v))
	case int64:
		return binary.BigEndian.AppendUint64(append(b, 0x81), uint64(v))
	case string:
		return appendVariable(b, 0xa1, 0xb1, []byte(v))
	case amqpSymbol:
		return appendVariable(b, 0xa3, 0xb3, []byte(v))
	case []byte:
		return appendVariable(b, 0xa0, 0xb0, v)
	case amqpDescribed:
		return appendAMQP(appendAMQP(append(b, 0x00), v.code), v.value)
	case []any:
		var body []byte
		for _, e := range v {
			body = appendAMQP(body, e)
		}
		return appendCompound(b, 0xd0, len(v), body)
	case amqpMap:
		var body []byte
		for _, kv := range v {
			body = appendAMQP(appendAMQP(body, kv[0]), kv[1])
		}
		return appendCompound(b, 0xd1, 2*len(v), body)
	}
	panic(fmt.Sprintf("txnwire: cannot encode %T", v))
}

func appendVariable(b []byte, short, long byte, v []byte) []byte {
	if len(v) <= math.MaxUint8 {
		b = append(b, short, byte(len(v)))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, long), uint32(len(v)))
	}
	return append(b, v...)
}

func appendCompound(b []byte, code byte, count int, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(append(b, code), uint32(4+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(count))
	return append(b, body...)
}

var errShort = errors.New("txnwire: AMQP value cut short")

// decodeAMQP decodes one value from b and returns it with the rest.
func decodeAMQP(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, errShort
	}
	code, b := b[0], b[1:]
	if code == 0x00 {
		desc, rest, err := decodeAMQP(b)
		if err != nil {
			return nil, nil, err
		}
		v, rest, err := decodeAMQP(rest)
		if err != nil {
			return nil, nil, err
		}
		return amqpDescribed{code: desc, value: v}, rest, nil
	}
	return decodeTyped(code, b)
}

// decodeTyped decodes the value of constructor code from b.
func decodeTyped(code byte, b []byte) (any, []byte, error) {
	fixed := func(n int) ([]byte, []byte, error) {
		if len(b) < n {
			return nil, nil, errShort
		}
		return b[:n], b[n:], nil
	}
	switch code {
	case 0x40:
		return nil, b, nil
	case 0x41:
		return true, b, nil
	case 0x42:
		return false, b, nil
	case 0x43:
		return uint32(0), b, nil
	case 0x44:
		return uint64(0), b, nil
	case 0x45:
		return []any{}, b, nil
	}
	switch code >> 4 {
	case 0x5: // one byte
		v, rest, err := fixed(1)
		if err != nil {
			return nil, nil, err
		}
		switch code {
		case 0x50:
			return v[0], rest, nil
		case 0x51:
			return int8(v[0]), rest, nil
		case 0x52:
			return uint32(v[0]), rest, nil
		case 0x53:
			return uint64(v[0]), rest, nil
		case 0x54:
			return int32(int8(v[0])), rest, nil
		case 0x55:
			return int64(int8(v[0])), rest, nil
		case 0x56:
			return v[0] != 0, rest, nil
		}
	case 0x6: // two bytes
		v, rest, err := fixed(2)
		if err != nil {
			return nil, nil, err
		}
		if code == 0x61 {
			return int16(binary.BigEndian.Uint16(v)), rest, nil
		}
		return binary.BigEndian.Uint16(v), rest, nil
	case 0x7: // four bytes
		v, rest, err := fixed(4)
		if err != nil {
			return nil, nil, err
		}
		switch code {
		case 0x70:
			return binary.BigEndian.Uint32(v), rest, nil
		case 0x71:
			return int32(binary.BigEndian.Uint32(v)), rest, nil
		case 0x72:
			return math.Float32frombits(binary.BigEndian.Uint32(v)), rest, nil
		}
		return binary.BigEndian.Uint32(v), rest, nil // char, decimal32
	case 0x8: // eight bytes
		v, rest, err := fixed(8)
		if err != nil {
			return nil, nil, err
		}
		switch code {
		case 0x80:
			return binary.BigEndian.Uint64(v), rest, nil
		case 0x82:
			return math.Float64frombits(binary.BigEndian.Uint64(v)), rest, nil
		}
		return int64(binary.BigEndian.Uint64(v)), rest, nil // long, timestamp, decimal64
	case 0x9: // sixteen bytes: uuid, decimal128
		v, rest, err := fixed(16)
		if err != nil {
			return nil, nil, err
		}
		return [16]byte(v), rest, nil
	case 0xa, 0xb: // variable width
		n, rest, err := length(code>>4 == 0xb, b)
		if err != nil {
			return nil, nil, err
		}
		if len(rest) < n {
			return nil, nil, errShort
		}
		v := rest[:n]
		switch code & 0x0f {
		case 0x1:
			return string(v), rest[n:], nil
		case 0x3:
			return amqpSymbol(v), rest[n:], nil
		}
		return append([]byte(nil), v...), rest[n:], nil
	case 0xc, 0xd: // list, map
		size, rest, err := length(code>>4 == 0xd, b)
		if err != nil {
			return nil, nil, err
		}
		if len(rest) < size {
			return nil, nil, errShort
		}
		body, after := rest[:size], rest[size:]
		count, body, err := length(code>>4 == 0xd, body)
		if err != nil {
			return nil, nil, err
		}
		elems := make([]any, 0, min(count, len(body)))
		for range count {
			var e any
			if e, body, err = decodeAMQP(body); err != nil {
				return nil, nil, err
			}
			elems = append(elems, e)
		}
		if code&0x0f == 0x1 {
			m := make(amqpMap, 0, len(elems)/2)
			for i := 0; i+1 < len(elems); i += 2 {
				m = append(m, [2]any{elems[i], elems[i+1]})
			}
			return m, after, nil
		}
		return elems, after, nil
	case 0xe, 0xf: // array
		size, rest, err := length(code>>4 == 0xf, b)
		if err != nil {
			return nil, nil, err
		}
		if len(rest) < size {
			return nil, nil, errShort
		}
		body, after := rest[:size], rest[size:]
		count, body, err := length(code>>4 == 0xf, body)
		if err != nil || len(body) == 0 {
			return nil, nil, errShort
		}
		elemCode, body := body[0], body[1:]
		elems := make([]any, 0, min(count, len(body)))
		for range count {
			var e any
			if e, body, err = decodeTyped(elemCode, body); err != nil {
				return nil, nil, err
			}
			elems = append(elems, e)
		}
		return elems, after, nil
	}
	return nil, nil, fmt.Errorf("txnwire: AMQP constructor 0x%02x not understood", code)
}

// length reads a one- or four-byte length.
func length(long bool, b []byte) (int, []byte, error) {
	if long {
		if len(b) < 4 {
			return 0, nil, errShort
		}
		return int(binary.BigEndian.Uint32(b)), b[4:], nil
	}
	if len(b) < 1 {
		return 0, nil, errShort
	}
	return int(b[0]), b[1:], nil
}
