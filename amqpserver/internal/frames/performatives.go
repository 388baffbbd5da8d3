package frames

import (
	"math"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// Open negotiates connection parameters (§2.7.1). It is the first frame on
// channel 0 in each direction.
type Open struct {
	ContainerID  string // mandatory
	Hostname     string
	MaxFrameSize uint32 // default and zero value: 4294967295 (no limit beyond the protocol's)
	ChannelMax   uint16 // highest channel number; decoded as 65535 when absent
	IdleTimeOut  uint32 // milliseconds; 0 means no idle timeout

	OutgoingLocales     []encoding.Symbol
	IncomingLocales     []encoding.Symbol
	OfferedCapabilities []encoding.Symbol
	DesiredCapabilities []encoding.Symbol
	Properties          encoding.Map // symbol keys
}

func (*Open) frameType() Type { return TypeAMQP }

// MarshalAMQP implements [encoding.Marshaler].
func (o *Open) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeOpen)
	f.stringAlways(o.ContainerID)
	f.string(o.Hostname)
	if o.MaxFrameSize == 0 {
		f.null()
	} else {
		f.uintDefault(o.MaxFrameSize, math.MaxUint32)
	}
	if o.ChannelMax == math.MaxUint16 {
		f.null()
	} else {
		f.ushort(o.ChannelMax)
	}
	f.uintDefault(o.IdleTimeOut, 0)
	f.symbols(o.OutgoingLocales)
	f.symbols(o.IncomingLocales)
	f.symbols(o.OfferedCapabilities)
	f.symbols(o.DesiredCapabilities)
	if err := f.mapField(o.Properties); err != nil {
		return err
	}
	f.end()
	return nil
}

func (o *Open) unmarshal(r *buffer.Buffer) error {
	o.MaxFrameSize = math.MaxUint32
	o.ChannelMax = math.MaxUint16
	return decodeFields(r, "open", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			o.ContainerID, err = encoding.ReadString(r)
		case 1:
			o.Hostname, err = encoding.ReadString(r)
		case 2:
			o.MaxFrameSize, err = encoding.ReadUint(r)
		case 3:
			o.ChannelMax, err = encoding.ReadUshort(r)
		case 4:
			o.IdleTimeOut, err = encoding.ReadUint(r)
		case 5:
			o.OutgoingLocales, err = encoding.ReadSymbols(r)
		case 6:
			o.IncomingLocales, err = encoding.ReadSymbols(r)
		case 7:
			o.OfferedCapabilities, err = encoding.ReadSymbols(r)
		case 8:
			o.DesiredCapabilities, err = encoding.ReadSymbols(r)
		case 9:
			o.Properties, err = encoding.ReadMap(r)
		default:
			err = skip(r)
		}
		return err
	})
}

// Begin starts a session on a channel (§2.7.2).
type Begin struct {
	RemoteChannel  *uint16 // the peer's channel when answering its begin
	NextOutgoingID uint32  // mandatory
	IncomingWindow uint32  // mandatory
	OutgoingWindow uint32  // mandatory
	// HandleMax is the highest link handle; decoded as 4294967295 when
	// absent. Set it explicitly when encoding: the zero value limits the
	// peer to a single link handle 0.
	HandleMax uint32

	OfferedCapabilities []encoding.Symbol
	DesiredCapabilities []encoding.Symbol
	Properties          encoding.Map
}

func (*Begin) frameType() Type { return TypeAMQP }

// MarshalAMQP implements [encoding.Marshaler].
func (b *Begin) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeBegin)
	if b.RemoteChannel == nil {
		f.null()
	} else {
		f.ushort(*b.RemoteChannel)
	}
	f.uint(b.NextOutgoingID)
	f.uint(b.IncomingWindow)
	f.uint(b.OutgoingWindow)
	f.uintDefault(b.HandleMax, math.MaxUint32)
	f.symbols(b.OfferedCapabilities)
	f.symbols(b.DesiredCapabilities)
	if err := f.mapField(b.Properties); err != nil {
		return err
	}
	f.end()
	return nil
}

func (b *Begin) unmarshal(r *buffer.Buffer) error {
	b.HandleMax = math.MaxUint32
	return decodeFields(r, "begin", 1<<1|1<<2|1<<3, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			var ch uint16
			ch, err = encoding.ReadUshort(r)
			b.RemoteChannel = &ch
		case 1:
			b.NextOutgoingID, err = encoding.ReadUint(r)
		case 2:
			b.IncomingWindow, err = encoding.ReadUint(r)
		case 3:
			b.OutgoingWindow, err = encoding.ReadUint(r)
		case 4:
			b.HandleMax, err = encoding.ReadUint(r)
		case 5:
			b.OfferedCapabilities, err = encoding.ReadSymbols(r)
		case 6:
			b.DesiredCapabilities, err = encoding.ReadSymbols(r)
		case 7:
			b.Properties, err = encoding.ReadMap(r)
		default:
			err = skip(r)
		}
		return err
	})
}

// End ends a session (§2.7.7).
type End struct {
	Error *Error // why the session ended; nil for a clean end
}

func (*End) frameType() Type { return TypeAMQP }

// MarshalAMQP implements [encoding.Marshaler].
func (e *End) MarshalAMQP(w *buffer.Buffer) error {
	return marshalErrorOnly(w, codeEnd, e.Error)
}

func (e *End) unmarshal(r *buffer.Buffer) error {
	return unmarshalErrorOnly(r, "end", &e.Error)
}

// Close closes the connection (§2.7.8).
type Close struct {
	Error *Error // why the connection closed; nil for a clean close
}

func (*Close) frameType() Type { return TypeAMQP }

// MarshalAMQP implements [encoding.Marshaler].
func (c *Close) MarshalAMQP(w *buffer.Buffer) error {
	return marshalErrorOnly(w, codeClose, c.Error)
}

func (c *Close) unmarshal(r *buffer.Buffer) error {
	return unmarshalErrorOnly(r, "close", &c.Error)
}

// marshalErrorOnly encodes end and close, whose only field is an error.
func marshalErrorOnly(w *buffer.Buffer, code uint64, e *Error) error {
	f := beginComposite(w, code)
	if err := f.marshaler(errorOrNil(e)); err != nil {
		return err
	}
	f.end()
	return nil
}

func unmarshalErrorOnly(r *buffer.Buffer, name string, e **Error) error {
	return decodeFields(r, name, 0, func(i int, r *buffer.Buffer) error {
		if i == 0 {
			var err error
			*e, err = readError(r)
			return err
		}
		return skip(r)
	})
}
