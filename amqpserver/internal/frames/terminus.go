package frames

import (
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// Durability values for a terminus (§3.5.5).
const (
	DurabilityNone          uint32 = 0
	DurabilityConfiguration uint32 = 1
	DurabilityUnsettled     uint32 = 2
)

// Expiry policies for a terminus (§3.5.6). An empty ExpiryPolicy field
// means the default, ExpirySessionEnd.
const (
	ExpiryLinkDetach      encoding.Symbol = "link-detach"
	ExpirySessionEnd      encoding.Symbol = "session-end"
	ExpiryConnectionClose encoding.Symbol = "connection-close"
	ExpiryNever           encoding.Symbol = "never"
)

// Source is the source terminus of a link (§3.5.3). For a broker, the
// source of a receiving client's link names the queue or subscription to
// read from.
type Source struct {
	Address               string
	Durable               uint32 // a Durability… constant
	ExpiryPolicy          encoding.Symbol
	Timeout               uint32 // seconds
	Dynamic               bool
	DynamicNodeProperties encoding.Map
	DistributionMode      encoding.Symbol // "move" or "copy"
	// Filter is the filter-set: symbol keys, values normally
	// [encoding.Described]. It is kept verbatim so the broker can echo
	// filters (for example the Service Bus session filter) in the exact
	// form the client sent.
	Filter         encoding.Map
	DefaultOutcome DeliveryState
	Outcomes       []encoding.Symbol
	Capabilities   []encoding.Symbol
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *Source) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeSource)
	f.string(s.Address)
	f.uintDefault(s.Durable, 0)
	f.symbol(s.ExpiryPolicy)
	f.uintDefault(s.Timeout, 0)
	f.flag(s.Dynamic)
	if err := f.mapField(s.DynamicNodeProperties); err != nil {
		return err
	}
	f.symbol(s.DistributionMode)
	if err := f.mapField(s.Filter); err != nil {
		return err
	}
	if err := f.marshaler(s.DefaultOutcome); err != nil {
		return err
	}
	f.symbols(s.Outcomes)
	f.symbols(s.Capabilities)
	f.end()
	return nil
}

func (s *Source) unmarshalDescribed(r *buffer.Buffer) error {
	if err := expectDescriptor(r, codeSource, "source"); err != nil {
		return err
	}
	return decodeFields(r, "source", 0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			s.Address, err = readAddress(r)
		case 1:
			s.Durable, err = encoding.ReadUint(r)
		case 2:
			s.ExpiryPolicy, err = encoding.ReadSymbol(r)
		case 3:
			s.Timeout, err = encoding.ReadUint(r)
		case 4:
			s.Dynamic, err = encoding.ReadBool(r)
		case 5:
			s.DynamicNodeProperties, err = encoding.ReadMap(r)
		case 6:
			s.DistributionMode, err = encoding.ReadSymbol(r)
		case 7:
			s.Filter, err = encoding.ReadMap(r)
		case 8:
			s.DefaultOutcome, err = ReadDeliveryState(r)
		case 9:
			s.Outcomes, err = encoding.ReadSymbols(r)
		case 10:
			s.Capabilities, err = encoding.ReadSymbols(r)
		default:
			err = skip(r)
		}
		return err
	})
}

// Target is the target terminus of a link (§3.5.4). For a broker, the
// target of a sending client's link names the queue or topic to write to.
type Target struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          encoding.Symbol
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties encoding.Map
	Capabilities          []encoding.Symbol
}

// MarshalAMQP implements [encoding.Marshaler].
func (t *Target) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeTarget)
	f.string(t.Address)
	f.uintDefault(t.Durable, 0)
	f.symbol(t.ExpiryPolicy)
	f.uintDefault(t.Timeout, 0)
	f.flag(t.Dynamic)
	if err := f.mapField(t.DynamicNodeProperties); err != nil {
		return err
	}
	f.symbols(t.Capabilities)
	f.end()
	return nil
}

func (t *Target) unmarshalFields(r *buffer.Buffer) error {
	return decodeFields(r, "target", 0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			t.Address, err = readAddress(r)
		case 1:
			t.Durable, err = encoding.ReadUint(r)
		case 2:
			t.ExpiryPolicy, err = encoding.ReadSymbol(r)
		case 3:
			t.Timeout, err = encoding.ReadUint(r)
		case 4:
			t.Dynamic, err = encoding.ReadBool(r)
		case 5:
			t.DynamicNodeProperties, err = encoding.ReadMap(r)
		case 6:
			t.Capabilities, err = encoding.ReadSymbols(r)
		default:
			err = skip(r)
		}
		return err
	})
}

// Coordinator is the target of a link to a transaction coordinator
// (§4.5.1).
type Coordinator struct {
	Capabilities []encoding.Symbol // e.g. amqp:local-transactions
}

// MarshalAMQP implements [encoding.Marshaler].
func (c *Coordinator) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeCoordinator)
	f.symbols(c.Capabilities)
	f.end()
	return nil
}

// readTarget decodes the target field of an attach, which is either a
// target or a coordinator.
func readTarget(r *buffer.Buffer) (*Target, *Coordinator, error) {
	code, err := encoding.ReadDescriptor(r)
	if err != nil {
		return nil, nil, fmt.Errorf("target: %w", err)
	}
	switch code {
	case codeTarget:
		t := new(Target)
		return t, nil, t.unmarshalFields(r)
	case codeCoordinator:
		c := new(Coordinator)
		err := decodeFields(r, "coordinator", 0, func(i int, r *buffer.Buffer) (err error) {
			if i == 0 {
				c.Capabilities, err = encoding.ReadSymbols(r)
				return err
			}
			return skip(r)
		})
		return nil, c, err
	}
	return nil, nil, fmt.Errorf("%w: descriptor 0x%x where target expected", ErrMalformed, code)
}

// readAddress decodes a terminus address. The spec types it as "*"
// (any address type); every peer in practice sends a string, and some send
// a symbol, which is accepted too.
func readAddress(r *buffer.Buffer) (string, error) {
	code, err := encoding.PeekCode(r)
	if err != nil {
		return "", err
	}
	if code == encoding.TypeCodeSym8 || code == encoding.TypeCodeSym32 {
		s, err := encoding.ReadSymbol(r)
		return string(s), err
	}
	return encoding.ReadString(r)
}
