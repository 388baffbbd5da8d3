package amqpserver

import (
	"encoding/binary"
	"math"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/core"
)

// Application properties kept as they arrived (core/properties.go).
//
// A sent message's application-properties section is, in all but unusual
// cases, a map of string keys to scalars. Such a map goes to the broker
// as it is (core.EncodedProperties, this front's codec): it is checked
// entry by entry here without being decoded, stored as received, and
// written into the transfer of each delivery as stored, so a message
// whose properties no filter, rule, dead-lettering or REST client reads
// is never decoded into a map nor encoded again. Anything else (a list,
// map or array value, a repeated key, a value core cannot keep) is
// decoded as before ([propsDecoder]), which refuses what it refused.

// propertyCodecID is this front's codec in core's registry: the value of
// an application-properties section, a map, as a client encoded it. It
// is stored in body records and must keep its meaning.
const propertyCodecID = 1

func init() { core.RegisterPropertyCodec(propertyCodecID, propertyCodec{}) }

// propertyCodec decodes stored application properties for core: exactly
// as a send decodes those it does not keep encoded.
type propertyCodec struct{}

// DecodeProperties implements core.PropertyCodec.
func (propertyCodec) DecodeProperties(b []byte) (map[string]any, error) {
	var pd propsDecoder
	if err := encoding.ReadMapInto(buffer.New(b), &pd); err != nil {
		return nil, err
	}
	return pd.props, nil
}

// maxPlainProperties is how many entries a map may have to be kept as it
// arrived: checking that no key repeats compares every two.
const maxPlainProperties = 32

// plainProperties reports whether raw, the value of an
// application-properties section, can be kept as it arrived: a map (or
// null) of at most maxPlainProperties entries whose keys are distinct
// strings and whose values are scalars core keeps (everything
// valueFromAMQP accepts but lists, maps and arrays). For such a map it
// returns how many entries it has and their accounted size (what
// core.Message.Size counts for them decoded). A map that does not
// qualify, malformed ones among them, is decoded instead, which reports
// what is wrong with it: plainProperties never refuses, so every map it
// accepts is one the decode accepts too (FuzzPlainProperties).
func plainProperties(raw []byte) (n, size int, ok bool) {
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
		vs, ok := plainValueSize(v)
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
func plainValueSize(v []byte) (int, bool) {
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
