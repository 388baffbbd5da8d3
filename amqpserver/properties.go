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
	if len(raw) == 0 || uint64(len(raw)) > math.MaxUint32 { // keyAt holds offsets in raw
		return 0, 0, false
	}
	var i int     // the offset of the entries, then of the next key or value
	var count int // keys and values
	switch raw[0] {
	case encoding.TypeCodeNull:
		return 0, 0, len(raw) == 1
	case encoding.TypeCodeMap8:
		if len(raw) < 3 || int(raw[1])-1 != len(raw)-3 {
			return 0, 0, false
		}
		i, count = 3, int(raw[2])
	case encoding.TypeCodeMap32:
		if len(raw) < 9 || int(binary.BigEndian.Uint32(raw[1:]))-4 != len(raw)-9 {
			return 0, 0, false
		}
		i, count = 9, int(binary.BigEndian.Uint32(raw[5:]))
	default:
		return 0, 0, false
	}
	if count%2 != 0 || count/2 > maxPlainProperties {
		return 0, 0, false
	}
	// Where in raw each key read so far starts and ends (an array of
	// the keys' slices was 768 bytes to zero for every send).
	var keyAt, keyEnd [maxPlainProperties]uint32
	for range count / 2 {
		start, end, ok := plainVariable(raw, i, encoding.TypeCodeStr8, encoding.TypeCodeStr32)
		if !ok {
			return 0, 0, false
		}
		key := raw[start:end]
		for j := range n {
			if string(raw[keyAt[j]:keyEnd[j]]) == string(key) {
				return 0, 0, false
			}
		}
		keyAt[n], keyEnd[n] = uint32(start), uint32(end)
		n++
		i = end
		if i == len(raw) {
			return 0, 0, false
		}
		code := raw[i]
		switch w := plainWidths[code]; w {
		case plainVariableWidth: // a binary, string or symbol: its length
			start, end, ok := plainVariable(raw, i, code&^0x10, code|0x10)
			if !ok {
				return 0, 0, false
			}
			size += len(key) + end - start
			i = end
		case plainDescribed: // a TimeSpan
			if i, ok = plainTimeSpan(raw, i); !ok {
				return 0, 0, false
			}
			size += len(key) + 8
		case plainRefused:
			return 0, 0, false
		default: // a fixed-width scalar of w bytes after its constructor
			if len(raw)-i <= int(w) {
				return 0, 0, false
			}
			size += len(key) + 8
			i += 1 + int(w)
		}
	}
	if i != len(raw) { // bytes after the entries
		return 0, 0, false
	}
	return n, size, true
}

// What plainWidths holds for a constructor that is not a fixed-width
// scalar plainProperties keeps.
const (
	plainRefused       = -1 // char, decimals, list0, lists, maps, arrays, unknown
	plainVariableWidth = -2 // binary, string, symbol
	plainDescribed     = -3 // a TimeSpan, or refused
)

// plainWidths is, for every constructor, how many bytes follow it in a
// fixed-width scalar that plainProperties keeps as it arrived (counted
// at 8 bytes, as core's valueSize counts it), or what else it is.
var plainWidths = func() (t [256]int8) {
	for c := range t {
		t[c] = plainRefused
	}
	for _, c := range []byte{encoding.TypeCodeNull, encoding.TypeCodeBoolTrue, encoding.TypeCodeBoolFalse, encoding.TypeCodeUint0, encoding.TypeCodeUlong0} {
		t[c] = 0
	}
	for _, c := range []byte{encoding.TypeCodeBool, encoding.TypeCodeUbyte, encoding.TypeCodeByte, encoding.TypeCodeSmallUint,
		encoding.TypeCodeSmallUlong, encoding.TypeCodeSmallInt, encoding.TypeCodeSmallLong} {
		t[c] = 1
	}
	for _, c := range []byte{encoding.TypeCodeUshort, encoding.TypeCodeShort} {
		t[c] = 2
	}
	for _, c := range []byte{encoding.TypeCodeUint, encoding.TypeCodeInt, encoding.TypeCodeFloat} {
		t[c] = 4
	}
	for _, c := range []byte{encoding.TypeCodeUlong, encoding.TypeCodeLong, encoding.TypeCodeDouble, encoding.TypeCodeTimestamp} {
		t[c] = 8
	}
	t[encoding.TypeCodeUUID] = 16
	for _, c := range []byte{encoding.TypeCodeVbin8, encoding.TypeCodeVbin32, encoding.TypeCodeStr8, encoding.TypeCodeStr32,
		encoding.TypeCodeSym8, encoding.TypeCodeSym32} {
		t[c] = plainVariableWidth
	}
	t[encoding.TypeCodeDescribed] = plainDescribed
	return t
}()

// plainVariable reads the binary, string or symbol at raw[i] whose
// constructor is code8 or code32 (its 8- and 32-bit length forms) and
// returns where its data starts and ends in raw.
func plainVariable(raw []byte, i int, code8, code32 byte) (start, end int, ok bool) {
	b := raw[i:]
	if len(b) < 2 {
		return 0, 0, false
	}
	var n int
	switch b[0] {
	case code8:
		n, start = int(b[1]), i+2
	case code32:
		if len(b) < 5 {
			return 0, 0, false
		}
		n, start = int(binary.BigEndian.Uint32(b[1:])), i+5
	default:
		return 0, 0, false
	}
	if n > len(raw)-start {
		return 0, 0, false
	}
	return start, start + n, true
}

// plainTimeSpan reads the .NET TimeSpan at raw[i] that valueFromAMQP
// keeps (the timespan descriptor symbol and a long whose ticks fit a
// time.Duration) and returns the offset after it.
func plainTimeSpan(raw []byte, i int) (int, bool) {
	start, end, ok := plainVariable(raw, i+1, encoding.TypeCodeSym8, encoding.TypeCodeSym32) // after the 0x00
	if !ok || string(raw[start:end]) != string(timeSpanDescriptor) || end == len(raw) {
		return 0, false
	}
	b := raw[end:]
	var ticks int64
	switch b[0] {
	case encoding.TypeCodeLong:
		if len(b) < 9 {
			return 0, false
		}
		ticks, end = int64(binary.BigEndian.Uint64(b[1:])), end+9
	case encoding.TypeCodeSmallLong:
		if len(b) < 2 {
			return 0, false
		}
		ticks, end = int64(int8(b[1])), end+2
	default:
		return 0, false
	}
	return end, ticks <= math.MaxInt64/100 && ticks >= math.MinInt64/100
}
