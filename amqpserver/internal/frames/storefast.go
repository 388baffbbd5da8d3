package frames

import (
	"encoding/binary"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// The store decoder's fast path (issue 30).
//
// Every message a client sends is decoded by [StoreDecoder.Decode]. The
// general decoder ([Message.unmarshal]) walks it value by value through
// the encoding package's readers, each of which takes a buffer, checks
// it and returns an error, and the header's and properties' fields
// through a callback per field: for a typical send (a header, a few
// application properties, one data section) that was a third of the
// instructions the front spends on it. unmarshalFast reads the same
// sections in one pass straight off the byte slice, with a switch on
// each field's constructor, for the encodings clients send.
//
// It never reports an error. Anything it does not take (a constructor
// a field does not usually have, a field past the spec's, a malformed or
// truncated value) makes it give up, and Decode decodes the message
// with the general decoder instead, which accepts it or refuses it with
// the error it always gave. The fast path therefore only has to be right
// about what it accepts: every message it accepts, the general decoder
// accepts into the same Message (TestStoreFastIsGeneral, FuzzMessage).
// Sections it does not read itself (annotations, footer, amqp-value and
// amqp-sequence bodies) it hands to the general decoder's own readers.

// unmarshalFast decodes p into the cleared decoder d's Message as
// [Message.unmarshal] does with store set, and reports whether it did;
// when it did not, d's Message holds anything and must be cleared.
func (d *StoreDecoder) unmarshalFast(p []byte) bool {
	m := &d.m
	rest := p
	last := -1
	bodyStart, bodyEnd := -1, -1
	otherBody := false // an amqp-value or amqp-sequence section
	for len(rest) > 0 {
		offset := len(p) - len(rest)
		code, ok := fastDescriptor(&rest)
		if !ok {
			return false
		}
		rank := sectionRank(code)
		if rank < 0 || rank < last || (rank == last && rank != 5) {
			return false
		}
		last = rank
		switch code {
		case codeMessageHeader:
			m.Header = &d.hdr
			ok = d.hdr.unmarshalFast(&rest)
		case codeMessageProperties:
			m.Properties = &d.props
			ok = d.props.unmarshalFast(&rest)
		case codeApplicationProperties:
			m.RawApplicationProperties, ok = fastMapOrNull(&rest)
		case codeData:
			if bodyStart < 0 {
				bodyStart = offset
				m.Data = d.data[:0]
			}
			var data []byte
			if data, ok = fastBinary(&rest); ok {
				m.Data = append(m.Data, data)
				bodyEnd = len(p) - len(rest)
			}
		case codeAMQPSequence, codeAMQPValue:
			if bodyStart < 0 {
				bodyStart = offset
			}
			otherBody = true
			r := buffer.Make(rest)
			ok = encoding.Skip(&r) == nil
			rest = r.Bytes()
			bodyEnd = len(p) - len(rest)
		default: // annotations, footer: as the general decoder reads them
			r := buffer.Make(rest)
			sm, err := readSectionMap(&r)
			ok = err == nil
			rest = r.Bytes()
			switch code {
			case codeDeliveryAnnotations:
				m.DeliveryAnnotations = sm
			case codeMessageAnnotations:
				m.MessageAnnotations = sm
			default:
				m.Footer = sm
			}
		}
		if !ok {
			return false
		}
	}
	if bodyStart < 0 {
		return true
	}
	m.RawBody = p[bodyStart:bodyEnd:bodyEnd]
	if otherBody {
		// Kinds mixed, or several amqp-values: the general checks.
		m.Data = d.data[:0]
		if m.decodeBody(false) != nil {
			return false
		}
	} else {
		m.BodyKind = BodyData
	}
	if len(m.Data) == 0 {
		m.Data = nil
	}
	return true
}

// fastDescriptor reads a section's numeric descriptor, as
// [encoding.ReadDescriptor] does.
func fastDescriptor(p *[]byte) (uint64, bool) {
	b := *p
	if len(b) < 2 || b[0] != encoding.TypeCodeDescribed {
		return 0, false
	}
	switch b[1] {
	case encoding.TypeCodeSmallUlong:
		if len(b) < 3 {
			return 0, false
		}
		*p = b[3:]
		return uint64(b[2]), true
	case encoding.TypeCodeUlong:
		if len(b) < 10 {
			return 0, false
		}
		*p = b[10:]
		return binary.BigEndian.Uint64(b[2:]), true
	case encoding.TypeCodeUlong0:
		*p = b[2:]
		return 0, true
	}
	return 0, false
}

// fastList reads a list's header as [encoding.OpenList] checks it and
// returns its content and element count, advancing p past the list.
func fastList(p *[]byte) (content []byte, count int, ok bool) {
	b := *p
	if len(b) == 0 {
		return nil, 0, false
	}
	var size, hdr int
	switch b[0] {
	case encoding.TypeCodeList0:
		*p = b[1:]
		return nil, 0, true
	case encoding.TypeCodeList8:
		if len(b) < 3 {
			return nil, 0, false
		}
		size, count, hdr = int(b[1])-1, int(b[2]), 3
	case encoding.TypeCodeList32:
		if len(b) < 9 {
			return nil, 0, false
		}
		size, count, hdr = int(binary.BigEndian.Uint32(b[1:]))-4, int(binary.BigEndian.Uint32(b[5:])), 9
	default:
		return nil, 0, false
	}
	if size < 0 || size > len(b)-hdr || count > size {
		return nil, 0, false
	}
	*p = b[hdr+size:]
	return b[hdr : hdr+size], count, true
}

// fastVariable reads a binary, string or symbol whose constructor is one
// of the two given (the 8- and 32-bit length forms) and returns its
// bytes, aliasing p.
func fastVariable(p *[]byte, code8, code32 byte) ([]byte, bool) {
	b := *p
	if len(b) < 2 {
		return nil, false
	}
	var n, hdr int
	switch b[0] {
	case code8:
		n, hdr = int(b[1]), 2
	case code32:
		if len(b) < 5 {
			return nil, false
		}
		n, hdr = int(binary.BigEndian.Uint32(b[1:])), 5
	default:
		return nil, false
	}
	if n > len(b)-hdr {
		return nil, false
	}
	*p = b[hdr+n:]
	return b[hdr : hdr+n], true
}

// fastBinary reads a binary (a data section's content), aliasing p.
func fastBinary(p *[]byte) ([]byte, bool) {
	return fastVariable(p, encoding.TypeCodeVbin8, encoding.TypeCodeVbin32)
}

// fastString reads a string as [encoding.ReadString] does.
func fastString(p *[]byte) (string, bool) {
	s, ok := fastVariable(p, encoding.TypeCodeStr8, encoding.TypeCodeStr32)
	return string(s), ok
}

// fastSymbol reads a symbol as [encoding.ReadSymbol] does.
func fastSymbol(p *[]byte) (encoding.Symbol, bool) {
	s, ok := fastVariable(p, encoding.TypeCodeSym8, encoding.TypeCodeSym32)
	return encoding.Symbol(s), ok
}

// fastAddress reads an address (a string or a symbol) as readAddress does.
func fastAddress(p *[]byte) (string, bool) {
	if b := *p; len(b) > 0 && (b[0] == encoding.TypeCodeSym8 || b[0] == encoding.TypeCodeSym32) {
		s, ok := fastSymbol(p)
		return string(s), ok
	}
	return fastString(p)
}

// fastBool reads a boolean as [encoding.ReadBool] does (null is not
// passed: the list walks skip null fields).
func fastBool(p *[]byte) (bool, bool) {
	b := *p
	switch b[0] {
	case encoding.TypeCodeBoolTrue:
		*p = b[1:]
		return true, true
	case encoding.TypeCodeBoolFalse:
		*p = b[1:]
		return false, true
	case encoding.TypeCodeBool:
		if len(b) < 2 {
			return false, false
		}
		*p = b[2:]
		return b[1] != 0, true
	}
	return false, false
}

// fastUint reads a uint as [encoding.ReadUint] does: a uint, ushort or
// ubyte in any of their encodings.
func fastUint(p *[]byte) (uint32, bool) {
	b := *p
	switch b[0] {
	case encoding.TypeCodeUint0:
		*p = b[1:]
		return 0, true
	case encoding.TypeCodeSmallUint, encoding.TypeCodeUbyte:
		if len(b) < 2 {
			return 0, false
		}
		*p = b[2:]
		return uint32(b[1]), true
	case encoding.TypeCodeUshort:
		if len(b) < 3 {
			return 0, false
		}
		*p = b[3:]
		return uint32(binary.BigEndian.Uint16(b[1:])), true
	case encoding.TypeCodeUint:
		if len(b) < 5 {
			return 0, false
		}
		*p = b[5:]
		return binary.BigEndian.Uint32(b[1:]), true
	}
	return 0, false
}

// fastTimestamp reads a timestamp as [encoding.ReadTimestamp] does.
func fastTimestamp(p *[]byte) (time.Time, bool) {
	b := *p
	if len(b) < 9 || b[0] != encoding.TypeCodeTimestamp {
		return time.Time{}, false
	}
	*p = b[9:]
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[1:]))).UTC(), true
}

// fastID reads a message-id or correlation-id of the types an id may
// have (a string, ulong, uuid or binary) into what [encoding.Unmarshal]
// makes of it. Any other value is left to the general decoder.
func fastID(p *[]byte) (any, bool) {
	b := *p
	switch b[0] {
	case encoding.TypeCodeStr8, encoding.TypeCodeStr32:
		return fastString(p)
	case encoding.TypeCodeVbin8, encoding.TypeCodeVbin32:
		v, ok := fastBinary(p)
		return append([]byte{}, v...), ok
	case encoding.TypeCodeUUID:
		if len(b) < 17 {
			return nil, false
		}
		*p = b[17:]
		return encoding.UUID(b[1:17]), true
	case encoding.TypeCodeUlong0:
		*p = b[1:]
		return uint64(0), true
	case encoding.TypeCodeSmallUlong:
		if len(b) < 2 {
			return nil, false
		}
		*p = b[2:]
		return uint64(b[1]), true
	case encoding.TypeCodeUlong:
		if len(b) < 9 {
			return nil, false
		}
		*p = b[9:]
		return binary.BigEndian.Uint64(b[1:]), true
	}
	return nil, false
}

// fastMapOrNull reads an application-properties section's value as
// [encoding.SkipRaw] does for a map or null (its entries are checked
// later, where they are read) and returns its encoding, aliasing p.
func fastMapOrNull(p *[]byte) ([]byte, bool) {
	b := *p
	if len(b) == 0 {
		return nil, false
	}
	var size, count, hdr int
	switch b[0] {
	case encoding.TypeCodeNull:
		*p = b[1:]
		return b[:1], true
	case encoding.TypeCodeMap8:
		if len(b) < 3 {
			return nil, false
		}
		size, count, hdr = int(b[1])-1, int(b[2]), 3
	case encoding.TypeCodeMap32:
		if len(b) < 9 {
			return nil, false
		}
		size, count, hdr = int(binary.BigEndian.Uint32(b[1:]))-4, int(binary.BigEndian.Uint32(b[5:])), 9
	default:
		return nil, false
	}
	if size < 0 || size > len(b)-hdr || count > size {
		return nil, false
	}
	*p = b[hdr+size:]
	return b[:hdr+size], true
}

// unmarshalFast reads the header section's list as
// [MessageHeader.unmarshal] does.
func (h *MessageHeader) unmarshalFast(p *[]byte) bool {
	h.Priority = DefaultPriority
	c, count, ok := fastList(p)
	if !ok {
		return false
	}
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
			h.Durable, ok = fastBool(&c)
		case 1:
			if len(c) < 2 || c[0] != encoding.TypeCodeUbyte {
				return false
			}
			h.Priority, c = c[1], c[2:]
		case 2:
			h.TTL, ok = fastUint(&c)
		case 3:
			h.FirstAcquirer, ok = fastBool(&c)
		case 4:
			h.DeliveryCount, ok = fastUint(&c)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return len(c) == 0
}

// unmarshalFast reads the properties section's list as
// [MessageProperties.unmarshal] does.
func (mp *MessageProperties) unmarshalFast(p *[]byte) bool {
	c, count, ok := fastList(p)
	if !ok {
		return false
	}
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
			mp.MessageID, ok = fastID(&c)
		case 1:
			var v []byte
			v, ok = fastBinary(&c)
			mp.UserID = append([]byte{}, v...)
		case 2:
			mp.To, ok = fastAddress(&c)
		case 3:
			mp.Subject, ok = fastString(&c)
		case 4:
			mp.ReplyTo, ok = fastAddress(&c)
		case 5:
			mp.CorrelationID, ok = fastID(&c)
		case 6:
			mp.ContentType, ok = fastSymbol(&c)
		case 7:
			mp.ContentEncoding, ok = fastSymbol(&c)
		case 8:
			mp.AbsoluteExpiryTime, ok = fastTimestamp(&c)
		case 9:
			mp.CreationTime, ok = fastTimestamp(&c)
		case 10:
			mp.GroupID, ok = fastString(&c)
		case 11:
			var v uint32
			if v, ok = fastUint(&c); ok {
				mp.GroupSequence = &v
			}
		case 12:
			mp.ReplyToGroupID, ok = fastAddress(&c)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return len(c) == 0
}
