package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The value codec stores property values with their Go type intact, so a
// message read back after a restart carries an int16 as an int16. It is
// the core's own format: a tag byte, then the payload.

const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagInt8
	tagInt16
	tagInt32
	tagInt64
	tagUint8
	tagUint16
	tagUint32
	tagUint64
	tagFloat32
	tagFloat64
	tagString
	tagBytes
	tagTime
	tagUUID
	tagSymbol
	tagList
	tagMap
	tagDuration
)

var errCorrupt = errors.New("core: corrupt record")

// maxValueDepth bounds how deeply lists and maps may nest in a property
// value, so that neither encoding a message nor decoding a damaged record
// can recurse without end.
const maxValueDepth = 32

// appendValue encodes v. Unsupported types are an error so that a front
// finds out at send time, never at read time.
func appendValue(b []byte, v any) ([]byte, error) { return appendValueAt(b, v, 0) }

func appendValueAt(b []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, tagNil), nil
	case bool:
		if x {
			return append(b, tagTrue), nil
		}
		return append(b, tagFalse), nil
	case int8:
		return append(b, tagInt8, byte(x)), nil
	case int16:
		return binary.AppendVarint(append(b, tagInt16), int64(x)), nil
	case int32:
		return binary.AppendVarint(append(b, tagInt32), int64(x)), nil
	case int:
		return binary.AppendVarint(append(b, tagInt64), int64(x)), nil
	case int64:
		return binary.AppendVarint(append(b, tagInt64), x), nil
	case uint8:
		return append(b, tagUint8, x), nil
	case uint16:
		return binary.AppendUvarint(append(b, tagUint16), uint64(x)), nil
	case uint32:
		return binary.AppendUvarint(append(b, tagUint32), uint64(x)), nil
	case uint64:
		return binary.AppendUvarint(append(b, tagUint64), x), nil
	case float32:
		return binary.LittleEndian.AppendUint32(append(b, tagFloat32), math.Float32bits(x)), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat64), math.Float64bits(x)), nil
	case string:
		return appendBytes(append(b, tagString), []byte(x)), nil
	case Symbol:
		return appendBytes(append(b, tagSymbol), []byte(x)), nil
	case []byte:
		return appendBytes(append(b, tagBytes), x), nil
	case time.Time:
		return binary.AppendVarint(append(b, tagTime), timeToNanos(x)), nil
	case time.Duration:
		return binary.AppendVarint(append(b, tagDuration), int64(x)), nil
	case UUID:
		return append(append(b, tagUUID), x[:]...), nil
	case []any:
		if depth >= maxValueDepth {
			return nil, errf(CodeBadRequest, "property values nest deeper than %d levels", maxValueDepth)
		}
		b = binary.AppendUvarint(append(b, tagList), uint64(len(x)))
		var err error
		for _, e := range x {
			if b, err = appendValueAt(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case map[string]any:
		if depth >= maxValueDepth {
			return nil, errf(CodeBadRequest, "property values nest deeper than %d levels", maxValueDepth)
		}
		return appendMapAt(append(b, tagMap), x, depth+1)
	}
	return nil, errf(CodeBadRequest, "unsupported property value type %T", v)
}

func appendMap(b []byte, m map[string]any) ([]byte, error) { return appendMapAt(b, m, 0) }

func appendMapAt(b []byte, m map[string]any, depth int) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(m)))
	var err error
	for k, v := range m {
		b = appendBytes(b, []byte(k))
		if b, err = appendValueAt(b, v, depth); err != nil {
			return nil, fmt.Errorf("property %q: %w", k, err)
		}
	}
	return b, nil
}

func appendBytes(b, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func timeToNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nanosToTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// reader decodes what the append functions wrote. Errors are sticky: after
// the first one every read returns a zero value and err stays set.
type reader struct {
	b     []byte
	err   error
	depth int // lists and maps being decoded (maxValueDepth)
	keys  keyCache
}

// keyCache hands out one copy of each property key a run of decodes
// meets, so that the keys every message of a queue repeats are allocated
// once per run (a read-ahead of up to 256 bodies) rather than once per
// message. Its zero value caches nothing; it holds at most maxCachedKeys
// keys of at most maxCachedKeyLen bytes.
type keyCache map[string]string

// Bounds of a keyCache.
const (
	maxCachedKeys   = 64
	maxCachedKeyLen = 64
)

// key returns p as a string, the cached copy if there is one.
func (c keyCache) key(p []byte) string {
	if k, ok := c[string(p)]; ok {
		return k
	}
	k := string(p)
	if c != nil && len(p) <= maxCachedKeyLen && len(c) < maxCachedKeys {
		c[k] = k
	}
	return k
}

func (r *reader) fail() { r.err = errCorrupt; r.b = nil }

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) fixed(n int) []byte {
	if len(r.b) < n {
		r.fail()
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	return r.fixed(int(n))
}

func (r *reader) string() string { return string(r.bytes()) }

func (r *reader) value() any {
	switch tag := r.byte(); tag {
	case tagNil:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagInt8:
		return int8(r.byte())
	case tagInt16:
		return int16(r.varint())
	case tagInt32:
		return int32(r.varint())
	case tagInt64:
		return r.varint()
	case tagUint8:
		return r.byte()
	case tagUint16:
		return uint16(r.uvarint())
	case tagUint32:
		return uint32(r.uvarint())
	case tagUint64:
		return r.uvarint()
	case tagFloat32:
		if s := r.fixed(4); s != nil {
			return math.Float32frombits(binary.LittleEndian.Uint32(s))
		}
	case tagFloat64:
		if s := r.fixed(8); s != nil {
			return math.Float64frombits(binary.LittleEndian.Uint64(s))
		}
	case tagString:
		return r.string()
	case tagSymbol:
		return Symbol(r.string())
	case tagBytes:
		return append([]byte(nil), r.bytes()...)
	case tagTime:
		return nanosToTime(r.varint())
	case tagDuration:
		return time.Duration(r.varint())
	case tagUUID:
		var u UUID
		copy(u[:], r.fixed(16))
		return u
	case tagList:
		if r.depth >= maxValueDepth {
			r.fail()
			return nil
		}
		r.depth++
		defer func() { r.depth-- }()
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			r.fail()
			return nil
		}
		l := make([]any, 0, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			l = append(l, r.value())
		}
		return l
	case tagMap:
		if r.depth >= maxValueDepth {
			r.fail()
			return nil
		}
		r.depth++
		defer func() { r.depth-- }()
		return r.mapValue()
	default:
		r.fail()
	}
	return nil
}

func (r *reader) mapValue() map[string]any {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	m := make(map[string]any, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		k := r.keys.key(r.bytes())
		m[k] = r.value()
	}
	return m
}
