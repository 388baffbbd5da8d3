package frames

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// A transfer's fast path (issue 30), as the store decoder's
// (storefast.go): the transfer is the performative of every message a
// client sends, and decodeFields walks its list through a callback per
// field and the encoding package's buffer readers. unmarshalFast reads
// the fields clients send (all but a delivery state, which a
// transactional send carries) straight off the bytes, with a switch on
// each field's constructor. It never reports an error: on anything else
// (a state, a field past the spec's, an unusual constructor, a missing
// handle, anything malformed) it gives up, having consumed nothing, and
// ParseBody decodes the transfer with the general decoder, which
// accepts or refuses it as it always did (TestTransferFastIsGeneral).

// unmarshalFast decodes the transfer's list from r, whose descriptor
// has been read, into the zero t, its optional numbers pointing into
// room, and its payload (the rest of r) into t.Payload, and reports
// whether it did. When it did not, r is as it was and t and room hold
// anything.
func (t *Transfer) unmarshalFast(r *buffer.Buffer, room *transferRoom) bool {
	rest := r.Bytes()
	c, count, ok := fastList(&rest)
	if !ok {
		return false
	}
	handle := false
	for i := range count {
		if len(c) == 0 {
			return false
		}
		if c[0] == encoding.TypeCodeNull {
			c = c[1:]
			continue
		}
		switch i {
		case 0:
			t.Handle, ok = fastUint(&c)
			handle = true
		case 1:
			room.deliveryID, ok = fastUint(&c)
			t.DeliveryID = &room.deliveryID
		case 2:
			var tag []byte
			tag, ok = fastBinary(&c)
			t.DeliveryTag = append(room.tag[:0], tag...)
		case 3:
			room.messageFormat, ok = fastUint(&c)
			t.MessageFormat = &room.messageFormat
		case 4:
			t.Settled, ok = fastBool(&c)
		case 5:
			t.More, ok = fastBool(&c)
		case 6:
			if len(c) < 2 || c[0] != encoding.TypeCodeUbyte {
				return false
			}
			room.rcvSettleMode = ReceiverSettleMode(c[1])
			t.RcvSettleMode = &room.rcvSettleMode
			c = c[2:]
		case 8:
			t.Resume, ok = fastBool(&c)
		case 9:
			t.Aborted, ok = fastBool(&c)
		case 10:
			t.Batchable, ok = fastBool(&c)
		default: // 7, the delivery state, and fields past the spec's
			return false
		}
		if !ok {
			return false
		}
	}
	if len(c) != 0 || !handle {
		return false
	}
	if len(rest) > 0 {
		t.Payload = rest
	}
	r.Skip(r.Len())
	return true
}
