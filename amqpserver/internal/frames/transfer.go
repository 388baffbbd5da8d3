package frames

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// Flow updates session windows and, when Handle is set, link credit
// (§2.7.4).
type Flow struct {
	NextIncomingID *uint32 // absent until the sender's begin has been seen
	IncomingWindow uint32  // mandatory
	NextOutgoingID uint32  // mandatory
	OutgoingWindow uint32  // mandatory
	Handle         *uint32 // nil for a session-only flow
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
	Properties     encoding.Map
}

func (*Flow) frameType() Type { return TypeAMQP }

// MarshalAMQP implements [encoding.Marshaler].
func (fl *Flow) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeFlow)
	f.optUint(fl.NextIncomingID)
	f.uint(fl.IncomingWindow)
	f.uint(fl.NextOutgoingID)
	f.uint(fl.OutgoingWindow)
	f.optUint(fl.Handle)
	f.optUint(fl.DeliveryCount)
	f.optUint(fl.LinkCredit)
	f.optUint(fl.Available)
	f.flag(fl.Drain)
	f.flag(fl.Echo)
	if err := f.mapField(fl.Properties); err != nil {
		return err
	}
	f.end()
	return nil
}

func (fl *Flow) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "flow", 1<<1|1<<2|1<<3, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			fl.NextIncomingID, err = readOptUint(r)
		case 1:
			fl.IncomingWindow, err = encoding.ReadUint(r)
		case 2:
			fl.NextOutgoingID, err = encoding.ReadUint(r)
		case 3:
			fl.OutgoingWindow, err = encoding.ReadUint(r)
		case 4:
			fl.Handle, err = readOptUint(r)
		case 5:
			fl.DeliveryCount, err = readOptUint(r)
		case 6:
			fl.LinkCredit, err = readOptUint(r)
		case 7:
			fl.Available, err = readOptUint(r)
		case 8:
			fl.Drain, err = encoding.ReadBool(r)
		case 9:
			fl.Echo, err = encoding.ReadBool(r)
		case 10:
			fl.Properties, err = encoding.ReadMap(r)
		default:
			err = skip(r)
		}
		return err
	})
}

// Transfer carries (part of) a message on a link (§2.7.5).
//
// Payload is the message bytes carried by this frame; it follows the
// performative in the frame body and is not part of the performative's
// encoding, so [Transfer.MarshalAMQP] does not write it but [Write] does.
// When decoded by [ParseBody] or a [Reader], Payload aliases the frame's
// buffer, which the Reader allocates afresh for every frame.
type Transfer struct {
	Handle        uint32  // mandatory
	DeliveryID    *uint32 // required on the first transfer of a delivery
	DeliveryTag   []byte  // required on the first transfer of a delivery
	MessageFormat *uint32 // required on the first transfer; see MessageFormatBatch
	Settled       bool
	More          bool // more transfers of this delivery follow
	RcvSettleMode *ReceiverSettleMode
	State         DeliveryState
	Resume        bool
	Aborted       bool
	Batchable     bool

	Payload []byte
	// PayloadRest, when set, is written by [Write] right after Payload,
	// in the same frame: a sender's payload in two pieces (a delivery's
	// encoded sections and its body) written without joining them
	// first. Decoding never sets it.
	PayloadRest []byte
}

func (*Transfer) frameType() Type { return TypeAMQP }

// MarshalAMQP implements [encoding.Marshaler]. It writes the performative
// only, not the Payload.
func (t *Transfer) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeTransfer)
	f.uint(t.Handle)
	f.optUint(t.DeliveryID)
	f.binary(t.DeliveryTag)
	f.optUint(t.MessageFormat)
	f.flag(t.Settled)
	f.flag(t.More)
	f.optUbyte((*uint8)(t.RcvSettleMode))
	if err := f.marshaler(t.State); err != nil {
		return err
	}
	f.flag(t.Resume)
	f.flag(t.Aborted)
	f.flag(t.Batchable)
	f.end()
	return nil
}

// transferRoom holds the values a decoded [Transfer]'s optional fields
// point to.
type transferRoom struct {
	deliveryID, messageFormat uint32
	rcvSettleMode             ReceiverSettleMode
	tag                       [maxTagRoom]byte // the delivery-tag, if it fits
}

// maxTagRoom is the longest delivery-tag a transfer's room holds: the
// longest the spec allows (§2.8.7: at most 32 bytes). A longer one is
// decoded into an allocation of its own, as before.
const maxTagRoom = 32

// transferAlloc is a decoded [Transfer] allocated together with its
// transferRoom: decoding a transfer then allocates once, where each of
// its delivery-id, delivery-tag and message-format took an allocation of
// its own (three per message sent).
type transferAlloc struct {
	t    Transfer
	room transferRoom
}

func (t *Transfer) unmarshal(r *buffer.Buffer) error {
	return t.unmarshalInto(r, new(transferRoom))
}

// unmarshalInto decodes the transfer from r; its optional numbers point
// into room.
func (t *Transfer) unmarshalInto(r *buffer.Buffer, room *transferRoom) error {
	err := decodeFields(r, "transfer", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			t.Handle, err = encoding.ReadUint(r)
		case 1:
			t.DeliveryID, err = readUintInto(r, &room.deliveryID)
		case 2:
			t.DeliveryTag, err = encoding.AppendBinary(room.tag[:0], r)
		case 3:
			t.MessageFormat, err = readUintInto(r, &room.messageFormat)
		case 4:
			t.Settled, err = encoding.ReadBool(r)
		case 5:
			t.More, err = encoding.ReadBool(r)
		case 6:
			var m uint8
			if m, err = encoding.ReadUbyte(r); err == nil {
				room.rcvSettleMode = ReceiverSettleMode(m)
				t.RcvSettleMode = &room.rcvSettleMode
			}
		case 7:
			t.State, err = ReadDeliveryState(r)
		case 8:
			t.Resume, err = encoding.ReadBool(r)
		case 9:
			t.Aborted, err = encoding.ReadBool(r)
		case 10:
			t.Batchable, err = encoding.ReadBool(r)
		default:
			err = skip(r)
		}
		return err
	})
	if err != nil {
		return err
	}
	if r.Len() > 0 {
		t.Payload = r.Bytes()
		r.Skip(r.Len())
	}
	return nil
}

// Disposition reports settlement and delivery state for a range of
// deliveries (§2.7.6).
type Disposition struct {
	Role      Role    // mandatory: the role of the sender of this frame
	First     uint32  // mandatory: first delivery-id in the range
	Last      *uint32 // last delivery-id; nil means First
	Settled   bool
	State     DeliveryState
	Batchable bool
}

func (*Disposition) frameType() Type { return TypeAMQP }

// MarshalAMQP implements [encoding.Marshaler].
func (d *Disposition) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeDisposition)
	f.bool(bool(d.Role))
	f.uint(d.First)
	f.optUint(d.Last)
	f.flag(d.Settled)
	if err := f.marshaler(d.State); err != nil {
		return err
	}
	f.flag(d.Batchable)
	f.end()
	return nil
}

// dispositionAlloc is a decoded [Disposition] allocated together with
// the last delivery-id it points to.
type dispositionAlloc struct {
	d    Disposition
	last uint32
}

func (d *Disposition) unmarshal(r *buffer.Buffer) error {
	return d.unmarshalInto(r, new(uint32))
}

// unmarshalInto decodes the disposition from r; its last delivery-id,
// if present, is stored in *last.
func (d *Disposition) unmarshalInto(r *buffer.Buffer, last *uint32) error {
	return decodeFields(r, "disposition", 1<<0|1<<1, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			var role bool
			role, err = encoding.ReadBool(r)
			d.Role = Role(role)
		case 1:
			d.First, err = encoding.ReadUint(r)
		case 2:
			d.Last, err = readUintInto(r, last)
		case 3:
			d.Settled, err = encoding.ReadBool(r)
		case 4:
			d.State, err = ReadDeliveryState(r)
		case 5:
			d.Batchable, err = encoding.ReadBool(r)
		default:
			err = skip(r)
		}
		return err
	})
}
