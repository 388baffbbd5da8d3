package core

import (
	"time"

	"github.com/omnibusmq/omnibus/core/filter"
)

// filterMsg adapts a *Message to the filter package's view of a message.
// Encoded application properties are decoded the first time a filter
// asks for one, once for all the subscriptions a send evaluates; a rule
// action changes a message whose properties are decoded already
// ([Message.ownProperties]).
type filterMsg struct {
	m       *Message
	props   map[string]any // m's properties, decoded, once decoded is set
	decoded bool
}

var _ filter.MutableMessage = (*filterMsg)(nil)

func nonEmpty(s string) (any, bool) { return s, s != "" }

// System returns a system property by its Service Bus name.
func (f *filterMsg) System(name string) (any, bool) {
	m := f.m
	switch name {
	case "MessageId":
		return m.MessageID, m.MessageID != nil
	case "CorrelationId":
		return m.CorrelationID, m.CorrelationID != nil
	case "SessionId":
		return nonEmpty(m.SessionID)
	case "ReplyToSessionId":
		return nonEmpty(m.ReplyToSessionID)
	case "To":
		return nonEmpty(m.To)
	case "ReplyTo":
		return nonEmpty(m.ReplyTo)
	case "Label":
		return nonEmpty(m.Subject)
	case "ContentType":
		return nonEmpty(m.ContentType)
	case "PartitionKey":
		return nonEmpty(m.PartitionKey)
	case "ViaPartitionKey":
		return nonEmpty(m.ViaPartitionKey)
	case "TimeToLive":
		return m.TimeToLive, m.TimeToLive > 0
	case "ScheduledEnqueueTimeUtc":
		return m.ScheduledEnqueueTime, !m.ScheduledEnqueueTime.IsZero()
	case "SequenceNumber":
		return m.SequenceNumber, true
	case "EnqueuedSequenceNumber":
		return m.EnqueuedSequenceNumber, true
	case "EnqueuedTimeUtc":
		return m.EnqueuedTime, !m.EnqueuedTime.IsZero()
	case "ExpiresAtUtc":
		return m.ExpiresAt, !m.ExpiresAt.IsZero()
	case "DeliveryCount":
		return int64(m.DeliveryCount), true
	case "Size":
		return int64(m.Size()), true
	case "DeadLetterSource":
		return nonEmpty(m.DeadLetterSource)
	case "State":
		return int64(m.State), true
	}
	return nil, false
}

// Property returns an application property. Names match
// case-insensitively, as in Service Bus filters, after an exact match is
// tried: HTTP clients cannot preserve the case of a custom property
// header, so "color" must find "Color".
//
// Properties that cannot be decoded (which the front that encoded them
// checked when they arrived, so only a damaged record could hold) read
// as absent.
func (f *filterMsg) Property(name string) (any, bool) {
	if !f.m.encoded() {
		return propertyIn(f.m.ApplicationProperties, name)
	}
	if !f.decoded {
		f.props, _ = f.m.EncodedProperties.decode()
		f.decoded = true
	}
	return propertyIn(f.props, name)
}

// SetSystem sets a settable system property (rule actions).
func (f *filterMsg) SetSystem(name string, v any) error {
	m := f.m
	str := func(p *string) error {
		switch x := v.(type) {
		case nil:
			*p = ""
		case string:
			*p = x
		default:
			return errf(CodeBadRequest, "sys.%s must be a string, got %T", name, v)
		}
		return nil
	}
	switch name {
	case "MessageId":
		m.MessageID = v
	case "CorrelationId":
		m.CorrelationID = v
	case "SessionId":
		return str(&m.SessionID)
	case "ReplyToSessionId":
		return str(&m.ReplyToSessionID)
	case "To":
		return str(&m.To)
	case "ReplyTo":
		return str(&m.ReplyTo)
	case "Label":
		return str(&m.Subject)
	case "ContentType":
		return str(&m.ContentType)
	case "PartitionKey":
		return str(&m.PartitionKey)
	case "ViaPartitionKey":
		return str(&m.ViaPartitionKey)
	case "TimeToLive":
		switch x := v.(type) {
		case time.Duration:
			m.TimeToLive = x
		case int64:
			m.TimeToLive = time.Duration(x) * time.Millisecond
		case nil:
			m.TimeToLive = 0
		default:
			return errf(CodeBadRequest, "sys.TimeToLive must be a duration, got %T", v)
		}
	case "ScheduledEnqueueTimeUtc":
		t, ok := v.(time.Time)
		if !ok && v != nil {
			return errf(CodeBadRequest, "sys.ScheduledEnqueueTimeUtc must be a time, got %T", v)
		}
		m.ScheduledEnqueueTime = t
	default:
		return errf(CodeBadRequest, "sys.%s cannot be set", name)
	}
	return nil
}

// SetProperty sets an application property. The message's properties
// are decoded (see filterMsg).
func (f *filterMsg) SetProperty(name string, v any) {
	_ = f.m.ownProperties() // decoded already: fanOut decoded the copy
	if f.m.ApplicationProperties == nil {
		f.m.ApplicationProperties = make(map[string]any)
	}
	f.m.ApplicationProperties[name] = v
}

// RemoveProperty deletes an application property.
func (f *filterMsg) RemoveProperty(name string) {
	_ = f.m.ownProperties()
	delete(f.m.ApplicationProperties, name)
}
