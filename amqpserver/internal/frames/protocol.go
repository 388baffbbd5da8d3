package frames

import (
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// ProtocolID distinguishes the layers negotiated by protocol headers
// (§2.2, part 5 §5.2.1 and §5.3.1).
type ProtocolID uint8

// Protocol ids.
const (
	ProtocolAMQP ProtocolID = 0
	ProtocolTLS  ProtocolID = 2
	ProtocolSASL ProtocolID = 3
)

// ProtocolHeader is the 8-byte header "AMQP" id major minor revision that
// opens each protocol layer.
type ProtocolHeader struct {
	ID       ProtocolID
	Major    uint8
	Minor    uint8
	Revision uint8
}

// The protocol headers of AMQP 1.0.
var (
	AMQPHeader = ProtocolHeader{ID: ProtocolAMQP, Major: 1, Minor: 0, Revision: 0}
	SASLHeader = ProtocolHeader{ID: ProtocolSASL, Major: 1, Minor: 0, Revision: 0}
	TLSHeader  = ProtocolHeader{ID: ProtocolTLS, Major: 1, Minor: 0, Revision: 0}
)

// ProtocolHeaderSize is the length of a protocol header.
const ProtocolHeaderSize = 8

// Bytes returns the wire form of h.
func (h ProtocolHeader) Bytes() [ProtocolHeaderSize]byte {
	return [ProtocolHeaderSize]byte{'A', 'M', 'Q', 'P', byte(h.ID), h.Major, h.Minor, h.Revision}
}

// String formats h as it appears on the wire, for logs.
func (h ProtocolHeader) String() string {
	return fmt.Sprintf("AMQP %d %d.%d.%d", h.ID, h.Major, h.Minor, h.Revision)
}

// ParseProtocolHeader decodes an 8-byte protocol header. It returns
// [ErrProtocolHeader] if p is not 8 bytes starting with "AMQP". A header
// with an unexpected id or version parses successfully: compare the
// result with [AMQPHeader] or [SASLHeader], and on a mismatch answer with
// the header the server supports and close, as §2.2 requires.
func ParseProtocolHeader(p []byte) (ProtocolHeader, error) {
	if len(p) != ProtocolHeaderSize || string(p[:4]) != "AMQP" {
		return ProtocolHeader{}, fmt.Errorf("%w: % x", ErrProtocolHeader, p)
	}
	return ProtocolHeader{ID: ProtocolID(p[4]), Major: p[5], Minor: p[6], Revision: p[7]}, nil
}

// WriteProtocolHeader appends h to w.
func WriteProtocolHeader(w *buffer.Buffer, h ProtocolHeader) {
	b := h.Bytes()
	w.Append(b[:])
}
