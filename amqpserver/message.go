package amqpserver

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// Message mapping (amqp.md §4).
//
// Inbound, an AMQP message becomes a *core.Message: the properties section
// maps field by field, the three Service Bus annotations a sender may set
// (partition key, via-partition key, scheduled enqueue time) become
// fields, other annotations are kept verbatim in core.Message.Annotations,
// and the body is kept either as bytes (one data section, the common case,
// which the REST front can also serve) or as the raw encoded body sections.
//
// Outbound, encodeDelivery rebuilds the message with the header and the
// broker-owned x-opt-* annotations typed exactly as the SDKs assert them:
// Go's receiver type-asserts without checking (x-opt-sequence-number must be
// a long, x-opt-enqueued-time a timestamp, …) and panics otherwise.

// Message annotation keys (amqp.md §4.1, §4.2).
const (
	annSequenceNumber        encoding.Symbol = "x-opt-sequence-number"
	annEnqueuedTime          encoding.Symbol = "x-opt-enqueued-time"
	annLockedUntil           encoding.Symbol = "x-opt-locked-until"
	annEnqueueSequenceNumber encoding.Symbol = "x-opt-enqueue-sequence-number"
	annMessageState          encoding.Symbol = "x-opt-message-state"
	annScheduledEnqueueTime  encoding.Symbol = "x-opt-scheduled-enqueue-time"
	annPartitionKey          encoding.Symbol = "x-opt-partition-key"
	annViaPartitionKey       encoding.Symbol = "x-opt-via-partition-key"
	annDeadLetterSource      encoding.Symbol = "x-opt-deadletter-source"
	annLockToken             encoding.Symbol = "x-opt-lock-token" // delivery annotation
)

// brokerOwned reports whether an inbound message annotation is one the
// broker stamps itself; a client re-sending a received message carries the
// old values, which must not survive into the new message.
func brokerOwned(k encoding.Symbol) bool {
	switch k {
	case annSequenceNumber, annEnqueuedTime, annLockedUntil, annEnqueueSequenceNumber,
		annMessageState, annDeadLetterSource, annLockToken:
		return true
	}
	return false
}

// timeSpanDescriptor is how .NET clients send a TimeSpan property: a long
// of 100 ns ticks described by this symbol.
const timeSpanDescriptor encoding.Symbol = "com.microsoft:timespan"

// errUnsupportedValue reports a property value the broker cannot store.
var errUnsupportedValue = errors.New("amqpserver: unsupported property value")

// decodeMessage maps the payload of one delivery (all its transfers
// concatenated) to the messages it carries: one, or for message-format
// [frames.MessageFormatBatch] one per data section of the batch body.
// Errors describe why the message cannot be accepted (the transfer should
// be rejected with amqp:decode-error).
func decodeMessage(raw []byte, format uint32) ([]*core.Message, error) {
	return appendMessages(nil, raw, format, &propsDecoder{})
}

// appendMessages is decodeMessage appending to dst, so that a link
// collecting a batch of sends allocates no slice per delivery, with pd
// decoding the application properties (a connection's own, whose key
// cache serves all its sends). On error it returns nil, and dst's
// elements are as they were.
func appendMessages(dst []*core.Message, raw []byte, format uint32, pd *propsDecoder) ([]*core.Message, error) {
	if format != frames.MessageFormatBatch {
		// One message: decoded into the decoder's reused structures,
		// whose fields the core message copies or shares with raw.
		am, err := pd.msg.Decode(raw)
		if err != nil {
			return nil, err
		}
		m, err := toCoreMessage(am, pd)
		pd.msg.Clear()
		if err != nil {
			return nil, err
		}
		return append(dst, m), nil
	}
	am, err := frames.UnmarshalMessageSharing(raw)
	if err != nil {
		return nil, err
	}
	inner, err := frames.SplitBatch(am)
	if err != nil {
		return nil, err
	}
	n := len(dst)
	for i, im := range inner {
		m, err := toCoreMessage(im, pd)
		if err != nil {
			clear(dst[n:])
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		dst = append(dst, m)
	}
	return dst, nil
}

// toCoreMessage maps one decoded AMQP message, its application
// properties decoded by pd.
func toCoreMessage(am *frames.Message, pd *propsDecoder) (*core.Message, error) {
	m := &core.Message{Priority: frames.DefaultPriority}
	if h := am.Header; h != nil {
		m.Durable = h.Durable
		m.Priority = h.Priority
		m.TimeToLive = time.Duration(h.TTL) * time.Millisecond
	}
	if p := am.Properties; p != nil {
		var err error
		if m.MessageID, err = idFromAMQP(p.MessageID); err != nil {
			return nil, fmt.Errorf("message-id: %w", err)
		}
		if m.CorrelationID, err = idFromAMQP(p.CorrelationID); err != nil {
			return nil, fmt.Errorf("correlation-id: %w", err)
		}
		m.UserID = p.UserID
		m.To = p.To
		m.Subject = p.Subject
		m.ReplyTo = p.ReplyTo
		m.ContentType = string(p.ContentType)
		m.ContentEncoding = string(p.ContentEncoding)
		m.CreationTime = p.CreationTime
		m.SessionID = p.GroupID
		m.ReplyToSessionID = p.ReplyToGroupID
	}
	if err := annotationsFromAMQP(m, am.MessageAnnotations); err != nil {
		return nil, err
	}
	if raw := am.RawApplicationProperties; am.ApplicationProperties == nil && raw != nil {
		if n, size, ok := plainProperties(raw); ok {
			if n > 0 { // else none, as a decode of an empty map gives
				m.EncodedProperties = core.EncodedProperties{Codec: propertyCodecID, Bytes: slices.Clip(raw), Size: size}
			}
			setBody(m, am)
			return m, nil
		}
	}
	props, err := pd.decode(am)
	if err != nil {
		return nil, err
	}
	m.ApplicationProperties = props
	setBody(m, am)
	return m, nil
}

// setBody sets m's body from am's body sections.
func setBody(m *core.Message, am *frames.Message) {
	if am.BodyKind == frames.BodyData && len(am.Data) == 1 {
		m.BodyType = core.BodyBinary
		m.Body = slices.Clip(am.Data[0])
	} else {
		m.BodyType = core.BodyAMQP
		m.Body = am.RawBody
	}
}

// propsDecoder decodes the messages a connection's senders send: each
// into reused structures ([frames.StoreDecoder]) and its application
// properties straight into core's map
// ([frames.Message.DecodeApplicationProperties]), with no [encoding.Map]
// between, and keeps the keys it has seen so that a key every message
// carries is allocated once per connection rather than once per message.
// It is used by one goroutine at a time (a connection's, or a request's
// own decoder).
type propsDecoder struct {
	msg   frames.StoreDecoder // the message being decoded, in reused structures
	props map[string]any      // the map being filled
	keys  map[string]string
}

// Bounds of a propsDecoder's key cache: at most maxCachedKeys keys of at
// most maxCachedKeyLen bytes, a few KB per connection whatever the
// client sends; keys beyond them are allocated per message as before.
const (
	maxCachedKeys   = 64
	maxCachedKeyLen = 64
)

// decode returns am's application properties in core's form: nil for
// none (or an empty map). The error says which property the broker
// cannot keep, or that the section is malformed.
func (pd *propsDecoder) decode(am *frames.Message) (map[string]any, error) {
	if am.ApplicationProperties != nil { // decoded whole (not the store's decode)
		pd.Len(len(am.ApplicationProperties))
		for _, kv := range am.ApplicationProperties {
			var err error
			if k, ok := kv.Key.(string); ok {
				err = pd.Put(k, kv.Value)
			} else {
				err = pd.PutOther(kv.Key, kv.Value)
			}
			if err != nil {
				pd.props = nil
				return nil, err
			}
		}
	} else if err := am.DecodeApplicationProperties(pd); err != nil {
		pd.props = nil
		return nil, err
	}
	props := pd.props
	pd.props = nil
	return props, nil
}

// Len implements [encoding.MapSink].
func (pd *propsDecoder) Len(n int) {
	if n > 0 {
		pd.props = make(map[string]any, n)
	}
}

// StringKey implements [encoding.MapSink].
func (pd *propsDecoder) StringKey(p []byte) string {
	if k, ok := pd.keys[string(p)]; ok {
		return k
	}
	k := string(p)
	if len(p) <= maxCachedKeyLen && len(pd.keys) < maxCachedKeys {
		if pd.keys == nil {
			pd.keys = make(map[string]string)
		}
		pd.keys[k] = k
	}
	return k
}

// Put implements [encoding.MapSink].
func (pd *propsDecoder) Put(k string, v any) error {
	cv, err := valueFromAMQP(v)
	if err != nil {
		return fmt.Errorf("application property %q: %w", k, err)
	}
	pd.props[k] = cv
	return nil
}

// PutOther implements [encoding.MapSink]: core keeps string keys only.
func (pd *propsDecoder) PutOther(k, _ any) error {
	return fmt.Errorf("application property key %v: %w (keys must be strings)", k, errUnsupportedValue)
}

// annotationsFromAMQP takes the Service Bus annotations a sender may set
// into m's fields and keeps the others in m.Annotations. Broker-owned keys
// are dropped; so are values of types the store cannot keep (annotations
// are metadata the broker does not interpret, and rejecting a message
// over one would be worse than losing it).
func annotationsFromAMQP(m *core.Message, anns encoding.Map) error {
	for _, kv := range anns {
		k, ok := kv.Key.(encoding.Symbol)
		if !ok {
			continue // ulong-keyed annotations are reserved; nothing uses them
		}
		switch {
		case k == annPartitionKey:
			m.PartitionKey, _ = kv.Value.(string)
		case k == annViaPartitionKey:
			m.ViaPartitionKey, _ = kv.Value.(string)
		case k == annScheduledEnqueueTime:
			switch t := kv.Value.(type) {
			case time.Time:
				m.ScheduledEnqueueTime = t
			case nil:
			default:
				return fmt.Errorf("%s is a %T, want a timestamp: %w", k, kv.Value, errUnsupportedValue)
			}
		case brokerOwned(k):
		default:
			v, err := valueFromAMQP(kv.Value)
			if err != nil {
				continue
			}
			if m.Annotations == nil {
				m.Annotations = make(map[string]any)
			}
			m.Annotations[string(k)] = v
		}
	}
	return nil
}

// idFromAMQP converts a message-id or correlation-id, keeping its type.
func idFromAMQP(v any) (any, error) {
	switch id := v.(type) {
	case nil, string, uint64:
		return id, nil
	case []byte:
		return id, nil
	case encoding.UUID:
		return core.UUID(id), nil
	}
	return nil, fmt.Errorf("%T is not a message id type: %w", v, errUnsupportedValue)
}

// idToAMQP is the inverse of idFromAMQP.
func idToAMQP(v any) any {
	if u, ok := v.(core.UUID); ok {
		return encoding.UUID(u)
	}
	return v
}

// valueFromAMQP converts a decoded AMQP value to the types core stores
// (see core.Message). AMQP-only types without a core twin (char, decimals,
// other described values) are rejected.
func valueFromAMQP(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
		float32, float64, string, []byte, time.Time:
		return x, nil
	case encoding.UUID:
		return core.UUID(x), nil
	case encoding.Symbol:
		return core.Symbol(x), nil
	case []any:
		return listFromAMQP(x)
	case encoding.Array:
		if x.Descriptor != nil {
			return nil, fmt.Errorf("array of described values: %w", errUnsupportedValue)
		}
		return listFromAMQP(x.Elems)
	case encoding.Map:
		out := make(map[string]any, len(x))
		for _, kv := range x {
			var k string
			switch kk := kv.Key.(type) {
			case string:
				k = kk
			case encoding.Symbol:
				k = string(kk)
			default:
				return nil, fmt.Errorf("map key of type %T: %w", kv.Key, errUnsupportedValue)
			}
			e, err := valueFromAMQP(kv.Value)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case encoding.Described:
		if d, ok := x.Descriptor.(encoding.Symbol); ok && d == timeSpanDescriptor {
			if ticks, ok := x.Value.(int64); ok && ticks <= math.MaxInt64/100 && ticks >= math.MinInt64/100 {
				return time.Duration(ticks * 100), nil
			}
		}
	}
	return nil, fmt.Errorf("%T: %w", v, errUnsupportedValue)
}

func listFromAMQP(l []any) ([]any, error) {
	out := make([]any, len(l))
	for i, e := range l {
		v, err := valueFromAMQP(e)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// valueToAMQP converts a core property value back to its AMQP form. Maps
// come out with sorted string keys.
func valueToAMQP(v any) any {
	switch x := v.(type) {
	case core.UUID:
		return encoding.UUID(x)
	case core.Symbol:
		return encoding.Symbol(x)
	case int:
		return int64(x)
	case time.Duration:
		return encoding.Described{Descriptor: timeSpanDescriptor, Value: int64(x / 100)}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = valueToAMQP(e)
		}
		return out
	case map[string]any:
		m := encoding.StringMap(x)
		for i := range m {
			m[i].Value = valueToAMQP(m[i].Value)
		}
		return m
	}
	return v
}

// encodeDelivery encodes m as the broker delivers it on a receive link or
// embeds it in a management reply (peek, receive-by-sequence-number).
// With peekLock, m's lock is announced (x-opt-locked-until and the
// x-opt-lock-token delivery annotation); peeked messages carry neither.
func encodeDelivery(m *core.Message, peekLock bool) ([]byte, error) {
	sc := deliveryScratches.Get().(*deliveryScratch)
	defer sc.release()
	body, err := sc.encode(m, peekLock)
	if err != nil {
		return nil, err
	}
	// bytes.Join puts the sections and the body into the one allocation
	// the caller keeps, without zeroing it first as make did (a 64 KiB
	// delivery's buffer was a third of its zeroing).
	return bytes.Join([][]byte{sc.out.Bytes(), body}, nil), nil
}

// encode writes m's sections but its body's bytes into sc.out, and
// returns those bytes (nil when sc.out holds the whole message): the
// encoding is sc.out followed by them.
func (sc *deliveryScratch) encode(m *core.Message, peekLock bool) ([]byte, error) {
	sc.hdr = frames.MessageHeader{
		Durable:       m.Durable,
		Priority:      m.Priority,
		TTL:           ttlMillis(m),
		DeliveryCount: uint32(max(m.DeliveryCount-1, 0)),
	}
	sc.sys = frames.MessageProperties{
		MessageID:          idToAMQP(m.MessageID),
		UserID:             m.UserID,
		To:                 m.To,
		Subject:            m.Subject,
		ReplyTo:            m.ReplyTo,
		CorrelationID:      idToAMQP(m.CorrelationID),
		ContentType:        encoding.Symbol(m.ContentType),
		ContentEncoding:    encoding.Symbol(m.ContentEncoding),
		AbsoluteExpiryTime: absoluteExpiry(m),
		CreationTime:       m.CreationTime,
		GroupID:            m.SessionID,
		ReplyToGroupID:     m.ReplyToSessionID,
	}
	am := &sc.am
	am.Header, am.Properties = &sc.hdr, &sc.sys
	sc.ann.Reset()
	if err := writeDeliveryAnnotations(&sc.ann, m, peekLock, sc); err != nil {
		return nil, fmt.Errorf("encode message %d: %w", m.SequenceNumber, err)
	}
	am.RawMessageAnnotations = sc.ann.Bytes()
	if peekLock && m.LockToken != (core.LockToken{}) {
		sc.dann.Reset()
		writeLockTokenAnnotation(&sc.dann, m.LockToken)
		am.RawDeliveryAnnotations = sc.dann.Bytes()
	}
	if ep := m.EncodedProperties; ep.Bytes != nil && ep.Codec == propertyCodecID {
		am.RawApplicationProperties = ep.Bytes // as they arrived
	} else if err := writeProperties(am, m, sc); err != nil {
		return nil, fmt.Errorf("encode message %d: %w", m.SequenceNumber, err)
	}
	switch m.BodyType {
	case core.BodyBinary:
		am.BodyKind = frames.BodyData
		sc.data[0] = m.Body
		if m.Body == nil {
			sc.data[0] = []byte{}
		}
		am.Data = sc.data[:]
	default:
		if len(m.Body) > 0 {
			am.RawBody = m.Body
		}
	}
	body, err := am.MarshalBodyApart(&sc.out)
	if err != nil {
		return nil, fmt.Errorf("encode message %d: %w", m.SequenceNumber, err)
	}
	return body, nil
}

// writeLockTokenAnnotation writes the delivery annotations of a
// peek-locked delivery, the map {x-opt-lock-token: tok}, as marshalling
// that Map would, without boxing the token.
func writeLockTokenAnnotation(w *buffer.Buffer, tok core.LockToken) {
	_ = encoding.WriteMapWith(w, func() (int, error) {
		encoding.WriteSymbol(w, annLockToken)
		encoding.WriteUUID(w, encoding.UUID(tok))
		return 1, nil
	})
}

// writeProperties sets am's application properties to m's, encoded from
// core's form (decoded first if they are in an encoding not this
// front's).
func writeProperties(am *frames.Message, m *core.Message, sc *deliveryScratch) error {
	props, err := m.Properties()
	if err != nil {
		return err
	}
	if len(props) == 0 {
		return nil
	}
	// Written straight from core's map in key order, as Marshal writes
	// the equivalent sorted Map, but without building that Map and boxing
	// every key for each delivery.
	keys := sc.keys[:0]
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	sc.props.Reset()
	if err := encoding.WriteStringKeyedMap(&sc.props, keys, func(k string) any {
		return valueToAMQP(props[k])
	}); err != nil {
		return err
	}
	am.RawApplicationProperties = sc.props.Bytes()
	return nil
}

// deliveryScratch is the message encodeDelivery builds and marshals, with
// room for its sections and typical annotations: pooled, so that a
// delivery allocates its payload and the values boxed into annotations,
// not the structure around them.
type deliveryScratch struct {
	am    frames.Message
	hdr   frames.MessageHeader
	sys   frames.MessageProperties
	anns  [12]encoding.KeyValue
	data  [1][]byte
	keys  []string      // application property keys, sorted (then annotation keys)
	props buffer.Buffer // the application properties, encoded
	ann   buffer.Buffer // the message annotations, encoded
	dann  buffer.Buffer // the delivery annotations, encoded
	out   buffer.Buffer // the delivery's sections but its body, encoded
}

// maxKeptScratch bounds what a pooled deliveryScratch keeps of its key
// slice and property buffer for the next delivery.
const maxKeptScratch = 4 << 10

var deliveryScratches = sync.Pool{New: func() any { return new(deliveryScratch) }}

// next readies sc for the next message of a batch: what the last one
// left in its message and scalars is dropped, its buffers and what out
// holds are kept.
func (sc *deliveryScratch) next() {
	*sc = deliveryScratch{keys: sc.keys[:0], props: sc.props, ann: sc.ann, dann: sc.dann, out: sc.out}
}

// release drops what sc refers to (message bodies among it) and returns
// it to the pool.
func (sc *deliveryScratch) release() {
	keys, props, ann, dann, out := sc.keys[:0], sc.props, sc.ann, sc.dann, sc.out
	*sc = deliveryScratch{}
	if cap(keys) <= maxKeptScratch/16 && cap(props.Raw()) <= maxKeptScratch && cap(ann.Raw()) <= maxKeptScratch &&
		cap(out.Raw()) <= maxKeptScratch {
		clear(keys[:cap(keys)]) // the keys of the last message: let them go
		props.Reset()
		ann.Reset()
		dann.Reset()
		out.Reset()
		sc.keys, sc.props, sc.ann, sc.dann, sc.out = keys, props, ann, dann, out
	}
	deliveryScratches.Put(sc)
}

// absoluteExpiry is the delivered absolute-expiry-time. The JS SDK
// derives a received message's timeToLive as absolute-expiry-time minus
// creation-time, so when the sender set a creation time (JS always does)
// the expiry is written relative to it and the TTL reads back exactly as
// sent; otherwise it is the broker's ExpiresAt.
func absoluteExpiry(m *core.Message) time.Time {
	if m.ExpiresAt.IsZero() {
		return time.Time{}
	}
	if !m.CreationTime.IsZero() && m.TimeToLive > 0 {
		return m.CreationTime.Add(m.TimeToLive)
	}
	return m.ExpiresAt
}

// ttlMillis is the header ttl: the sender's time to live, else the
// effective one the broker applied, when it fits a uint (about 49 days).
func ttlMillis(m *core.Message) uint32 {
	ttl := m.TimeToLive
	if ttl <= 0 && !m.ExpiresAt.IsZero() && !m.EnqueuedTime.IsZero() {
		ttl = m.ExpiresAt.Sub(m.EnqueuedTime)
	}
	ms := ttl.Milliseconds()
	if ms <= 0 || ms > math.MaxUint32 {
		return 0
	}
	return uint32(ms)
}

// writeDeliveryAnnotations writes the message annotations of a delivered
// message as a map, each broker annotation with the exact AMQP type
// amqp.md §4.2 requires, followed by the sender's own annotations in key
// order: what marshalling appendDeliveryAnnotations' Map writes
// (TestDeliveryAnnotationsWrittenAsTheirMap), with the values written by
// type instead of boxed into a Map. sc lends its key slice.
func writeDeliveryAnnotations(w *buffer.Buffer, m *core.Message, peekLock bool, sc *deliveryScratch) error {
	return encoding.WriteMapWith(w, func() (int, error) {
		n := 0
		sym := func(k encoding.Symbol) { encoding.WriteSymbol(w, k); n++ }
		sym(annSequenceNumber)
		encoding.WriteLong(w, m.SequenceNumber)
		sym(annEnqueuedTime)
		encoding.WriteTimestamp(w, m.EnqueuedTime)
		if peekLock && !m.LockedUntil.IsZero() {
			sym(annLockedUntil)
			encoding.WriteTimestamp(w, m.LockedUntil)
		}
		if m.EnqueuedSequenceNumber != 0 {
			sym(annEnqueueSequenceNumber)
			encoding.WriteLong(w, m.EnqueuedSequenceNumber)
		}
		sym(annMessageState)
		encoding.WriteInt(w, int32(m.State))
		if !m.ScheduledEnqueueTime.IsZero() {
			sym(annScheduledEnqueueTime)
			encoding.WriteTimestamp(w, m.ScheduledEnqueueTime)
		}
		if m.PartitionKey != "" {
			sym(annPartitionKey)
			encoding.WriteString(w, m.PartitionKey)
		}
		if m.ViaPartitionKey != "" {
			sym(annViaPartitionKey)
			encoding.WriteString(w, m.ViaPartitionKey)
		}
		if m.DeadLetterSource != "" {
			sym(annDeadLetterSource)
			encoding.WriteString(w, m.DeadLetterSource)
		}
		if len(m.Annotations) == 0 {
			return n, nil
		}
		keys := sc.keys[:0]
		for k := range m.Annotations {
			if !brokerOwned(encoding.Symbol(k)) && !isMappedAnnotation(encoding.Symbol(k)) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		sc.keys = keys
		for _, k := range keys {
			sym(encoding.Symbol(k))
			if err := encoding.Marshal(w, valueToAMQP(m.Annotations[k])); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
}

func isMappedAnnotation(k encoding.Symbol) bool {
	return k == annPartitionKey || k == annViaPartitionKey || k == annScheduledEnqueueTime
}

// lockTokenToDeliveryTag returns the delivery tag that carries tok: the
// 16 bytes of the token in .NET Guid.ToByteArray order, i.e. with the
// first three groups little-endian (amqp.md §4.2). Both SDKs reverse this.
func lockTokenToDeliveryTag(tok core.LockToken) []byte {
	return appendDeliveryTag(make([]byte, 0, len(tok)), tok)
}

// appendDeliveryTag appends the delivery tag that carries tok to b.
func appendDeliveryTag(b []byte, tok core.LockToken) []byte {
	return append(b,
		tok[3], tok[2], tok[1], tok[0],
		tok[5], tok[4],
		tok[7], tok[6],
		tok[8], tok[9], tok[10], tok[11], tok[12], tok[13], tok[14], tok[15])
}

// deliveryTagToLockToken is the inverse of [lockTokenToDeliveryTag]. It
// reports false if tag is not 16 bytes long.
func deliveryTagToLockToken(tag []byte) (core.LockToken, bool) {
	var tok core.LockToken
	if len(tag) != len(tok) {
		return tok, false
	}
	copy(tok[:], lockTokenToDeliveryTag(core.LockToken(tag)))
	return tok, true
}
