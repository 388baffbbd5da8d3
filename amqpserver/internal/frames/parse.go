package frames

import (
	"encoding/binary"
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// ParseHeader consumes and validates a frame header from r: the 8 fixed
// bytes plus any extended header announced by the data offset. It returns
// [ErrFrameTooSmall] if the size or data offset is smaller than the header,
// and an error wrapping [ErrMalformed] for an unknown frame type or a data
// offset beyond the frame. It does not check the size against a maximum;
// [Reader] does.
func ParseHeader(r *buffer.Buffer) (Header, error) {
	p, ok := r.Next(HeaderSize)
	if !ok {
		return Header{}, fmt.Errorf("%w: frame header needs %d bytes, have %d", ErrMalformed, HeaderSize, r.Len())
	}
	h, err := parseHeaderBytes(p)
	if err != nil {
		return Header{}, err
	}
	// Skip the extended header, whose contents no AMQP 1.0 frame defines.
	if ext := int(h.DataOffset)*4 - HeaderSize; ext > 0 && !r.Skip(ext) {
		return Header{}, fmt.Errorf("%w: extended header of %d bytes is truncated", ErrMalformed, ext)
	}
	return h, nil
}

// parseHeaderBytes validates the 8 fixed header bytes.
func parseHeaderBytes(p []byte) (Header, error) {
	h := Header{
		Size:       binary.BigEndian.Uint32(p),
		DataOffset: p[4],
		Type:       Type(p[5]),
		Channel:    binary.BigEndian.Uint16(p[6:]),
	}
	if h.Size < HeaderSize {
		return h, fmt.Errorf("%w: size %d", ErrFrameTooSmall, h.Size)
	}
	if h.DataOffset < 2 {
		return h, fmt.Errorf("%w: data offset %d", ErrFrameTooSmall, h.DataOffset)
	}
	if uint32(h.DataOffset)*4 > h.Size {
		return h, fmt.Errorf("%w: data offset %d beyond frame size %d", ErrMalformed, h.DataOffset, h.Size)
	}
	if h.Type != TypeAMQP && h.Type != TypeSASL {
		return h, fmt.Errorf("%w: unknown frame type 0x%02x", ErrMalformed, uint8(h.Type))
	}
	return h, nil
}

// unmarshaler is implemented by every frame body type.
type unmarshaler interface {
	Body
	unmarshal(r *buffer.Buffer) error
}

// ParseBody decodes a frame body (the bytes after the header) from r. An
// empty r is an empty frame and yields a nil Body. Any bytes following the
// performative are a transfer's payload; for other performatives they are
// an error. Transfer.Payload aliases r.
func ParseBody(r *buffer.Buffer) (Body, error) {
	if r.Len() == 0 {
		return nil, nil
	}
	code, err := encoding.ReadDescriptor(r)
	if err != nil {
		return nil, fmt.Errorf("frame body: %w", err)
	}
	var b unmarshaler
	switch code {
	case codeOpen:
		b = new(Open)
	case codeBegin:
		b = new(Begin)
	case codeAttach:
		b = new(Attach)
	case codeFlow:
		b = new(Flow)
	case codeTransfer:
		// One allocation for the transfer and the numbers it points to
		// (transferAlloc): it is the performative of every message.
		// Read straight off the bytes where it can (transferfast.go).
		a := new(transferAlloc)
		if a.t.unmarshalFast(r, &a.room) {
			return &a.t, nil
		}
		*a = transferAlloc{}
		return whole(&a.t, a.t.unmarshalInto(r, &a.room), r)
	case codeDisposition:
		// The same for the disposition and its last delivery-id.
		a := new(dispositionAlloc)
		if a.d.unmarshalFast(r, &a.last) {
			return &a.d, nil
		}
		*a = dispositionAlloc{}
		return whole(&a.d, a.d.unmarshalInto(r, &a.last), r)
	case codeDetach:
		b = new(Detach)
	case codeEnd:
		b = new(End)
	case codeClose:
		b = new(Close)
	case codeSASLMechanisms:
		b = new(SASLMechanisms)
	case codeSASLInit:
		b = new(SASLInit)
	case codeSASLChallenge:
		b = new(SASLChallenge)
	case codeSASLResponse:
		b = new(SASLResponse)
	case codeSASLOutcome:
		b = new(SASLOutcome)
	default:
		return nil, fmt.Errorf("%w: unknown performative descriptor 0x%x", ErrMalformed, code)
	}
	return whole(b, b.unmarshal(r), r)
}

// whole returns b, decoded from r with err, if err is nil and nothing
// follows the performative in r.
func whole(b Body, err error, r *buffer.Buffer) (Body, error) {
	if err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the performative", ErrMalformed, r.Len())
	}
	return b, nil
}

// ParseFrame decodes a whole frame (header and body) held in p, which must
// contain exactly one frame. It checks that the body's kind (AMQP or SASL)
// matches the frame type.
func ParseFrame(p []byte) (Frame, error) {
	r := buffer.New(p)
	h, err := ParseHeader(r)
	if err != nil {
		return Frame{}, err
	}
	if uint32(len(p)) != h.Size {
		return Frame{}, fmt.Errorf("%w: frame size %d but %d bytes given", ErrMalformed, h.Size, len(p))
	}
	return parseFrameBody(h, r)
}

func parseFrameBody(h Header, r *buffer.Buffer) (Frame, error) {
	body, err := ParseBody(r)
	if err != nil {
		return Frame{}, err
	}
	if body != nil && body.frameType() != h.Type {
		return Frame{}, fmt.Errorf("%w: %T in a frame of type %d", ErrMalformed, body, h.Type)
	}
	return Frame{Type: h.Type, Channel: h.Channel, Body: body}, nil
}
