package core

import (
	"encoding/binary"
	"slices"
)

// Two records hold each stored message (see keys.go):
//
//   - the body record (b/): the message as sent plus the broker's stamps,
//     written once and read when the message is delivered or peeked;
//   - the state record (q/): a few dozen bytes that recovery scans to
//     rebuild the in-memory index without reading any body.
//
// A topic writes one body record for all its subscriptions; each
// subscription copy has its own state record pointing at it.
//
// A body record has one of two versions, which differ only in how they
// keep the application properties: version 1 in core's value codec
// (valuecodec.go), version 2 as the front encoded them
// ([EncodedProperties]: the codec's id, their accounted size, the bytes).
// A message with encoded properties is written as version 2, any other
// as version 1, which every release has read and written.
const (
	bodyVersion        = 1
	bodyVersionEncoded = 2
)

// encodeBody appends the encoding of m to b.
func encodeBody(b []byte, m *Message) ([]byte, error) {
	// One allocation for the record: growing it field by field copied a
	// 1 KiB body's record five times over (growslice was 8 % of a send's
	// CPU in BenchmarkAMQPSendRawProps).
	return appendBody(slices.Grow(b, bodyRecordSize(m)), m)
}

// appendBody is encodeBody into a b that has room for the record already
// (the send path sized it from [measure]); it grows b if it has not.
func appendBody(b []byte, m *Message) ([]byte, error) {
	if m.encoded() {
		b = append(b, bodyVersionEncoded)
	} else {
		b = append(b, bodyVersion)
	}
	var err error
	if b, err = appendValue(b, m.MessageID); err != nil {
		return nil, err
	}
	if b, err = appendValue(b, m.CorrelationID); err != nil {
		return nil, err
	}
	for _, s := range bodyStrings(m) {
		b = appendBytes(b, []byte(s))
	}
	b = binary.AppendVarint(b, int64(m.TimeToLive))
	b = binary.AppendVarint(b, timeToNanos(m.ScheduledEnqueueTime))
	b = binary.AppendVarint(b, timeToNanos(m.CreationTime))
	b = binary.AppendVarint(b, timeToNanos(m.EnqueuedTime))
	b = binary.AppendVarint(b, m.EnqueuedSequenceNumber)
	b = appendBytes(b, m.UserID)
	flags := byte(0)
	if m.Durable {
		flags |= 1
	}
	b = append(b, m.Priority, flags, byte(m.BodyType))
	if m.encoded() {
		ep := &m.EncodedProperties
		b = binary.AppendUvarint(append(b, ep.Codec), uint64(ep.Size))
		b = appendBytes(b, ep.Bytes)
	} else if b, err = appendMap(b, m.ApplicationProperties); err != nil {
		return nil, err
	}
	if b, err = appendMap(b, m.Annotations); err != nil {
		return nil, err
	}
	return appendBytes(b, m.Body), nil
}

// bodyStrings are m's string fields in the order the body record keeps
// them (decodeBody reads them back in the same order).
func bodyStrings(m *Message) [10]string {
	return [...]string{m.SessionID, m.ReplyToSessionID, m.To, m.ReplyTo, m.Subject,
		m.ContentType, m.ContentEncoding, m.PartitionKey, m.ViaPartitionKey, m.DeadLetterSource}
}

// bodyRecordSize is about the size of m's body record: never much less,
// so that encodeBody allocates once, and never much more.
// (version, varints, priority, flags, type and length prefixes, and a
// dozen bytes of type tags and lengths per property).
func bodyRecordSize(m *Message) int { return measure(m).record }

// decodeBody decodes a body record. Broker fields that live in the state
// record (sequence number, state, delivery count, expiry) are left zero.
func decodeBody(b []byte) (*Message, error) { return decodeBodyKeys(b, nil) }

// decodeBodyKeys is decodeBody taking property keys from keys.
func decodeBodyKeys(b []byte, keys keyCache) (*Message, error) {
	r := reader{b: b, keys: keys}
	return decodeBodyFrom(&r)
}

const stateVersion = 1

// stateRec is the persisted part of a message's broker state.
type stateRec struct {
	state         MessageState
	deliveryCount int32
	owner         uint64 // id whose body space holds the body
	expiresAt     int64  // unix nanos; 0 = never
	scheduledAt   int64  // unix nanos; 0 = not scheduled
	size          int32
	sessionID     string
}

func (s *stateRec) encode(b []byte) []byte {
	b = slices.Grow(b, maxStateRecLen+len(s.sessionID))
	b = append(b, stateVersion, byte(s.state))
	b = binary.AppendUvarint(b, uint64(s.deliveryCount))
	b = binary.BigEndian.AppendUint64(b, s.owner)
	b = binary.AppendVarint(b, s.expiresAt)
	b = binary.AppendVarint(b, s.scheduledAt)
	b = binary.AppendUvarint(b, uint64(s.size))
	return appendBytes(b, []byte(s.sessionID))
}

// maxStateRecLen is the longest encoding of a state record without its
// session id: two bytes, an owner and five varints.
const maxStateRecLen = 2 + 8 + 2*binary.MaxVarintLen64 + 3*binary.MaxVarintLen32

func decodeState(b []byte) (stateRec, error) {
	r := reader{b: b}
	var s stateRec
	if r.byte() != stateVersion {
		return s, errCorrupt
	}
	s.state = MessageState(r.byte())
	s.deliveryCount = int32(r.uvarint())
	if o := r.fixed(8); o != nil {
		s.owner = binary.BigEndian.Uint64(o)
	}
	s.expiresAt = r.varint()
	s.scheduledAt = r.varint()
	s.size = int32(r.uvarint())
	s.sessionID = r.string()
	return s, r.err
}
