package frames

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// Role is a link endpoint's role (§2.8.1): false for a sender, true for a
// receiver.
type Role bool

// Roles.
const (
	RoleSender   Role = false
	RoleReceiver Role = true
)

// SenderSettleMode is the settlement policy of a sender (§2.8.2).
type SenderSettleMode uint8

// Sender settle modes.
const (
	SenderSettleModeUnsettled SenderSettleMode = 0 // sender sends all deliveries unsettled
	SenderSettleModeSettled   SenderSettleMode = 1 // sender sends all deliveries settled
	SenderSettleModeMixed     SenderSettleMode = 2 // the default: either
)

// ReceiverSettleMode is the settlement policy of a receiver (§2.8.3).
type ReceiverSettleMode uint8

// Receiver settle modes.
const (
	ReceiverSettleModeFirst  ReceiverSettleMode = 0 // the default: settle first
	ReceiverSettleModeSecond ReceiverSettleMode = 1 // settle after the sender
)

// Attach attaches a link to a session (§2.7.3).
type Attach struct {
	Name   string // mandatory
	Handle uint32 // mandatory
	Role   Role   // mandatory

	SndSettleMode *SenderSettleMode   // nil means mixed
	RcvSettleMode *ReceiverSettleMode // nil means first

	Source *Source // nil is a null source (for example a refused attach)
	Target *Target // nil is a null target, or see Coordinator
	// Coordinator is set instead of Target when the link targets a
	// transaction coordinator (§4.5.1).
	Coordinator *Coordinator

	Unsettled            encoding.Map // delivery-tag (binary) → delivery state
	IncompleteUnsettled  bool
	InitialDeliveryCount *uint32 // mandatory for senders, absent for receivers
	MaxMessageSize       uint64  // 0 means no limit

	OfferedCapabilities []encoding.Symbol
	DesiredCapabilities []encoding.Symbol
	Properties          encoding.Map // symbol keys, e.g. com.microsoft:timeout
}

func (*Attach) frameType() Type { return TypeAMQP }

// SenderSettleMode returns the sender settle mode, applying the default.
func (a *Attach) SenderSettleMode() SenderSettleMode {
	if a.SndSettleMode == nil {
		return SenderSettleModeMixed
	}
	return *a.SndSettleMode
}

// ReceiverSettleMode returns the receiver settle mode, applying the default.
func (a *Attach) ReceiverSettleMode() ReceiverSettleMode {
	if a.RcvSettleMode == nil {
		return ReceiverSettleModeFirst
	}
	return *a.RcvSettleMode
}

// MarshalAMQP implements [encoding.Marshaler].
func (a *Attach) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeAttach)
	f.stringAlways(a.Name)
	f.uint(a.Handle)
	f.bool(bool(a.Role))
	f.optUbyte((*uint8)(a.SndSettleMode))
	f.optUbyte((*uint8)(a.RcvSettleMode))
	var src encoding.Marshaler
	if a.Source != nil {
		src = a.Source
	}
	if err := f.marshaler(src); err != nil {
		return err
	}
	var tgt encoding.Marshaler
	switch {
	case a.Coordinator != nil:
		tgt = a.Coordinator
	case a.Target != nil:
		tgt = a.Target
	}
	if err := f.marshaler(tgt); err != nil {
		return err
	}
	if err := f.mapField(a.Unsettled); err != nil {
		return err
	}
	f.flag(a.IncompleteUnsettled)
	f.optUint(a.InitialDeliveryCount)
	if a.MaxMessageSize == 0 {
		f.null()
	} else {
		f.ulong(a.MaxMessageSize)
	}
	f.symbols(a.OfferedCapabilities)
	f.symbols(a.DesiredCapabilities)
	if err := f.mapField(a.Properties); err != nil {
		return err
	}
	f.end()
	return nil
}

func (a *Attach) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "attach", 1<<0|1<<1|1<<2, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			a.Name, err = encoding.ReadString(r)
		case 1:
			a.Handle, err = encoding.ReadUint(r)
		case 2:
			var role bool
			role, err = encoding.ReadBool(r)
			a.Role = Role(role)
		case 3:
			var m *uint8
			m, err = readOptUbyte(r)
			a.SndSettleMode = (*SenderSettleMode)(m)
		case 4:
			var m *uint8
			m, err = readOptUbyte(r)
			a.RcvSettleMode = (*ReceiverSettleMode)(m)
		case 5:
			a.Source = new(Source)
			err = a.Source.unmarshalDescribed(r)
		case 6:
			a.Target, a.Coordinator, err = readTarget(r)
		case 7:
			a.Unsettled, err = encoding.ReadMap(r)
		case 8:
			a.IncompleteUnsettled, err = encoding.ReadBool(r)
		case 9:
			a.InitialDeliveryCount, err = readOptUint(r)
		case 10:
			a.MaxMessageSize, err = encoding.ReadUlong(r)
		case 11:
			a.OfferedCapabilities, err = encoding.ReadSymbols(r)
		case 12:
			a.DesiredCapabilities, err = encoding.ReadSymbols(r)
		case 13:
			a.Properties, err = encoding.ReadMap(r)
		default:
			err = skip(r)
		}
		return err
	})
}

// Detach detaches a link (§2.7.6).
type Detach struct {
	Handle uint32 // mandatory
	Closed bool   // true closes the link rather than just detaching it
	Error  *Error
}

func (*Detach) frameType() Type { return TypeAMQP }

// MarshalAMQP implements [encoding.Marshaler].
func (d *Detach) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeDetach)
	f.uint(d.Handle)
	f.flag(d.Closed)
	if err := f.marshaler(errorOrNil(d.Error)); err != nil {
		return err
	}
	f.end()
	return nil
}

func (d *Detach) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "detach", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			d.Handle, err = encoding.ReadUint(r)
		case 1:
			d.Closed, err = encoding.ReadBool(r)
		case 2:
			d.Error, err = readError(r)
		default:
			err = skip(r)
		}
		return err
	})
}
