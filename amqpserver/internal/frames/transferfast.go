package frames

import "github.com/omnibusmq/omnibus/amqpserver/internal/buffer"

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
	c := cursor{b: r.Bytes()}
	l, count, ok := c.list()
	if !ok || count == 0 {
		return false // no handle
	}
	// The handle, mandatory.
	if null, ok := l.null(); !ok || null {
		return false
	}
	if t.Handle, ok = l.uint(); !ok {
		return false
	}
	for i := 1; i < count; i++ {
		if null, ok := l.null(); !ok {
			return false
		} else if null {
			continue
		}
		switch i {
		case 1:
			room.deliveryID, ok = l.uint()
			t.DeliveryID = &room.deliveryID
		case 2:
			var tag []byte
			tag, ok = l.binary()
			t.DeliveryTag = append(room.tag[:0], tag...)
		case 3:
			room.messageFormat, ok = l.uint()
			t.MessageFormat = &room.messageFormat
		case 4:
			t.Settled, ok = l.bool()
		case 5:
			t.More, ok = l.bool()
		case 6:
			var m uint8
			m, ok = l.ubyte()
			room.rcvSettleMode = ReceiverSettleMode(m)
			t.RcvSettleMode = &room.rcvSettleMode
		case 8:
			t.Resume, ok = l.bool()
		case 9:
			t.Aborted, ok = l.bool()
		case 10:
			t.Batchable, ok = l.bool()
		default: // 7, the delivery state, and fields past the spec's
			return false
		}
		if !ok {
			return false
		}
	}
	if !l.done() {
		return false
	}
	if c.i < len(c.b) {
		t.Payload = c.b[c.i:]
	}
	r.Skip(r.Len())
	return true
}
