package frames

import (
	"encoding/binary"
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
)

// Write appends f to w: header, body and, for a [*Transfer], its Payload.
// The frame type is taken from the body (SASL bodies get [TypeSASL]), so
// callers may leave f.Type zero; f.Type only matters for an empty frame,
// which a nil Body writes.
//
// Write does not enforce a maximum frame size: check the growth of w
// against the peer's max-frame-size, and split transfers before calling it.
func Write(w *buffer.Buffer, f Frame) error {
	start := w.Size()
	typ := f.Type
	if f.Body != nil {
		typ = f.Body.frameType()
	}
	w.AppendUint32(0) // size, patched below
	w.AppendByte(2)   // data offset: no extended header
	w.AppendByte(byte(typ))
	w.AppendUint16(f.Channel)
	if f.Body != nil {
		if err := f.Body.MarshalAMQP(w); err != nil {
			w.Truncate(start)
			return fmt.Errorf("frames: encoding %T: %w", f.Body, err)
		}
		if t, ok := f.Body.(*Transfer); ok {
			w.Append(t.Payload)
			w.Append(t.PayloadRest)
		}
	}
	size := w.Size() - start
	if uint64(size) > 0xffffffff {
		w.Truncate(start)
		return fmt.Errorf("frames: frame of %d bytes exceeds the 4 GiB limit", size)
	}
	binary.BigEndian.PutUint32(w.Raw()[start:], uint32(size))
	return nil
}

// WriteHeartbeat appends an empty frame on channel 0, which peers send to
// keep an idle connection open (§2.4.5).
func WriteHeartbeat(w *buffer.Buffer) {
	w.Append([]byte{0, 0, 0, 8, 2, 0, 0, 0})
}
