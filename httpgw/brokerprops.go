package httpgw

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// headerBrokerProperties carries a message's system properties as a JSON
// object (rest.md §2).
const headerBrokerProperties = "BrokerProperties"

// maxTTLSeconds is how BrokerProperties writes a TimeToLive of
// TimeSpan.MaxValue (no expiry), exactly as the service does (rest.md §0.6).
const maxTTLSeconds = "922337203685.47754"

// maxIDLength bounds MessageId, SessionId and PartitionKey (rest.md §6).
const maxIDLength = 128

// parseBrokerProperties applies a BrokerProperties value (header text or a
// batch item's object) to m. It accepts strict JSON and, failing that, the
// legacy forms clients send (Python dict repr, typographic quotes). Keys
// match case-insensitively; get-only and unknown keys are ignored
// (rest.md §2.1, §2.2). Every malformed value is an error naming the key.
func parseBrokerProperties(text string, m *core.Message) error {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		lenient, ok := lenientJSON(text)
		if !ok || json.Unmarshal([]byte(lenient), &raw) != nil {
			return fmt.Errorf("BrokerProperties is not a JSON object: %v", err)
		}
	}
	for key, v := range raw {
		if err := applyBrokerProperty(m, key, v); err != nil {
			return err
		}
	}
	if m.SessionID != "" && m.PartitionKey != "" && m.SessionID != m.PartitionKey {
		return fmt.Errorf("BrokerProperties: PartitionKey %q and SessionId %q must be equal when both are set", m.PartitionKey, m.SessionID)
	}
	for name, v := range map[string]string{"MessageId": m.MessageIDString(), "SessionId": m.SessionID, "PartitionKey": m.PartitionKey} {
		if len(v) > maxIDLength {
			return fmt.Errorf("BrokerProperties: %s is longer than %d characters", name, maxIDLength)
		}
	}
	return nil
}

// applyBrokerProperty sets one settable property.
func applyBrokerProperty(m *core.Message, key string, v json.RawMessage) error {
	if string(v) == "null" {
		return nil
	}
	str := func(dst *string) error {
		s, err := jsonText(v)
		if err != nil {
			return fmt.Errorf("BrokerProperties: %s must be a string: %v", key, err)
		}
		*dst = s
		return nil
	}
	switch strings.ToLower(key) {
	case "correlationid":
		var s string
		if err := str(&s); err != nil {
			return err
		}
		m.CorrelationID = s
	case "messageid":
		var s string
		if err := str(&s); err != nil {
			return err
		}
		m.MessageID = s
	case "label":
		return str(&m.Subject)
	case "sessionid":
		return str(&m.SessionID)
	case "partitionkey":
		return str(&m.PartitionKey)
	case "viapartitionkey":
		return str(&m.ViaPartitionKey)
	case "replyto":
		return str(&m.ReplyTo)
	case "replytosessionid":
		return str(&m.ReplyToSessionID)
	case "to":
		return str(&m.To)
	case "timetolive":
		ttl, err := ttlFromSeconds(v)
		if err != nil {
			return fmt.Errorf("BrokerProperties: TimeToLive %v", err)
		}
		m.TimeToLive = ttl
	case "timetolivetimespan":
		var s string
		if err := str(&s); err != nil {
			return err
		}
		ttl, err := parseTimeSpan(s)
		if err != nil || ttl <= 0 {
			return fmt.Errorf("BrokerProperties: TimeToLiveTimeSpan %q is not a positive d.hh:mm:ss time span", s)
		}
		m.TimeToLive = ttl
	case "scheduledenqueuetimeutc":
		var s string
		if err := str(&s); err != nil {
			return err
		}
		t, err := parseHTTPDate(s)
		if err != nil {
			return fmt.Errorf("BrokerProperties: ScheduledEnqueueTimeUtc %q is not an RFC 1123 date such as %q", s, "Sun, 06 Nov 1994 08:49:37 GMT")
		}
		m.ScheduledEnqueueTime = t
	case "forcepersistence":
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("BrokerProperties: ForcePersistence must be true or false")
		}
	}
	return nil
}

// jsonText returns a JSON string's value, or the literal text of a number
// (clients sometimes send numeric ids unquoted).
func jsonText(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err == nil {
		return n.String(), nil
	}
	return "", errors.New("got " + string(v))
}

// ttlFromSeconds converts a TimeToLive (seconds, a JSON number or numeric
// string) to a duration; values at or above TimeSpan.MaxValue mean "never".
func ttlFromSeconds(v json.RawMessage) (time.Duration, error) {
	s, err := jsonText(v)
	if err != nil {
		return 0, fmt.Errorf("must be a number of seconds: %v", err)
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(secs) {
		return 0, fmt.Errorf("must be a number of seconds, got %s", v)
	}
	if secs <= 0 {
		return 0, fmt.Errorf("must be positive, got %s", v)
	}
	if secs >= float64(core.MaxTimeToLive)/float64(time.Second) {
		return core.MaxTimeToLive, nil
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// parseTimeSpan parses a .NET TimeSpan "[-][d.]hh:mm:ss[.fffffff]".
func parseTimeSpan(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var days int64
	hms := s
	if dot := strings.IndexByte(s, '.'); dot >= 0 && dot < strings.IndexByte(s, ':') {
		d, err := strconv.ParseInt(s[:dot], 10, 32)
		if err != nil {
			return 0, err
		}
		days, hms = d, s[dot+1:]
	}
	parts := strings.Split(hms, ":")
	if len(parts) != 3 {
		return 0, errors.New("want hh:mm:ss")
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 32)
	mi, err2 := strconv.ParseInt(parts[1], 10, 32)
	sec, err3 := strconv.ParseFloat(parts[2], 64)
	if err := errors.Join(err1, err2, err3); err != nil || mi > 59 || sec >= 60 || sec < 0 {
		return 0, errors.New("bad hh:mm:ss")
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute +
		time.Duration(sec*float64(time.Second))
	return d, nil
}

// parseHTTPDate parses an RFC 2616 date (RFC 1123, RFC 850 or asctime),
// tolerating surrounding spaces, and as a courtesy RFC 3339.
func parseHTTPDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := http.ParseTime(s); err == nil {
		return t.UTC(), nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// formatHTTPDate writes t as RFC 1123 in GMT, second precision.
func formatHTTPDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// receivedProperties is the BrokerProperties of a received message, keys
// in alphabetical order as the service writes them (rest.md §1.5).
type receivedProperties struct {
	CorrelationID           string      `json:"CorrelationId,omitempty"`
	DeliveryCount           int32       `json:"DeliveryCount"`
	EnqueuedSequenceNumber  int64       `json:"EnqueuedSequenceNumber"`
	EnqueuedTimeUtc         string      `json:"EnqueuedTimeUtc"`
	Label                   string      `json:"Label,omitempty"`
	LockToken               string      `json:"LockToken,omitempty"`
	LockedUntilUtc          string      `json:"LockedUntilUtc,omitempty"`
	MessageID               string      `json:"MessageId"`
	PartitionKey            string      `json:"PartitionKey,omitempty"`
	ReplyTo                 string      `json:"ReplyTo,omitempty"`
	ReplyToSessionID        string      `json:"ReplyToSessionId,omitempty"`
	ScheduledEnqueueTimeUtc string      `json:"ScheduledEnqueueTimeUtc,omitempty"`
	SequenceNumber          int64       `json:"SequenceNumber"`
	SessionID               string      `json:"SessionId,omitempty"`
	State                   string      `json:"State"`
	TimeToLive              json.Number `json:"TimeToLive"`
	To                      string      `json:"To,omitempty"`
	ViaPartitionKey         string      `json:"ViaPartitionKey,omitempty"`
}

// formatBrokerProperties returns the BrokerProperties header of a received
// message; the lock fields appear only for a peek-locked one.
func formatBrokerProperties(m *core.Message) string {
	p := receivedProperties{
		CorrelationID:          m.CorrelationIDString(),
		DeliveryCount:          m.DeliveryCount,
		EnqueuedSequenceNumber: m.EnqueuedSequenceNumber,
		EnqueuedTimeUtc:        formatHTTPDate(m.EnqueuedTime),
		Label:                  m.Subject,
		MessageID:              m.MessageIDString(),
		PartitionKey:           m.PartitionKey,
		ReplyTo:                m.ReplyTo,
		ReplyToSessionID:       m.ReplyToSessionID,
		SequenceNumber:         m.SequenceNumber,
		SessionID:              m.SessionID,
		State:                  m.State.String(),
		TimeToLive:             json.Number(formatTTL(m)),
		To:                     m.To,
		ViaPartitionKey:        m.ViaPartitionKey,
	}
	if m.LockToken != (core.LockToken{}) {
		p.LockToken = m.LockToken.String()
		p.LockedUntilUtc = formatHTTPDate(m.LockedUntil)
	}
	if !m.ScheduledEnqueueTime.IsZero() {
		p.ScheduledEnqueueTimeUtc = formatHTTPDate(m.ScheduledEnqueueTime)
	}
	b, err := json.Marshal(p)
	if err != nil { // cannot happen: only strings and numbers
		return "{}"
	}
	return string(b)
}

// formatTTL is the message's TimeToLive in seconds: the sender's, else the
// one the entity applied (ExpiresAt − EnqueuedTime), else "never".
func formatTTL(m *core.Message) string {
	ttl := m.TimeToLive
	if ttl == 0 && !m.ExpiresAt.IsZero() && !m.EnqueuedTime.IsZero() {
		ttl = m.ExpiresAt.Sub(m.EnqueuedTime)
	}
	if ttl <= 0 || ttl >= core.MaxTimeToLive {
		return maxTTLSeconds
	}
	return strconv.FormatFloat(ttl.Seconds(), 'f', -1, 64)
}
