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

// unmarshalFast is the disposition's fast path, as the transfer's: a
// receiver's settlements (an accepted or released outcome, or none) read
// straight off the bytes. On any other state (rejected, modified, a
// transactional state), a field past the spec's, an unusual constructor,
// a missing role or first delivery-id, or anything malformed it gives
// up having consumed nothing, and ParseBody decodes the disposition with
// the general decoder (TestDispositionFastIsGeneral).
func (d *Disposition) unmarshalFast(r *buffer.Buffer, last *uint32) bool {
	c := cursor{b: r.Bytes()}
	l, count, ok := c.list()
	if !ok || count < 2 {
		return false // no role or first delivery-id
	}
	for i := range count {
		if null, ok := l.null(); !ok || (null && i < 2) {
			return false
		} else if null {
			continue
		}
		switch i {
		case 0:
			var role bool
			role, ok = l.bool()
			d.Role = Role(role)
		case 1:
			d.First, ok = l.uint()
		case 2:
			*last, ok = l.uint()
			d.Last = last
		case 3:
			d.Settled, ok = l.bool()
		case 4:
			d.State, ok = l.outcome()
		case 5:
			d.Batchable, ok = l.bool()
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	if !l.done() || !c.done() {
		return false
	}
	r.Skip(r.Len())
	return true
}

// outcome reads an accepted or released outcome without fields, as
// [ReadDeliveryState] does; any other state is left to it.
func (c *cursor) outcome() (DeliveryState, bool) {
	code, ok := c.descriptor()
	if !ok {
		return nil, false
	}
	if fields, count, ok := c.list(); !ok || count != 0 || !fields.done() {
		return nil, false
	}
	switch code {
	case codeAccepted:
		return &Accepted{}, true
	case codeReleased:
		return &Released{}, true
	}
	return nil, false
}
