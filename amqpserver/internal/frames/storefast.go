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
	c := cursor{b: p}
	last := -1
	bodyStart, bodyEnd := -1, -1
	otherBody := false // an amqp-value or amqp-sequence section
	for c.i < len(p) {
		offset := c.i
		code, ok := c.descriptor()
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
			ok = d.hdr.unmarshalFast(&c)
		case codeMessageProperties:
			m.Properties = &d.props
			ok = d.props.unmarshalFast(&c)
		case codeApplicationProperties:
			m.RawApplicationProperties, ok = c.mapOrNull()
		case codeData:
			if bodyStart < 0 {
				bodyStart = offset
				m.Data = d.data[:0]
			}
			var data []byte
			if data, ok = c.binary(); ok {
				m.Data = append(m.Data, data)
				bodyEnd = c.i
			}
		case codeAMQPSequence, codeAMQPValue:
			if bodyStart < 0 {
				bodyStart = offset
			}
			otherBody = true
			r := buffer.Make(p[c.i:])
			ok = encoding.Skip(&r) == nil
			c.i = len(p) - r.Len()
			bodyEnd = c.i
		default: // annotations, footer: as the general decoder reads them
			r := buffer.Make(p[c.i:])
			sm, err := readSectionMap(&r)
			ok = err == nil
			c.i = len(p) - r.Len()
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

// cursor reads encoded values off b from offset i, each by a switch on
// its constructor. Its readers report false for a value that is not one
// they take, or that b does not hold whole, leaving i anywhere; they
// never look past len(b), so a list's elements are read with a cursor
// whose b ends where the list does ([cursor.list]). It is an offset, not
// a slice cut at each value: moving it past a value costs an addition.
type cursor struct {
	b []byte
	i int
}

// descriptor reads a section's numeric descriptor, as
// [encoding.ReadDescriptor] does.
func (c *cursor) descriptor() (uint64, bool) {
	b := c.b[c.i:]
	if len(b) < 2 || b[0] != encoding.TypeCodeDescribed {
		return 0, false
	}
	switch b[1] {
	case encoding.TypeCodeSmallUlong:
		if len(b) < 3 {
			return 0, false
		}
		c.i += 3
		return uint64(b[2]), true
	case encoding.TypeCodeUlong:
		if len(b) < 10 {
			return 0, false
		}
		c.i += 10
		return binary.BigEndian.Uint64(b[2:]), true
	case encoding.TypeCodeUlong0:
		c.i += 2
		return 0, true
	}
	return 0, false
}

// list reads a list's header as [encoding.OpenList] checks it, moves c
// past the whole list and returns a cursor over its elements, which it
// does not check, and how many there are.
func (c *cursor) list() (elems cursor, count int, ok bool) {
	b := c.b[c.i:]
	if len(b) == 0 {
		return cursor{}, 0, false
	}
	var size, hdr int
	switch b[0] {
	case encoding.TypeCodeList0:
		c.i++
		return cursor{}, 0, true
	case encoding.TypeCodeList8:
		if len(b) < 3 {
			return cursor{}, 0, false
		}
		size, count, hdr = int(b[1])-1, int(b[2]), 3
	case encoding.TypeCodeList32:
		if len(b) < 9 {
			return cursor{}, 0, false
		}
		size, count, hdr = int(binary.BigEndian.Uint32(b[1:]))-4, int(binary.BigEndian.Uint32(b[5:])), 9
	default:
		return cursor{}, 0, false
	}
	if size < 0 || size > len(b)-hdr || count > size {
		return cursor{}, 0, false
	}
	start := c.i + hdr
	c.i = start + size
	return cursor{b: c.b[:c.i], i: start}, count, true
}

// null reports whether the next element is a null, and moves past it
// if it is; false too at the end of b.
func (c *cursor) null() (null, ok bool) {
	if c.i >= len(c.b) {
		return false, false
	}
	if c.b[c.i] == encoding.TypeCodeNull {
		c.i++
		return true, true
	}
	return false, true
}

// done reports whether c has read all of b.
func (c *cursor) done() bool { return c.i == len(c.b) }

// variable reads a binary, string or symbol whose constructor is one of
// the two given (the 8- and 32-bit length forms) and returns its bytes,
// aliasing b.
func (c *cursor) variable(code8, code32 byte) ([]byte, bool) {
	b := c.b[c.i:]
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
	c.i += hdr + n
	return b[hdr : hdr+n], true
}

// binary reads a binary (a data section's content), aliasing b.
func (c *cursor) binary() ([]byte, bool) {
	return c.variable(encoding.TypeCodeVbin8, encoding.TypeCodeVbin32)
}

// string reads a string as [encoding.ReadString] does.
func (c *cursor) string() (string, bool) {
	s, ok := c.variable(encoding.TypeCodeStr8, encoding.TypeCodeStr32)
	return string(s), ok
}

// symbol reads a symbol as [encoding.ReadSymbol] does.
func (c *cursor) symbol() (encoding.Symbol, bool) {
	s, ok := c.variable(encoding.TypeCodeSym8, encoding.TypeCodeSym32)
	return encoding.Symbol(s), ok
}

// address reads an address (a string or a symbol) as readAddress does.
func (c *cursor) address() (string, bool) {
	if b := c.b[c.i:]; len(b) > 0 && (b[0] == encoding.TypeCodeSym8 || b[0] == encoding.TypeCodeSym32) {
		s, ok := c.symbol()
		return string(s), ok
	}
	return c.string()
}

// bool reads a boolean as [encoding.ReadBool] does (null is not passed:
// the list walks skip null fields). c is at a value.
func (c *cursor) bool() (bool, bool) {
	switch c.b[c.i] {
	case encoding.TypeCodeBoolTrue:
		c.i++
		return true, true
	case encoding.TypeCodeBoolFalse:
		c.i++
		return false, true
	case encoding.TypeCodeBool:
		if c.i+2 > len(c.b) {
			return false, false
		}
		c.i += 2
		return c.b[c.i-1] != 0, true
	}
	return false, false
}

// ubyte reads a ubyte as [encoding.ReadUbyte] does. c is at a value.
func (c *cursor) ubyte() (uint8, bool) {
	if c.b[c.i] != encoding.TypeCodeUbyte || c.i+2 > len(c.b) {
		return 0, false
	}
	c.i += 2
	return c.b[c.i-1], true
}

// uint reads a uint as [encoding.ReadUint] does: a uint, ushort or ubyte
// in any of their encodings. c is at a value.
func (c *cursor) uint() (uint32, bool) {
	b := c.b[c.i:]
	switch b[0] {
	case encoding.TypeCodeUint0:
		c.i++
		return 0, true
	case encoding.TypeCodeSmallUint, encoding.TypeCodeUbyte:
		if len(b) < 2 {
			return 0, false
		}
		c.i += 2
		return uint32(b[1]), true
	case encoding.TypeCodeUshort:
		if len(b) < 3 {
			return 0, false
		}
		c.i += 3
		return uint32(binary.BigEndian.Uint16(b[1:])), true
	case encoding.TypeCodeUint:
		if len(b) < 5 {
			return 0, false
		}
		c.i += 5
		return binary.BigEndian.Uint32(b[1:]), true
	}
	return 0, false
}

// timestamp reads a timestamp as [encoding.ReadTimestamp] does.
func (c *cursor) timestamp() (time.Time, bool) {
	b := c.b[c.i:]
	if len(b) < 9 || b[0] != encoding.TypeCodeTimestamp {
		return time.Time{}, false
	}
	c.i += 9
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[1:]))).UTC(), true
}

// id reads a message-id or correlation-id of the types an id may have
// (a string, ulong, uuid or binary) into what [encoding.Unmarshal] makes
// of it. Any other value is left to the general decoder. c is at a
// value.
func (c *cursor) id() (any, bool) {
	b := c.b[c.i:]
	switch b[0] {
	case encoding.TypeCodeStr8, encoding.TypeCodeStr32:
		return c.string()
	case encoding.TypeCodeVbin8, encoding.TypeCodeVbin32:
		v, ok := c.binary()
		return append([]byte{}, v...), ok
	case encoding.TypeCodeUUID:
		if len(b) < 17 {
			return nil, false
		}
		c.i += 17
		return encoding.UUID(b[1:17]), true
	case encoding.TypeCodeUlong0:
		c.i++
		return uint64(0), true
	case encoding.TypeCodeSmallUlong:
		if len(b) < 2 {
			return nil, false
		}
		c.i += 2
		return uint64(b[1]), true
	case encoding.TypeCodeUlong:
		if len(b) < 9 {
			return nil, false
		}
		c.i += 9
		return binary.BigEndian.Uint64(b[1:]), true
	}
	return nil, false
}

// mapOrNull reads an application-properties section's value as
// [encoding.SkipRaw] does for a map or null (its entries are checked
// later, where they are read) and returns its encoding, aliasing b.
func (c *cursor) mapOrNull() ([]byte, bool) {
	b := c.b[c.i:]
	if len(b) == 0 {
		return nil, false
	}
	var size, count, hdr int
	switch b[0] {
	case encoding.TypeCodeNull:
		c.i++
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
	c.i += hdr + size
	return b[:hdr+size], true
}

// unmarshalFast reads the header section's list as
// [MessageHeader.unmarshal] does.
func (h *MessageHeader) unmarshalFast(c *cursor) bool {
	h.Priority = DefaultPriority
	l, count, ok := c.list()
	if !ok {
		return false
	}
	for i := range count {
		if null, ok := l.null(); !ok {
			return false
		} else if null {
			continue
		}
		switch i {
		case 0:
			h.Durable, ok = l.bool()
		case 1:
			h.Priority, ok = l.ubyte()
		case 2:
			h.TTL, ok = l.uint()
		case 3:
			h.FirstAcquirer, ok = l.bool()
		case 4:
			h.DeliveryCount, ok = l.uint()
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return l.done()
}

// unmarshalFast reads the properties section's list as
// [MessageProperties.unmarshal] does.
func (mp *MessageProperties) unmarshalFast(c *cursor) bool {
	l, count, ok := c.list()
	if !ok {
		return false
	}
	for i := range count {
		if null, ok := l.null(); !ok {
			return false
		} else if null {
			continue
		}
		switch i {
		case 0:
			mp.MessageID, ok = l.id()
		case 1:
			var v []byte
			v, ok = l.binary()
			mp.UserID = append([]byte{}, v...)
		case 2:
			mp.To, ok = l.address()
		case 3:
			mp.Subject, ok = l.string()
		case 4:
			mp.ReplyTo, ok = l.address()
		case 5:
			mp.CorrelationID, ok = l.id()
		case 6:
			mp.ContentType, ok = l.symbol()
		case 7:
			mp.ContentEncoding, ok = l.symbol()
		case 8:
			mp.AbsoluteExpiryTime, ok = l.timestamp()
		case 9:
			mp.CreationTime, ok = l.timestamp()
		case 10:
			mp.GroupID, ok = l.string()
		case 11:
			var v uint32
			if v, ok = l.uint(); ok {
				mp.GroupSequence = &v
			}
		case 12:
			mp.ReplyToGroupID, ok = l.address()
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return l.done()
}
