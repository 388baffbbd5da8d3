package encoding

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// Marshal appends the AMQP encoding of v to w, choosing the smallest
// encoding for its type. It accepts the Go types listed in the package
// documentation, every [Marshaler], [Raw] values (written verbatim) and,
// for convenience:
//
//   - int and uint, encoded as long and ulong;
//   - []Symbol and []string, encoded as arrays of symbol and string;
//   - map[string]any and map[Symbol]any, encoded as maps with sorted keys.
//
// Any other type yields an error wrapping [ErrUnsupported]. On error, w may
// hold a partial encoding; callers discard it.
func Marshal(w *buffer.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		w.AppendByte(TypeCodeNull)
	case bool:
		WriteBool(w, v)
	case uint8:
		WriteUbyte(w, v)
	case uint16:
		WriteUshort(w, v)
	case uint32:
		WriteUint(w, v)
	case uint64:
		WriteUlong(w, v)
	case uint:
		WriteUlong(w, uint64(v))
	case int8:
		WriteByte(w, v)
	case int16:
		WriteShort(w, v)
	case int32:
		WriteInt(w, v)
	case int64:
		WriteLong(w, v)
	case int:
		WriteLong(w, int64(v))
	case float32:
		w.AppendByte(TypeCodeFloat)
		w.AppendUint32(math.Float32bits(v))
	case float64:
		w.AppendByte(TypeCodeDouble)
		w.AppendUint64(math.Float64bits(v))
	case Decimal32:
		w.AppendByte(TypeCodeDecimal32)
		w.Append(v[:])
	case Decimal64:
		w.AppendByte(TypeCodeDecimal64)
		w.Append(v[:])
	case Decimal128:
		w.AppendByte(TypeCodeDecimal128)
		w.Append(v[:])
	case Char:
		w.AppendByte(TypeCodeChar)
		w.AppendUint32(uint32(v))
	case time.Time:
		WriteTimestamp(w, v)
	case UUID:
		WriteUUID(w, v)
	case []byte:
		WriteBinary(w, v)
	case string:
		WriteString(w, v)
	case Symbol:
		WriteSymbol(w, v)
	case []any:
		return writeList(w, v, smallest)
	case Map:
		return writeMap(w, v, smallest)
	case Array:
		return writeArray(w, &v, smallest)
	case *Array:
		return writeArray(w, v, smallest)
	case Described:
		w.AppendByte(TypeCodeDescribed)
		if err := Marshal(w, v.Descriptor); err != nil {
			return err
		}
		return Marshal(w, v.Value)
	case Raw:
		if len(v) == 0 {
			return fmt.Errorf("%w: empty Raw value", ErrUnsupported)
		}
		w.Append(v)
	case []Symbol:
		WriteSymbolArray(w, v)
	case []string:
		a := Array{Type: TypeCodeStr32, Elems: make([]any, len(v))}
		for i, s := range v {
			a.Elems[i] = s
		}
		return writeArray(w, &a, smallest)
	case map[string]any:
		return writeMap(w, StringMap(v), smallest)
	case map[Symbol]any:
		return writeMap(w, SymbolMap(v), smallest)
	case Marshaler:
		return v.MarshalAMQP(w)
	default:
		return fmt.Errorf("%w: %T", ErrUnsupported, v)
	}
	return nil
}

// WriteNull appends an AMQP null.
func WriteNull(w *buffer.Buffer) { w.AppendByte(TypeCodeNull) }

// WriteBool appends a boolean as true (0x41) or false (0x42).
func WriteBool(w *buffer.Buffer, v bool) {
	if v {
		w.AppendByte(TypeCodeBoolTrue)
	} else {
		w.AppendByte(TypeCodeBoolFalse)
	}
}

// WriteUbyte appends a ubyte.
func WriteUbyte(w *buffer.Buffer, v uint8) {
	w.AppendByte(TypeCodeUbyte)
	w.AppendByte(v)
}

// WriteUshort appends a ushort.
func WriteUshort(w *buffer.Buffer, v uint16) {
	w.AppendByte(TypeCodeUshort)
	w.AppendUint16(v)
}

// WriteUint appends a uint as uint0, smalluint or uint, whichever is
// smallest.
func WriteUint(w *buffer.Buffer, v uint32) {
	switch {
	case v == 0:
		w.AppendByte(TypeCodeUint0)
	case v <= math.MaxUint8:
		w.AppendByte(TypeCodeSmallUint)
		w.AppendByte(byte(v))
	default:
		w.AppendByte(TypeCodeUint)
		w.AppendUint32(v)
	}
}

// WriteUlong appends a ulong as ulong0, smallulong or ulong, whichever is
// smallest.
func WriteUlong(w *buffer.Buffer, v uint64) {
	switch {
	case v == 0:
		w.AppendByte(TypeCodeUlong0)
	case v <= math.MaxUint8:
		w.AppendByte(TypeCodeSmallUlong)
		w.AppendByte(byte(v))
	default:
		w.AppendByte(TypeCodeUlong)
		w.AppendUint64(v)
	}
}

// WriteByte appends an AMQP byte (a signed 8-bit integer).
func WriteByte(w *buffer.Buffer, v int8) {
	w.AppendByte(TypeCodeByte)
	w.AppendByte(byte(v))
}

// WriteShort appends a short.
func WriteShort(w *buffer.Buffer, v int16) {
	w.AppendByte(TypeCodeShort)
	w.AppendUint16(uint16(v))
}

// WriteInt appends an int as smallint or int, whichever is smallest.
func WriteInt(w *buffer.Buffer, v int32) {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		w.AppendByte(TypeCodeSmallInt)
		w.AppendByte(byte(int8(v)))
		return
	}
	w.AppendByte(TypeCodeInt)
	w.AppendUint32(uint32(v))
}

// WriteLong appends a long as smalllong or long, whichever is smallest.
func WriteLong(w *buffer.Buffer, v int64) {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		w.AppendByte(TypeCodeSmallLong)
		w.AppendByte(byte(int8(v)))
		return
	}
	w.AppendByte(TypeCodeLong)
	w.AppendUint64(uint64(v))
}

// WriteTimestamp appends t as milliseconds since the Unix epoch; precision
// below a millisecond is dropped.
func WriteTimestamp(w *buffer.Buffer, t time.Time) {
	w.AppendByte(TypeCodeTimestamp)
	w.AppendUint64(uint64(t.UnixMilli()))
}

// WriteUUID appends a uuid.
func WriteUUID(w *buffer.Buffer, u UUID) {
	w.AppendByte(TypeCodeUUID)
	w.Append(u[:])
}

// WriteBinary appends a binary as vbin8 or vbin32. A nil slice is still a
// (zero-length) binary, not a null.
func WriteBinary(w *buffer.Buffer, v []byte) {
	writeVariable(w, TypeCodeVbin8, TypeCodeVbin32, len(v))
	w.Append(v)
}

// WriteBinaryHeader appends the constructor and length of a binary of n
// bytes, as [WriteBinary] writes them before the bytes.
func WriteBinaryHeader(w *buffer.Buffer, n int) {
	writeVariable(w, TypeCodeVbin8, TypeCodeVbin32, n)
}

// WriteString appends a string as str8 or str32. Invalid UTF-8 is written
// as is; AMQP peers pass strings through without validating them either.
func WriteString(w *buffer.Buffer, v string) {
	writeVariable(w, TypeCodeStr8, TypeCodeStr32, len(v))
	w.AppendString(v)
}

// WriteSymbol appends a symbol as sym8 or sym32.
func WriteSymbol(w *buffer.Buffer, v Symbol) {
	writeVariable(w, TypeCodeSym8, TypeCodeSym32, len(v))
	w.AppendString(string(v))
}

// WriteSymbolArray appends syms as an array of symbols, the encoding the
// spec requires for multiple="true" symbol fields such as capabilities.
func WriteSymbolArray(w *buffer.Buffer, syms []Symbol) {
	wide := slices.ContainsFunc(syms, func(s Symbol) bool { return len(s) > math.MaxUint8 })
	start := beginCompound(w, smallest)
	if wide {
		w.AppendByte(TypeCodeSym32)
	} else {
		w.AppendByte(TypeCodeSym8)
	}
	for _, s := range syms {
		if wide {
			w.AppendUint32(uint32(len(s)))
		} else {
			w.AppendByte(byte(len(s)))
		}
		w.AppendString(string(s))
	}
	endCompound(w, start, len(syms), TypeCodeArray8, TypeCodeArray32, smallest)
}

// WriteDescriptor appends the described-type constructor 0x00 followed by
// a numeric descriptor, for example 0x53 0x10 for open. The described value
// must be written next.
func WriteDescriptor(w *buffer.Buffer, code uint64) {
	w.AppendByte(TypeCodeDescribed)
	WriteUlong(w, code)
}

func writeVariable(w *buffer.Buffer, code8, code32 byte, n int) {
	if n <= math.MaxUint8 {
		w.AppendByte(code8)
		w.AppendByte(byte(n))
		return
	}
	w.AppendByte(code32)
	w.AppendUint32(uint32(n))
}
