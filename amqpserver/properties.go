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
//
// It reads the map in one pass, each key and value by a switch on its
// constructor (every send with properties passes here: reading each
// entry with the encoding package's general readers, then again to
// classify it, was a tenth of the front's instructions per send), and
// takes exactly what that reading took (TestPlainPropertiesIsTheWalk).
func plainProperties(raw []byte) (n, size int, ok bool) {
	if len(raw) == 0 {
		return 0, 0, false
	}
	var content int // the offset of the entries
	var count int   // keys and values
	switch raw[0] {
	case encoding.TypeCodeNull:
		return 0, 0, len(raw) == 1
	case encoding.TypeCodeMap8:
		if len(raw) < 3 || int(raw[1])-1 != len(raw)-3 {
			return 0, 0, false
		}
		content, count = 3, int(raw[2])
	case encoding.TypeCodeMap32:
		if len(raw) < 9 || int(binary.BigEndian.Uint32(raw[1:]))-4 != len(raw)-9 {
			return 0, 0, false
		}
		content, count = 9, int(binary.BigEndian.Uint32(raw[5:]))
	default:
		return 0, 0, false
	}
	if count%2 != 0 || count/2 > maxPlainProperties {
		return 0, 0, false
	}
	var keys [maxPlainProperties][]byte
	p := raw[content:]
	for range count / 2 {
		key, ok := plainVariable(&p, encoding.TypeCodeStr8, encoding.TypeCodeStr32)
		if !ok {
			return 0, 0, false
		}
		for _, seen := range keys[:n] {
			if string(seen) == string(key) {
				return 0, 0, false
			}
		}
		vs, ok := plainValue(&p)
		if !ok {
			return 0, 0, false
		}
		keys[n] = key
		n++
		size += len(key) + vs
	}
	if len(p) != 0 { // bytes after the entries
		return 0, 0, false
	}
	return n, size, true
}

// plainVariable reads, from the front of *p, a binary, string or symbol
// whose constructor is code8 or code32 (its 8- and 32-bit length forms),
// returns its data and advances *p past it.
func plainVariable(p *[]byte, code8, code32 byte) ([]byte, bool) {
	b := *p
	if len(b) < 2 {
		return nil, false
	}
	var n, hdr int
	switch b[0] {
	case code8:
		n, hdr = int(b[1]), 2
	case code32:
		if len(b) < 5 {
			return nil, false
		}
		n, hdr = int(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return nil, false
	}
	if n > len(b)-hdr {
		return nil, false
	}
	*p = b[hdr+n:]
	return b[hdr : hdr+n], true
}

// plainValue reads, from the front of *p, a value plainProperties keeps
// as it arrived and returns its accounted size (core's valueSize of what
// valueFromAMQP makes of it), advancing *p past it; false for a value
// it does not keep (char, decimals, lists, maps, arrays, described
// values but a TimeSpan) or one the input does not hold.
func plainValue(p *[]byte) (int, bool) {
	b := *p
	if len(b) == 0 {
		return 0, false
	}
	width := 0
	switch b[0] {
	case encoding.TypeCodeVbin8, encoding.TypeCodeVbin32:
		d, ok := plainVariable(p, encoding.TypeCodeVbin8, encoding.TypeCodeVbin32)
		return len(d), ok
	case encoding.TypeCodeStr8, encoding.TypeCodeStr32:
		d, ok := plainVariable(p, encoding.TypeCodeStr8, encoding.TypeCodeStr32)
		return len(d), ok
	case encoding.TypeCodeSym8, encoding.TypeCodeSym32:
		d, ok := plainVariable(p, encoding.TypeCodeSym8, encoding.TypeCodeSym32)
		return len(d), ok
	case encoding.TypeCodeNull, encoding.TypeCodeBoolTrue, encoding.TypeCodeBoolFalse, encoding.TypeCodeUint0, encoding.TypeCodeUlong0:
	case encoding.TypeCodeBool, encoding.TypeCodeUbyte, encoding.TypeCodeByte, encoding.TypeCodeSmallUint,
		encoding.TypeCodeSmallUlong, encoding.TypeCodeSmallInt, encoding.TypeCodeSmallLong:
		width = 1
	case encoding.TypeCodeUshort, encoding.TypeCodeShort:
		width = 2
	case encoding.TypeCodeUint, encoding.TypeCodeInt, encoding.TypeCodeFloat:
		width = 4
	case encoding.TypeCodeUlong, encoding.TypeCodeLong, encoding.TypeCodeDouble, encoding.TypeCodeTimestamp:
		width = 8
	case encoding.TypeCodeUUID:
		width = 16
	case encoding.TypeCodeDescribed:
		return 8, plainTimeSpan(p)
	default:
		return 0, false
	}
	if len(b) <= width {
		return 0, false
	}
	*p = b[1+width:]
	return 8, true
}

// plainTimeSpan reads, from the front of *p, a .NET TimeSpan that
// valueFromAMQP keeps (the timespan descriptor symbol and a long whose
// ticks fit a time.Duration) and advances *p past it.
func plainTimeSpan(p *[]byte) bool {
	b := (*p)[1:] // after the described constructor
	sym, ok := plainVariable(&b, encoding.TypeCodeSym8, encoding.TypeCodeSym32)
	if !ok || string(sym) != string(timeSpanDescriptor) || len(b) == 0 {
		return false
	}
	var ticks int64
	switch b[0] {
	case encoding.TypeCodeLong:
		if len(b) < 9 {
			return false
		}
		ticks, b = int64(binary.BigEndian.Uint64(b[1:])), b[9:]
	case encoding.TypeCodeSmallLong:
		if len(b) < 2 {
			return false
		}
		ticks, b = int64(int8(b[1])), b[2:]
	default:
		return false
	}
	*p = b
	return ticks <= math.MaxInt64/100 && ticks >= math.MinInt64/100
}
