package filter

import (
	"bytes"
	"math"
	"reflect"
	"strconv"
	"time"
)

// kind is the dynamic type of a [value] during evaluation.
type kind uint8

const (
	kindNull     kind = iota // SQL NULL, also "unknown" for predicates
	kindBool                 // b
	kindInt                  // i (every signed and small unsigned integer)
	kindUint                 // i holds the bits of a uint64 above math.MaxInt64
	kindFloat                // f
	kindString               // s
	kindTime                 // o holds a time.Time
	kindDuration             // i holds nanoseconds
	kindBytes                // o holds a []byte
	kindUUID                 // o holds a [16]byte (or a named type with that shape)
	kindOther                // o holds a value of a type the language does not know
)

// value is one evaluated operand. It is passed by value so that evaluation
// does not allocate; o keeps the Go value it came from, if any, so that a
// rule action can copy a property without changing its type.
type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
	o any
}

var (
	nullValue  = value{k: kindNull}
	trueValue  = value{k: kindBool, b: true}
	falseValue = value{k: kindBool, b: false}
)

func boolValue(b bool) value {
	if b {
		return trueValue
	}
	return falseValue
}

func (v value) isNull() bool    { return v.k == kindNull }
func (v value) isNumeric() bool { return v.k == kindInt || v.k == kindUint || v.k == kindFloat }

// float returns a numeric value as float64.
func (v value) float() float64 {
	switch v.k {
	case kindInt:
		return float64(v.i)
	case kindUint:
		return float64(uint64(v.i))
	default:
		return v.f
	}
}

// fromAny converts a Go value as found in a message into a [value].
// The common types are handled by a type switch without allocating.
func fromAny(x any) value {
	switch t := x.(type) {
	case nil:
		return nullValue
	case bool:
		return value{k: kindBool, b: t, o: x}
	case string:
		return value{k: kindString, s: t, o: x}
	case int64:
		return value{k: kindInt, i: t, o: x}
	case int:
		return value{k: kindInt, i: int64(t), o: x}
	case int32:
		return value{k: kindInt, i: int64(t), o: x}
	case int16:
		return value{k: kindInt, i: int64(t), o: x}
	case int8:
		return value{k: kindInt, i: int64(t), o: x}
	case uint8:
		return value{k: kindInt, i: int64(t), o: x}
	case uint16:
		return value{k: kindInt, i: int64(t), o: x}
	case uint32:
		return value{k: kindInt, i: int64(t), o: x}
	case uint:
		return uintValue(uint64(t), x)
	case uint64:
		return uintValue(t, x)
	case float64:
		return value{k: kindFloat, f: t, o: x}
	case float32:
		return value{k: kindFloat, f: float64(t), o: x}
	case time.Time:
		return value{k: kindTime, o: x}
	case time.Duration:
		return value{k: kindDuration, i: int64(t), o: x}
	case []byte:
		return value{k: kindBytes, o: x}
	case [16]byte:
		return value{k: kindUUID, o: x}
	}
	return fromReflect(x)
}

func uintValue(u uint64, x any) value {
	if u > math.MaxInt64 {
		return value{k: kindUint, i: int64(u), o: x}
	}
	return value{k: kindInt, i: int64(u), o: x}
}

// fromReflect handles named types whose underlying type the language knows
// (type Color string, type UUID [16]byte, ...). Anything else is kindOther,
// which compares unequal to everything.
func fromReflect(x any) value {
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Bool:
		return value{k: kindBool, b: rv.Bool(), o: x}
	case reflect.String:
		return value{k: kindString, s: rv.String(), o: x}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return value{k: kindInt, i: rv.Int(), o: x}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintValue(rv.Uint(), x)
	case reflect.Float32, reflect.Float64:
		return value{k: kindFloat, f: rv.Float(), o: x}
	case reflect.Array:
		if rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
			return value{k: kindUUID, o: x}
		}
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return value{k: kindBytes, o: x}
		}
	}
	return value{k: kindOther, o: x}
}

// uuidBytes returns the 16 bytes of a kindUUID value.
func uuidBytes(x any) [16]byte {
	if u, ok := x.([16]byte); ok {
		return u
	}
	var u [16]byte
	rv := reflect.ValueOf(x)
	for i := range u {
		u[i] = byte(rv.Index(i).Uint())
	}
	return u
}

// bytesOf returns the bytes of a kindBytes value.
func bytesOf(x any) []byte {
	if b, ok := x.([]byte); ok {
		return b
	}
	return reflect.ValueOf(x).Bytes()
}

// toAny converts a value back to a Go value for a rule action. A value read
// unchanged from a message keeps its original Go type; computed values become
// int64, uint64, float64, string, bool, time.Time, time.Duration or nil.
func (v value) toAny() any {
	if v.o != nil {
		return v.o
	}
	switch v.k {
	case kindBool:
		return v.b
	case kindInt:
		return v.i
	case kindUint:
		return uint64(v.i)
	case kindFloat:
		return v.f
	case kindString:
		return v.s
	case kindDuration:
		return time.Duration(v.i)
	}
	return nil
}

// order is the outcome of comparing two values.
type order int8

const (
	orderLess order = iota - 1
	orderEqual
	orderGreater
	orderNaN          // numeric comparison involving NaN: every relation but <> is false
	orderIncomparable // different kinds, or a kind without the requested relation
)

func cmp3[T int64 | uint64 | float64 | string](a, b T) order {
	switch {
	case a < b:
		return orderLess
	case a > b:
		return orderGreater
	}
	return orderEqual
}

// compareValues compares two non-null values. With ordered set, kinds that
// only support equality (bool, binary, UUID) are incomparable.
func compareValues(a, b value, ordered bool) order {
	if a.isNumeric() && b.isNumeric() {
		return compareNumbers(a, b)
	}
	if a.k != b.k {
		return orderIncomparable
	}
	switch a.k {
	case kindString:
		return cmp3(a.s, b.s)
	case kindDuration:
		return cmp3(a.i, b.i)
	case kindTime:
		return order(a.o.(time.Time).Compare(b.o.(time.Time)))
	}
	if ordered {
		return orderIncomparable
	}
	switch a.k {
	case kindBool:
		if a.b == b.b {
			return orderEqual
		}
		return orderGreater
	case kindBytes:
		if bytes.Equal(bytesOf(a.o), bytesOf(b.o)) {
			return orderEqual
		}
		return orderGreater
	case kindUUID:
		if uuidBytes(a.o) == uuidBytes(b.o) {
			return orderEqual
		}
		return orderGreater
	}
	return orderIncomparable
}

func compareNumbers(a, b value) order {
	switch {
	case a.k == kindInt && b.k == kindInt:
		return cmp3(a.i, b.i)
	case a.k == kindUint && b.k == kindUint:
		return cmp3(uint64(a.i), uint64(b.i))
	case a.k == kindUint && b.k == kindInt:
		return orderGreater // a > MaxInt64 >= b
	case a.k == kindInt && b.k == kindUint:
		return orderLess
	}
	x, y := a.float(), b.float()
	if math.IsNaN(x) || math.IsNaN(y) {
		return orderNaN
	}
	return cmp3(x, y)
}

// valuesEqual reports whether two Go values are equal under the filter
// language's rules: numbers by value across widths, strings exactly, and
// unknown types never. Two nils are equal here (used by correlation filters;
// SQL "=" treats NULL as unknown before getting this far).
func valuesEqual(a, b value) bool {
	if a.isNull() || b.isNull() {
		return a.isNull() && b.isNull()
	}
	return compareValues(a, b, false) == orderEqual
}

// formatForConcat renders a value as string concatenation with "+" does
// (C# semantics: booleans are True/False). ok=false for kinds that have no
// textual form in the language.
func formatForConcat(v value) (string, bool) {
	switch v.k {
	case kindString:
		return v.s, true
	case kindInt:
		return strconv.FormatInt(v.i, 10), true
	case kindUint:
		return strconv.FormatUint(uint64(v.i), 10), true
	case kindFloat:
		return strconv.FormatFloat(v.f, 'g', -1, 64), true
	case kindBool:
		if v.b {
			return "True", true
		}
		return "False", true
	}
	return "", false
}

// kindName names a kind in error messages, using Service Bus type names.
func kindName(k kind) string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindInt:
		return "long"
	case kindUint:
		return "ulong"
	case kindFloat:
		return "double"
	case kindString:
		return "string"
	case kindTime:
		return "datetime"
	case kindDuration:
		return "timespan"
	case kindBytes:
		return "binary"
	case kindUUID:
		return "guid"
	}
	return "unsupported type"
}
