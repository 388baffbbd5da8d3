package frames

import (
	"errors"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// Type is the frame type carried in byte 5 of the frame header (§2.3.1).
type Type uint8

// Frame types.
const (
	TypeAMQP Type = 0x00 // performatives
	TypeSASL Type = 0x01 // SASL negotiation (part 5, §5.3.1)
)

// HeaderSize is the size in bytes of a frame header without extension.
const HeaderSize = 8

// MinMaxFrameSize is the smallest max-frame-size a peer may negotiate
// (§2.7.1, open): every peer must accept frames up to this size.
const MinMaxFrameSize = 512

// Header is the fixed part of a frame header (§2.3.1).
type Header struct {
	Size       uint32 // total frame size, header included
	DataOffset uint8  // header size in 4-byte words, at least 2
	Type       Type   // frame type
	Channel    uint16 // channel for AMQP frames; ignored for SASL
}

// Body is the decoded body of a frame: one of the performatives or SASL
// frames defined in this package.
type Body interface {
	encoding.Marshaler
	frameType() Type
}

// Frame is a decoded or to-be-written frame. A nil Body is an empty frame,
// which peers send as a heartbeat.
type Frame struct {
	Type    Type
	Channel uint16
	Body    Body
}

// Errors reported while reading frames. Decoding errors wrap
// [ErrMalformed], which is the same value as [encoding.ErrMalformed].
var (
	// ErrFrameTooLarge means a frame header announced a size above the
	// reader's maximum frame size. The frame body has not been read.
	ErrFrameTooLarge = errors.New("frames: frame larger than max-frame-size")

	// ErrFrameTooSmall means a frame header announced a size or data offset
	// smaller than the header itself.
	ErrFrameTooSmall = errors.New("frames: frame smaller than its header")

	// ErrMalformed wraps every decoding failure, including missing
	// mandatory fields and unknown descriptors.
	ErrMalformed = encoding.ErrMalformed

	// ErrProtocolHeader means the peer did not send an "AMQP" protocol
	// header where one was due (for example, it spoke HTTP).
	ErrProtocolHeader = errors.New("frames: not an AMQP protocol header")
)

// Descriptor codes of the described types in this package (the low 32
// bits of "amqp:…" descriptors; the domain id is 0).
const (
	codeOpen        uint64 = 0x10
	codeBegin       uint64 = 0x11
	codeAttach      uint64 = 0x12
	codeFlow        uint64 = 0x13
	codeTransfer    uint64 = 0x14
	codeDisposition uint64 = 0x15
	codeDetach      uint64 = 0x16
	codeEnd         uint64 = 0x17
	codeClose       uint64 = 0x18
	codeError       uint64 = 0x1d

	codeReceived uint64 = 0x23
	codeAccepted uint64 = 0x24
	codeRejected uint64 = 0x25
	codeReleased uint64 = 0x26
	codeModified uint64 = 0x27
	codeSource   uint64 = 0x28
	codeTarget   uint64 = 0x29

	codeCoordinator        uint64 = 0x30
	codeDeclared           uint64 = 0x33
	codeTransactionalState uint64 = 0x34

	codeSASLMechanisms uint64 = 0x40
	codeSASLInit       uint64 = 0x41
	codeSASLChallenge  uint64 = 0x42
	codeSASLResponse   uint64 = 0x43
	codeSASLOutcome    uint64 = 0x44

	codeMessageHeader         uint64 = 0x70
	codeDeliveryAnnotations   uint64 = 0x71
	codeMessageAnnotations    uint64 = 0x72
	codeMessageProperties     uint64 = 0x73
	codeApplicationProperties uint64 = 0x74
	codeData                  uint64 = 0x75
	codeAMQPSequence          uint64 = 0x76
	codeAMQPValue             uint64 = 0x77
	codeFooter                uint64 = 0x78
)
