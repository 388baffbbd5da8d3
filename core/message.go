package core

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"
)

// UUID is a 16-byte identifier in RFC 4122 byte order. Lock tokens are
// UUIDs; application properties may hold them too.
type UUID [16]byte

// NewUUID returns a random (version 4) UUID. Lock tokens are made here,
// under a queue's mutex, once per delivery, and so are the ids of
// messages sent without one: the bits come from ChaCha8 generators
// (math/rand/v2, a cryptographically strong stream) each seeded from
// crypto/rand, kept in a pool so that concurrent callers share no lock.
// Tokens stay as unguessable as crypto/rand's (decisions.md, "Lock
// tokens"), at a quarter of the cost (crypto/rand took 125 ns a token).
func NewUUID() UUID {
	src := uuidSources.Get().(*mrand.ChaCha8)
	var u UUID
	binary.LittleEndian.PutUint64(u[:8], src.Uint64())
	binary.LittleEndian.PutUint64(u[8:], src.Uint64())
	uuidSources.Put(src)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// uuidSources holds the ChaCha8 generators NewUUID draws from, each seeded
// from crypto/rand when the pool makes it.
var uuidSources = sync.Pool{New: func() any {
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}}

// uuidStringLen is the length of a UUID in its text form.
const uuidStringLen = 36

// String formats u as xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func (u UUID) String() string {
	var b [uuidStringLen]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// ParseUUID parses the canonical string form (braces tolerated).
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) == 38 && s[0] == '{' && s[37] == '}' {
		s = s[1:37]
	}
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("core: malformed uuid %q", s)
	}
	hexs := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u[:], []byte(hexs)); err != nil {
		return u, fmt.Errorf("core: malformed uuid %q", s)
	}
	return u, nil
}

// LockToken identifies one peek-lock of one message. It is valid from any
// connection and either protocol until settled or expired.
type LockToken = UUID

// MessageState is the broker-side state of a stored message, with the
// values Service Bus puts in x-opt-message-state.
type MessageState uint8

// Message states.
const (
	StateActive    MessageState = 0
	StateDeferred  MessageState = 1
	StateScheduled MessageState = 2
)

func (s MessageState) String() string {
	switch s {
	case StateActive:
		return "Active"
	case StateDeferred:
		return "Deferred"
	case StateScheduled:
		return "Scheduled"
	}
	return fmt.Sprintf("MessageState(%d)", uint8(s))
}

// BodyType says how [Message.Body] is to be read.
type BodyType uint8

// Body types.
const (
	// BodyBinary: Body is the payload bytes (one AMQP data section, the
	// entity body of a REST request).
	BodyBinary BodyType = iota
	// BodyAMQP: Body is the verbatim encoding of the message's AMQP body
	// sections (amqp-value, amqp-sequence or several data sections). Only
	// the AMQP front interprets it.
	BodyAMQP
)

// Message is a Service Bus message: what a sender gives the broker plus
// what the broker stamps on it.
//
// Property values (ApplicationProperties, Annotations, MessageID,
// CorrelationID) are restricted to the types the value codec stores with
// their type intact: nil, bool, int8..int64, uint8..uint64, float32,
// float64, string, []byte, time.Time, UUID, Symbol, []any and
// map[string]any of those.
type Message struct {
	// Set by the sender.
	MessageID             any // string, UUID, uint64 or []byte
	CorrelationID         any // same types as MessageID
	SessionID             string
	ReplyToSessionID      string
	To                    string
	ReplyTo               string
	Subject               string // a.k.a. Label
	ContentType           string
	ContentEncoding       string
	PartitionKey          string
	ViaPartitionKey       string
	TimeToLive            time.Duration // 0: not set (entity default applies)
	ScheduledEnqueueTime  time.Time     // zero: not scheduled
	CreationTime          time.Time
	UserID                []byte
	Priority              uint8
	Durable               bool
	ApplicationProperties map[string]any
	// EncodedProperties, when set, hold the application properties
	// instead of ApplicationProperties (which is then nil), in the
	// encoding of the front that received them (properties.go): read
	// them with [Message.Properties].
	EncodedProperties EncodedProperties
	// Annotations are message annotations the broker does not interpret
	// (anything but the x-opt-* keys it owns), kept for fidelity.
	Annotations map[string]any
	BodyType    BodyType
	Body        []byte

	// Stamped by the broker.
	SequenceNumber         int64
	EnqueuedSequenceNumber int64
	EnqueuedTime           time.Time
	ExpiresAt              time.Time // zero: never
	DeliveryCount          int32     // deliveries so far, including this one
	State                  MessageState
	DeadLetterSource       string
	LockToken              LockToken // zero when not locked
	LockedUntil            time.Time
}

// Symbol is an AMQP symbol kept as a distinct type in property values so it
// round-trips as a symbol rather than a string.
type Symbol string

// MessageIDString returns the message id as text, for duplicate detection
// and REST. UUIDs use their canonical form, binaries hex.
func (m *Message) MessageIDString() string { return idString(m.MessageID) }

// CorrelationIDString returns the correlation id as text.
func (m *Message) CorrelationIDString() string { return idString(m.CorrelationID) }

func idString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case UUID:
		return x.String()
	case []byte:
		return hex.EncodeToString(x)
	default:
		return fmt.Sprint(x)
	}
}

// idLen is len(idString(v)), without building the string for the common
// kinds of id.
func idLen(v any) int {
	switch x := v.(type) {
	case nil:
		return 0
	case string:
		return len(x)
	case UUID:
		return uuidStringLen
	case []byte:
		return hex.EncodedLen(len(x))
	default:
		return len(idString(v))
	}
}

// Size is the message's accounted size in bytes: body plus an estimate of
// the headers, the way Service Bus counts against MaxMessageSize.
//
// The send path needs this, [Message.HeaderSize] and the size of the
// body record together: it takes all three from one walk of the
// properties ([measure]).
func (m *Message) Size() int {
	n := len(m.Body) + len(m.SessionID) + len(m.ReplyToSessionID) + len(m.To) + len(m.ReplyTo) +
		len(m.Subject) + len(m.ContentType) + len(m.PartitionKey) + idLen(m.MessageID) +
		idLen(m.CorrelationID)
	for k, v := range m.ApplicationProperties {
		n += len(k) + valueSize(v)
	}
	return n + m.EncodedProperties.Size
}

func valueSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case Symbol:
		return len(x)
	case []byte:
		return len(x)
	case []any:
		n := 0
		for _, e := range x {
			n += valueSize(e)
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			n += len(k) + valueSize(e)
		}
		return n
	default:
		return 8
	}
}

// Clone returns a deep copy of the mutable parts of m (maps), sharing the
// body bytes and encoded properties, which the broker never modifies.
func (m *Message) Clone() *Message {
	c := *m
	c.ApplicationProperties = cloneMap(m.ApplicationProperties)
	c.Annotations = cloneMap(m.Annotations)
	return &c
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
