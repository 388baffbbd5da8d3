package frames

import (
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// DeliveryState is the state of a delivery carried by transfer and
// disposition (§2.7.5, §3.4): [*Received], one of the outcomes
// [*Accepted], [*Rejected], [*Released], [*Modified], or, for
// transactions, [*Declared] and [*TransactionalState].
type DeliveryState interface {
	encoding.Marshaler
	deliveryState()
}

// Received is the non-terminal state reporting how much of a delivery has
// arrived (§3.4.1).
type Received struct {
	SectionNumber uint32 // mandatory
	SectionOffset uint64 // mandatory
}

// Accepted is the outcome for a successfully processed message (§3.4.2).
// For Service Bus it completes a locked message.
type Accepted struct{}

// Rejected is the outcome for an invalid message (§3.4.3). Service Bus
// clients use it to dead-letter, putting the reason in Error.Info.
type Rejected struct {
	Error *Error
}

// Released is the outcome for a message that was not processed and may be
// redelivered (§3.4.4).
type Released struct{}

// Modified is the outcome for a message that was not processed but whose
// annotations change (§3.4.5). Service Bus clients use it to abandon
// (delivery-failed) and to defer (undeliverable-here).
type Modified struct {
	DeliveryFailed     bool
	UndeliverableHere  bool
	MessageAnnotations encoding.Map // symbol keys
}

// Declared is the outcome of a successful transaction declare (§4.5.4).
type Declared struct {
	TxnID []byte // mandatory
}

// TransactionalState is the state of a delivery inside a transaction
// (§4.5.5).
type TransactionalState struct {
	TxnID   []byte        // mandatory
	Outcome DeliveryState // the provisional outcome, may be nil
}

func (*Received) deliveryState()           {}
func (*Accepted) deliveryState()           {}
func (*Rejected) deliveryState()           {}
func (*Released) deliveryState()           {}
func (*Modified) deliveryState()           {}
func (*Declared) deliveryState()           {}
func (*TransactionalState) deliveryState() {}

// MarshalAMQP implements [encoding.Marshaler]. A nil receiver encodes as
// the zero value, as for every delivery state.
func (s *Received) MarshalAMQP(w *buffer.Buffer) error {
	if s == nil {
		s = &Received{}
	}
	f := beginComposite(w, codeReceived)
	f.uint(s.SectionNumber)
	f.ulong(s.SectionOffset)
	f.end()
	return nil
}

// MarshalAMQP implements [encoding.Marshaler].
func (*Accepted) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeAccepted)
	f.end()
	return nil
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *Rejected) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeRejected)
	if s != nil {
		if err := f.marshaler(errorOrNil(s.Error)); err != nil {
			return err
		}
	}
	f.end()
	return nil
}

// MarshalAMQP implements [encoding.Marshaler].
func (*Released) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeReleased)
	f.end()
	return nil
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *Modified) MarshalAMQP(w *buffer.Buffer) error {
	if s == nil {
		s = &Modified{}
	}
	f := beginComposite(w, codeModified)
	f.flag(s.DeliveryFailed)
	f.flag(s.UndeliverableHere)
	if err := f.mapField(s.MessageAnnotations); err != nil {
		return err
	}
	f.end()
	return nil
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *Declared) MarshalAMQP(w *buffer.Buffer) error {
	if s == nil {
		s = &Declared{}
	}
	f := beginComposite(w, codeDeclared)
	f.binaryAlways(s.TxnID)
	f.end()
	return nil
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *TransactionalState) MarshalAMQP(w *buffer.Buffer) error {
	if s == nil {
		s = &TransactionalState{}
	}
	f := beginComposite(w, codeTransactionalState)
	f.binaryAlways(s.TxnID)
	if err := f.marshaler(s.Outcome); err != nil {
		return err
	}
	f.end()
	return nil
}

// ReadDeliveryState decodes a delivery state, descriptor included. A null
// yields nil.
func ReadDeliveryState(r *buffer.Buffer) (DeliveryState, error) {
	if c, err := encoding.PeekCode(r); err == nil && c == encoding.TypeCodeNull {
		r.Skip(1)
		return nil, nil
	}
	code, err := encoding.ReadDescriptor(r)
	if err != nil {
		return nil, fmt.Errorf("delivery state: %w", err)
	}
	switch code {
	case codeReceived:
		s := new(Received)
		return s, decodeFields(r, "received", 1<<0|1<<1, func(i int, r *buffer.Buffer) (err error) {
			switch i {
			case 0:
				s.SectionNumber, err = encoding.ReadUint(r)
			case 1:
				s.SectionOffset, err = encoding.ReadUlong(r)
			default:
				err = skip(r)
			}
			return err
		})
	case codeAccepted:
		return &Accepted{}, decodeFields(r, "accepted", 0, skipField)
	case codeReleased:
		return &Released{}, decodeFields(r, "released", 0, skipField)
	case codeRejected:
		s := new(Rejected)
		return s, decodeFields(r, "rejected", 0, func(i int, r *buffer.Buffer) (err error) {
			if i == 0 {
				s.Error, err = readError(r)
				return err
			}
			return skip(r)
		})
	case codeModified:
		s := new(Modified)
		return s, decodeFields(r, "modified", 0, func(i int, r *buffer.Buffer) (err error) {
			switch i {
			case 0:
				s.DeliveryFailed, err = encoding.ReadBool(r)
			case 1:
				s.UndeliverableHere, err = encoding.ReadBool(r)
			case 2:
				s.MessageAnnotations, err = encoding.ReadMap(r)
			default:
				err = skip(r)
			}
			return err
		})
	case codeDeclared:
		s := new(Declared)
		return s, decodeFields(r, "declared", 1<<0, func(i int, r *buffer.Buffer) (err error) {
			if i == 0 {
				s.TxnID, err = encoding.ReadBinary(r)
				return err
			}
			return skip(r)
		})
	case codeTransactionalState:
		s := new(TransactionalState)
		return s, decodeFields(r, "transactional-state", 1<<0, func(i int, r *buffer.Buffer) (err error) {
			switch i {
			case 0:
				s.TxnID, err = encoding.ReadBinary(r)
			case 1:
				s.Outcome, err = ReadDeliveryState(r)
			default:
				err = skip(r)
			}
			return err
		})
	}
	return nil, fmt.Errorf("%w: descriptor 0x%x is not a delivery state", ErrMalformed, code)
}

// skipField is a decodeFields callback for types with no fields.
func skipField(_ int, r *buffer.Buffer) error { return skip(r) }
