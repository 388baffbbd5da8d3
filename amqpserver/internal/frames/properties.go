package frames

import (
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// DefaultPriority is the message priority when the header omits it.
const DefaultPriority uint8 = 4

// MessageHeader is the header section (§3.2.1).
type MessageHeader struct {
	Durable bool
	// Priority is decoded as [DefaultPriority] when absent and omitted from
	// the encoding when it equals it; set it explicitly when building a
	// header (the zero value 0 is the lowest priority).
	Priority      uint8
	TTL           uint32 // milliseconds; 0 means no TTL
	FirstAcquirer bool
	// DeliveryCount is the number of earlier unsuccessful delivery
	// attempts (Service Bus clients add one to it).
	DeliveryCount uint32
}

func (h *MessageHeader) marshal(w *buffer.Buffer) {
	f := beginComposite(w, codeMessageHeader)
	f.flag(h.Durable)
	if h.Priority == DefaultPriority {
		f.null()
	} else {
		f.ubyte(h.Priority)
	}
	f.uintDefault(h.TTL, 0)
	f.flag(h.FirstAcquirer)
	// Always explicit: rhea (the JS SDK) reads an absent delivery-count
	// as undefined rather than the default 0.
	f.uint(h.DeliveryCount)
	f.end()
}

func (h *MessageHeader) unmarshal(r *buffer.Buffer) error {
	h.Priority = DefaultPriority
	return decodeFields(r, "header", 0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			h.Durable, err = encoding.ReadBool(r)
		case 1:
			h.Priority, err = encoding.ReadUbyte(r)
		case 2:
			h.TTL, err = encoding.ReadUint(r)
		case 3:
			h.FirstAcquirer, err = encoding.ReadBool(r)
		case 4:
			h.DeliveryCount, err = encoding.ReadUint(r)
		default:
			err = skip(r)
		}
		return err
	})
}

// MessageProperties is the properties section (§3.2.4). Empty strings,
// nil slices and zero times are absent fields.
type MessageProperties struct {
	// MessageID is a ulong (uint64), [encoding.UUID], binary ([]byte) or
	// string; its AMQP type is preserved so replies can echo it.
	MessageID          any
	UserID             []byte
	To                 string
	Subject            string // Service Bus "Label"
	ReplyTo            string
	CorrelationID      any // same types as MessageID
	ContentType        encoding.Symbol
	ContentEncoding    encoding.Symbol
	AbsoluteExpiryTime time.Time
	CreationTime       time.Time
	GroupID            string  // Service Bus SessionId
	GroupSequence      *uint32 // nil when absent
	ReplyToGroupID     string  // Service Bus ReplyToSessionId
}

func (p *MessageProperties) marshal(w *buffer.Buffer) error {
	f := beginComposite(w, codeMessageProperties)
	if err := f.value(p.MessageID); err != nil {
		return err
	}
	f.binary(p.UserID)
	f.string(p.To)
	f.string(p.Subject)
	f.string(p.ReplyTo)
	if err := f.value(p.CorrelationID); err != nil {
		return err
	}
	f.symbol(p.ContentType)
	f.symbol(p.ContentEncoding)
	f.timestamp(p.AbsoluteExpiryTime)
	f.timestamp(p.CreationTime)
	f.string(p.GroupID)
	f.optUint(p.GroupSequence)
	f.string(p.ReplyToGroupID)
	f.end()
	return nil
}

func (p *MessageProperties) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "properties", 0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			p.MessageID, err = encoding.Unmarshal(r)
		case 1:
			p.UserID, err = encoding.ReadBinary(r)
		case 2:
			p.To, err = readAddress(r)
		case 3:
			p.Subject, err = encoding.ReadString(r)
		case 4:
			p.ReplyTo, err = readAddress(r)
		case 5:
			p.CorrelationID, err = encoding.Unmarshal(r)
		case 6:
			p.ContentType, err = encoding.ReadSymbol(r)
		case 7:
			p.ContentEncoding, err = encoding.ReadSymbol(r)
		case 8:
			p.AbsoluteExpiryTime, err = encoding.ReadTimestamp(r)
		case 9:
			p.CreationTime, err = encoding.ReadTimestamp(r)
		case 10:
			p.GroupID, err = encoding.ReadString(r)
		case 11:
			p.GroupSequence, err = readOptUint(r)
		case 12:
			p.ReplyToGroupID, err = readAddress(r)
		default:
			err = skip(r)
		}
		return err
	})
}
