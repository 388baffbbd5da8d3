package encoding

import (
	"encoding/hex"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// Constructor codes (AMQP 1.0 part 1, §1.6). Several codes encode the same
// type in different widths; [Marshal] picks the smallest.
const (
	TypeCodeDescribed byte = 0x00 // a descriptor and a value follow

	TypeCodeNull      byte = 0x40
	TypeCodeBool      byte = 0x56 // one byte, 0x00 false, 0x01 true
	TypeCodeBoolTrue  byte = 0x41
	TypeCodeBoolFalse byte = 0x42

	TypeCodeUbyte      byte = 0x50
	TypeCodeUshort     byte = 0x60
	TypeCodeUint       byte = 0x70
	TypeCodeSmallUint  byte = 0x52
	TypeCodeUint0      byte = 0x43
	TypeCodeUlong      byte = 0x80
	TypeCodeSmallUlong byte = 0x53
	TypeCodeUlong0     byte = 0x44

	TypeCodeByte      byte = 0x51
	TypeCodeShort     byte = 0x61
	TypeCodeInt       byte = 0x71
	TypeCodeSmallInt  byte = 0x54
	TypeCodeLong      byte = 0x81
	TypeCodeSmallLong byte = 0x55

	TypeCodeFloat  byte = 0x72
	TypeCodeDouble byte = 0x82

	TypeCodeDecimal32  byte = 0x74
	TypeCodeDecimal64  byte = 0x84
	TypeCodeDecimal128 byte = 0x94

	TypeCodeChar      byte = 0x73
	TypeCodeTimestamp byte = 0x83
	TypeCodeUUID      byte = 0x98

	TypeCodeVbin8  byte = 0xa0
	TypeCodeVbin32 byte = 0xb0
	TypeCodeStr8   byte = 0xa1
	TypeCodeStr32  byte = 0xb1
	TypeCodeSym8   byte = 0xa3
	TypeCodeSym32  byte = 0xb3

	TypeCodeList0  byte = 0x45
	TypeCodeList8  byte = 0xc0
	TypeCodeList32 byte = 0xd0
	TypeCodeMap8   byte = 0xc1
	TypeCodeMap32  byte = 0xd1

	TypeCodeArray8  byte = 0xe0
	TypeCodeArray32 byte = 0xf0
)

// Symbol is an AMQP symbol: an ASCII string from a constrained domain, used
// for error conditions, capabilities, annotation keys and similar names.
type Symbol string

// UUID is an AMQP uuid, 16 bytes in RFC 4122 (big-endian) order.
type UUID [16]byte

// String formats u in the canonical 8-4-4-4-12 hex form.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Decimal32 is an IEEE 754-2008 decimal32 kept as its raw big-endian bytes;
// the broker only stores and forwards decimals, never computes with them.
type Decimal32 [4]byte

// Decimal64 is an IEEE 754-2008 decimal64 kept as raw big-endian bytes.
type Decimal64 [8]byte

// Decimal128 is an IEEE 754-2008 decimal128 kept as raw big-endian bytes.
type Decimal128 [16]byte

// Char is an AMQP char: a single UTF-32BE code point.
type Char rune

// Described is a described value whose descriptor this package does not
// know: Descriptor is normally a uint64 (a numeric descriptor such as
// 0x0000013700000001) or a [Symbol]; Value is any AMQP value.
//
// Service Bus filters, for example, arrive as Described values and must be
// echoed back in the same form.
type Described struct {
	Descriptor any
	Value      any
}

// Raw is an already-encoded AMQP value (constructor included). [Marshal]
// writes it verbatim, which is how the broker re-emits message body sections
// exactly as it received them. Use [ReadRaw] to capture one.
type Raw []byte

// Marshaler is implemented by types that write their own AMQP encoding
// (constructor included), such as the performatives and delivery states of
// the frames package. [Marshal] calls it for any value that implements it.
type Marshaler interface {
	MarshalAMQP(w *buffer.Buffer) error
}
