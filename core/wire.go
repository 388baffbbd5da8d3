package core

import (
	"bytes"
	"encoding/binary"
	"slices"
	"time"
)

// A message on the wire between the nodes of a cluster (route.go: a
// backend in another process): the body record (record.go) followed by
// the broker's stamps a body record leaves out, so that a delivered
// message crosses whole.

// AppendMessage appends the wire encoding of m to b.
func AppendMessage(b []byte, m *Message) ([]byte, error) {
	b = slices.Grow(b, bodyRecordSize(m)+64)
	b, err := appendBody(b, m)
	if err != nil {
		return nil, err
	}
	b = binary.AppendVarint(b, m.SequenceNumber)
	b = binary.AppendVarint(b, timeToNanos(m.ExpiresAt))
	b = binary.AppendVarint(b, int64(m.DeliveryCount))
	b = append(b, byte(m.State))
	b = append(b, m.LockToken[:]...)
	return binary.AppendVarint(b, timeToNanos(m.LockedUntil)), nil
}

// ReadMessage decodes the message at the start of b, as AppendMessage
// wrote it, and returns what follows it.
func ReadMessage(b []byte) (*Message, []byte, error) {
	r := reader{b: b}
	m, err := decodeBodyFrom(&r)
	if err != nil {
		return nil, nil, err
	}
	m.SequenceNumber = r.varint()
	m.ExpiresAt = nanosToTime(r.varint())
	m.DeliveryCount = int32(r.varint())
	m.State = MessageState(r.byte())
	copy(m.LockToken[:], r.fixed(len(m.LockToken)))
	m.LockedUntil = nanosToTime(r.varint())
	if r.err != nil {
		return nil, nil, r.err
	}
	return m, r.b, nil
}

// decodeBodyFrom reads a body record from r, leaving r after it.
func decodeBodyFrom(r *reader) (*Message, error) {
	version := r.byte()
	if version != bodyVersion && version != bodyVersionEncoded {
		return nil, errCorrupt
	}
	m := &Message{}
	m.MessageID = r.value()
	m.CorrelationID = r.value()
	for _, p := range [...]*string{&m.SessionID, &m.ReplyToSessionID, &m.To, &m.ReplyTo, &m.Subject,
		&m.ContentType, &m.ContentEncoding, &m.PartitionKey, &m.ViaPartitionKey, &m.DeadLetterSource} {
		*p = r.string()
	}
	m.TimeToLive = time.Duration(r.varint())
	m.ScheduledEnqueueTime = nanosToTime(r.varint())
	m.CreationTime = nanosToTime(r.varint())
	m.EnqueuedTime = nanosToTime(r.varint())
	m.EnqueuedSequenceNumber = r.varint()
	if u := r.bytes(); len(u) > 0 {
		m.UserID = append([]byte(nil), u...)
	}
	m.Priority = r.byte()
	m.Durable = r.byte()&1 != 0
	m.BodyType = BodyType(r.byte())
	var props []byte
	if version == bodyVersionEncoded {
		m.EncodedProperties.Codec = r.byte()
		m.EncodedProperties.Size = int(r.uvarint())
		props = r.bytes()
	} else {
		m.ApplicationProperties = r.mapValue()
	}
	m.Annotations = r.mapValue()
	body := r.bytes()
	if r.err == nil && (props != nil || len(body) > 0) {
		// The properties and the body share one copy of what b held,
		// allocated by bytes.Join without being zeroed first (make
		// zeroed a 64 KiB body before copying it in).
		own := bytes.Join([][]byte{props, body}, nil)
		if props != nil {
			m.EncodedProperties.Bytes = own[:len(props):len(props)]
		}
		if len(body) > 0 {
			m.Body = own[len(props):]
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// AppendValue appends the wire encoding of a property value (any type a
// [Message] property may hold: nil, bool, the integers, floats, string,
// []byte, time.Time, UUID, Symbol, []any and map[string]any of those),
// keeping its type.
func AppendValue(b []byte, v any) ([]byte, error) { return appendValue(b, v) }

// ReadValue decodes the value at the start of b, as AppendValue wrote it,
// and returns what follows it.
func ReadValue(b []byte) (any, []byte, error) {
	r := reader{b: b}
	v := r.value()
	if r.err != nil {
		return nil, nil, r.err
	}
	return v, r.b, nil
}
