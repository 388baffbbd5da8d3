package frames

import (
	"fmt"
	"slices"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// MessageFormatBatch is the transfer message-format Service Bus clients use
// for a batch: the body is a sequence of data sections, each holding one
// complete encoded message. See [SplitBatch].
const MessageFormatBatch uint32 = 0x80013700

// BodyKind says which kind of body sections a [Message] carries (§3.2).
type BodyKind uint8

// Body kinds.
const (
	BodyNone     BodyKind = iota // no body section
	BodyData                     // one or more data sections
	BodyValue                    // exactly one amqp-value section
	BodySequence                 // one or more amqp-sequence sections
)

// Message is an annotated AMQP message (part 3, §3.2): the sections in wire
// order. Nil fields are absent sections.
//
// The body is available both decoded (Data, Value or Sequence, per
// BodyKind) and verbatim in RawBody, the encoded body sections exactly as
// received. A broker stores RawBody and re-emits it untouched while
// rewriting the header and annotations.
type Message struct {
	Header              *MessageHeader
	DeliveryAnnotations encoding.Map // symbol (or ulong) keys
	// RawDeliveryAnnotations, when DeliveryAnnotations is nil, is the
	// encoded map of the delivery-annotations section, which
	// [Message.MarshalAMQP] writes verbatim (as RawMessageAnnotations).
	RawDeliveryAnnotations []byte
	MessageAnnotations     encoding.Map // symbol (or ulong) keys, x-opt-…
	// RawMessageAnnotations, when MessageAnnotations is nil, is the
	// encoded map of the message-annotations section, which
	// [Message.MarshalAMQP] writes verbatim (a broker writes its
	// annotations' typed values straight into it, boxing none).
	RawMessageAnnotations []byte
	Properties            *MessageProperties
	ApplicationProperties encoding.Map // string keys, in wire order
	// RawApplicationProperties is, in a message decoded for storing
	// ([UnmarshalMessageSharing], [SplitBatch]), the encoded value of its
	// application-properties section (a map, or null) aliasing the input,
	// and ApplicationProperties is then nil: the broker decodes it once,
	// into its own form ([Message.DecodeApplicationProperties]), rather
	// than into a Map first. Structure and lengths are checked here, the
	// values by that decode. [Message.MarshalAMQP] writes it verbatim
	// when ApplicationProperties is nil.
	RawApplicationProperties []byte

	// BodyKind selects the body sections that [Message.MarshalAMQP] writes
	// when RawBody is nil. BodyNone with a non-nil Data, Sequence or Value
	// picks that kind.
	BodyKind BodyKind
	Data     [][]byte // data sections; alias RawBody after decoding
	Value    any      // the amqp-value section
	Sequence [][]any  // amqp-sequence sections

	// RawBody holds the encoded body sections. When non-nil,
	// [Message.MarshalAMQP] writes it verbatim instead of Data, Value or
	// Sequence. [UnmarshalMessage] always sets it (to nil if there is no
	// body).
	RawBody []byte

	Footer encoding.Map
}

// section order, used to reject sections that appear out of order.
func sectionRank(code uint64) int {
	switch code {
	case codeMessageHeader:
		return 0
	case codeDeliveryAnnotations:
		return 1
	case codeMessageAnnotations:
		return 2
	case codeMessageProperties:
		return 3
	case codeApplicationProperties:
		return 4
	case codeData, codeAMQPSequence, codeAMQPValue:
		return 5
	case codeFooter:
		return 6
	}
	return -1
}

// UnmarshalMessage decodes an encoded message, such as the payload of a
// complete delivery (all its transfers concatenated). The result does not
// alias p.
func UnmarshalMessage(p []byte) (*Message, error) { return unmarshalMessage(p, false) }

// UnmarshalMessageSharing is UnmarshalMessage for a broker that stores the
// message and owns p, never changing it:
//
//   - the body (RawBody and Data) aliases p instead of being copied, which
//     saves a copy of every message a client sends;
//   - amqp-value and amqp-sequence sections are checked as thoroughly as
//     UnmarshalMessage checks them, but not decoded: BodyKind is set and
//     Value and Sequence stay nil. A body the broker never reads then costs
//     no memory beyond p, where decoding a list of nulls takes 16 bytes per
//     byte.
func UnmarshalMessageSharing(p []byte) (*Message, error) { return unmarshalMessage(p, true) }

// unmarshalMessage decodes p; with store set it shares the body with p and
// only validates amqp-value and amqp-sequence sections.
func unmarshalMessage(p []byte, store bool) (*Message, error) {
	m := new(Message)
	if err := m.unmarshal(p, store, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// StoreDecoder decodes the messages a broker stores as
// [UnmarshalMessageSharing] does, one at a time into one Message whose
// header, properties and first data section it keeps room for: a send
// then allocates none of those structures (four allocations of each
// message a client sends). The zero value is ready to use; it is not
// safe for concurrent use.
type StoreDecoder struct {
	m     Message
	hdr   MessageHeader
	props MessageProperties
	data  [1][]byte
	r     buffer.Buffer // the read cursor over the input
	used  bool          // a Decode since the last Clear: what Clear has to clear
}

// Decode decodes p into the decoder's Message, which is valid (and
// aliases p, as UnmarshalMessageSharing's does) until the next Decode or
// Clear. It takes the message apart in one pass where it can (see
// storefast.go) and with the general decoder where it cannot: the result
// and the errors are those of UnmarshalMessageSharing either way.
func (d *StoreDecoder) Decode(p []byte) (*Message, error) {
	d.Clear()
	d.used = true
	if d.unmarshalFast(p) {
		return &d.m, nil
	}
	d.Clear()
	d.used = true
	if err := d.m.unmarshal(p, true, d); err != nil {
		d.Clear()
		return nil, err
	}
	return &d.m, nil
}

// Clear lets go of the last message decoded (and the input it aliases).
// A decoder cleared since its last Decode is left as it is, and the
// properties' room (half the decoder) only when a Decode used it: a
// send's decoder is cleared once after its Decode, which then finds it
// clear (zeroing it twice, with the write barriers of a structure of
// pointers, was 250 instructions of every send).
func (d *StoreDecoder) Clear() {
	if !d.used {
		return
	}
	if d.m.Properties != nil {
		d.props = MessageProperties{}
	}
	d.m, d.hdr, d.data, d.r, d.used = Message{}, MessageHeader{}, [1][]byte{}, buffer.Buffer{}, false
}

// unmarshal decodes p into the zero Message m, its header, properties and
// first data section into room's when room is not nil.
func (m *Message) unmarshal(p []byte, store bool, room *StoreDecoder) error {
	var r *buffer.Buffer
	if room != nil {
		room.r = buffer.Make(p)
		r = &room.r
	} else {
		r = buffer.New(p)
	}
	last := -1
	bodyStart, bodyEnd := -1, -1
	for r.Len() > 0 {
		offset := len(p) - r.Len()
		code, err := encoding.ReadDescriptor(r)
		if err != nil {
			return fmt.Errorf("message section at %d: %w", offset, err)
		}
		rank := sectionRank(code)
		if rank < 0 {
			return fmt.Errorf("%w: unknown message section 0x%x", ErrMalformed, code)
		}
		if rank < last || (rank == last && rank != 5) {
			return fmt.Errorf("%w: message section 0x%x out of order", ErrMalformed, code)
		}
		last = rank
		switch code {
		case codeMessageHeader:
			if room != nil {
				m.Header = &room.hdr
			} else {
				m.Header = new(MessageHeader)
			}
			err = m.Header.unmarshal(r)
		case codeDeliveryAnnotations:
			m.DeliveryAnnotations, err = readSectionMap(r)
		case codeMessageAnnotations:
			m.MessageAnnotations, err = readSectionMap(r)
		case codeMessageProperties:
			if room != nil {
				m.Properties = &room.props
			} else {
				m.Properties = new(MessageProperties)
			}
			err = m.Properties.unmarshal(r)
		case codeApplicationProperties:
			if store {
				m.RawApplicationProperties, err = encoding.SkipRaw(r)
				break
			}
			m.ApplicationProperties, err = readSectionMap(r)
		case codeData, codeAMQPSequence, codeAMQPValue:
			if bodyStart < 0 {
				bodyStart = offset
			}
			err = encoding.Skip(r)
			bodyEnd = len(p) - r.Len()
		case codeFooter:
			m.Footer, err = readSectionMap(r)
		}
		if err != nil {
			return fmt.Errorf("message section 0x%x: %w", code, err)
		}
	}
	if bodyStart >= 0 {
		m.RawBody = p[bodyStart:bodyEnd:bodyEnd]
		if !store {
			m.RawBody = append([]byte(nil), m.RawBody...)
		}
		if room != nil {
			m.Data = room.data[:0]
		}
		if err := m.decodeBody(!store); err != nil {
			return err
		}
		if len(m.Data) == 0 {
			m.Data = nil // no data section: as without room
		}
	}
	return nil
}

// DecodeApplicationProperties decodes RawApplicationProperties into sink
// (see [encoding.ReadMapInto]): the same checks, errors and allocation
// budget as the application properties of [UnmarshalMessage]. A message
// without the section tells sink nothing.
func (m *Message) DecodeApplicationProperties(sink encoding.MapSink) error {
	if m.RawApplicationProperties == nil {
		return nil
	}
	if err := encoding.ReadMapInto(buffer.New(m.RawApplicationProperties), sink); err != nil {
		return fmt.Errorf("message section 0x%x: %w", codeApplicationProperties, err)
	}
	return nil
}

// readSectionMap reads the map of an annotations, application-properties
// or footer section. A null value is allowed and yields an empty Map so the
// section is still present.
func readSectionMap(r *buffer.Buffer) (encoding.Map, error) {
	m, err := encoding.ReadMap(r)
	if err == nil && m == nil {
		m = encoding.Map{}
	}
	return m, err
}

// decodeBody fills BodyKind, Data and, with values set, Value and Sequence
// from RawBody; without values it only validates amqp-value and
// amqp-sequence sections. Data sections alias RawBody.
func (m *Message) decodeBody(values bool) error {
	r := buffer.New(m.RawBody)
	for r.Len() > 0 {
		code, err := encoding.ReadDescriptor(r)
		if err != nil {
			return err
		}
		var kind BodyKind
		switch code {
		case codeData:
			kind = BodyData
			c, err := encoding.PeekCode(r)
			if err != nil {
				return err
			}
			var p []byte
			if c != encoding.TypeCodeVbin8 && c != encoding.TypeCodeVbin32 {
				return fmt.Errorf("%w: data section holds constructor 0x%02x", ErrMalformed, c)
			}
			raw, err := encoding.SkipRaw(r) // aliases RawBody
			if err != nil {
				return err
			}
			if c == encoding.TypeCodeVbin8 {
				p = raw[2:]
			} else {
				p = raw[5:]
			}
			m.Data = append(m.Data, p)
		case codeAMQPSequence:
			kind = BodySequence
			if !values {
				if err := validateSection(r, "amqp-sequence", encoding.TypeCodeList0, encoding.TypeCodeList8, encoding.TypeCodeList32); err != nil {
					return err
				}
				break
			}
			l, err := encoding.ReadList(r)
			if err != nil {
				return fmt.Errorf("amqp-sequence section: %w", err)
			}
			if l == nil {
				l = []any{}
			}
			m.Sequence = append(m.Sequence, l)
		case codeAMQPValue:
			kind = BodyValue
			if m.BodyKind == BodyValue {
				return fmt.Errorf("%w: more than one amqp-value section", ErrMalformed)
			}
			if !values {
				if err := validateSection(r, "amqp-value"); err != nil {
					return err
				}
				break
			}
			if m.Value, err = encoding.Unmarshal(r); err != nil {
				return fmt.Errorf("amqp-value section: %w", err)
			}
		}
		if m.BodyKind != BodyNone && m.BodyKind != kind {
			return fmt.Errorf("%w: message mixes body section kinds", ErrMalformed)
		}
		m.BodyKind = kind
	}
	return nil
}

// validateSection checks the value of a body section without decoding it.
// If codes are given, the value must be null or start with one of them (an
// amqp-sequence holds a list).
func validateSection(r *buffer.Buffer, name string, codes ...byte) error {
	if len(codes) > 0 {
		c, err := encoding.PeekCode(r)
		if err != nil {
			return fmt.Errorf("%s section: %w", name, err)
		}
		if c != encoding.TypeCodeNull && !slices.Contains(codes, c) {
			return fmt.Errorf("%s section: %w: constructor 0x%02x where list expected", name, ErrMalformed, c)
		}
	}
	if err := encoding.Validate(r); err != nil {
		return fmt.Errorf("%s section: %w", name, err)
	}
	return nil
}

// MarshalAMQP appends the encoded message to w. It implements
// [encoding.Marshaler], so a Message can also be nested (for example as a
// data section of a batch).
func (m *Message) MarshalAMQP(w *buffer.Buffer) error {
	if err := m.marshalSections(w); err != nil {
		return err
	}
	if err := m.marshalBody(w); err != nil {
		return err
	}
	return writeSectionMap(w, codeFooter, m.Footer)
}

// MarshalBodyApart writes m as [Message.MarshalAMQP] does, except for
// the bytes of its body when they end the message: a raw body, or the
// content of its only data section (whose descriptor and length it
// writes). It returns those bytes, nil when it wrote the whole message:
// m's encoding is what it wrote followed by them. A delivery so copies a
// large body once, into a buffer of its own, instead of into a buffer
// that was zeroed for it first.
func (m *Message) MarshalBodyApart(w *buffer.Buffer) ([]byte, error) {
	data := m.RawBody == nil && m.bodyKind() == BodyData && len(m.Data) == 1
	if m.Footer != nil || (m.RawBody == nil && !data) {
		return nil, m.MarshalAMQP(w)
	}
	if err := m.marshalSections(w); err != nil {
		return nil, err
	}
	if m.RawBody != nil {
		return m.RawBody, nil
	}
	encoding.WriteDescriptor(w, codeData)
	encoding.WriteBinaryHeader(w, len(m.Data[0]))
	return m.Data[0], nil
}

// marshalSections writes the sections before the body.
func (m *Message) marshalSections(w *buffer.Buffer) error {
	if m.Header != nil {
		m.Header.marshal(w)
	}
	if m.DeliveryAnnotations == nil && m.RawDeliveryAnnotations != nil {
		encoding.WriteDescriptor(w, codeDeliveryAnnotations)
		w.Append(m.RawDeliveryAnnotations)
	} else if err := writeSectionMap(w, codeDeliveryAnnotations, m.DeliveryAnnotations); err != nil {
		return err
	}
	if m.MessageAnnotations == nil && m.RawMessageAnnotations != nil {
		encoding.WriteDescriptor(w, codeMessageAnnotations)
		w.Append(m.RawMessageAnnotations)
	} else if err := writeSectionMap(w, codeMessageAnnotations, m.MessageAnnotations); err != nil {
		return err
	}
	if m.Properties != nil {
		if err := m.Properties.marshal(w); err != nil {
			return err
		}
	}
	if m.ApplicationProperties == nil && m.RawApplicationProperties != nil {
		encoding.WriteDescriptor(w, codeApplicationProperties)
		w.Append(m.RawApplicationProperties)
	} else if err := writeSectionMap(w, codeApplicationProperties, m.ApplicationProperties); err != nil {
		return err
	}
	return nil
}

// bodyKind is m.BodyKind, or when unset the kind of the body m holds.
func (m *Message) bodyKind() BodyKind {
	if m.BodyKind != BodyNone {
		return m.BodyKind
	}
	switch {
	case m.Data != nil:
		return BodyData
	case m.Sequence != nil:
		return BodySequence
	case m.Value != nil:
		return BodyValue
	}
	return BodyNone
}

func (m *Message) marshalBody(w *buffer.Buffer) error {
	if m.RawBody != nil {
		w.Append(m.RawBody)
		return nil
	}
	switch m.bodyKind() {
	case BodyData:
		for _, d := range m.Data {
			encoding.WriteDescriptor(w, codeData)
			encoding.WriteBinary(w, d)
		}
	case BodySequence:
		for _, s := range m.Sequence {
			encoding.WriteDescriptor(w, codeAMQPSequence)
			if err := encoding.Marshal(w, s); err != nil {
				return err
			}
		}
	case BodyValue:
		encoding.WriteDescriptor(w, codeAMQPValue)
		if err := encoding.Marshal(w, m.Value); err != nil {
			return err
		}
	}
	return nil
}

func writeSectionMap(w *buffer.Buffer, code uint64, m encoding.Map) error {
	if m == nil {
		return nil
	}
	encoding.WriteDescriptor(w, code)
	return encoding.WriteMap(w, m)
}
