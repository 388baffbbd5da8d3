package console

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Peek limits: a page holds at most maxPeek messages and maxPeekBytes of
// them (Message.Size; the first whatever its size), and one call looks at
// no more than maxPeekScan messages to fill it (a filter on state may
// match few), answering where to go on from.
const (
	maxPeek      = 200
	maxPeekBytes = 4 << 20
	maxPeekScan  = 10000
	peekChunk    = 250
)

// messageJSON is a message as the page shows it: every system property,
// the custom properties with their types, and the body in base64 (the
// page decides whether it is text, JSON or binary). The body is not a
// field: page.write streams it as "body" straight from the message
// (peekpage.go).
type messageJSON struct {
	SequenceNumber       int64      `json:"sequenceNumber"`
	State                string     `json:"state"`
	MessageID            string     `json:"messageId,omitempty"`
	CorrelationID        string     `json:"correlationId,omitempty"`
	SessionID            string     `json:"sessionId,omitempty"`
	ReplyToSessionID     string     `json:"replyToSessionId,omitempty"`
	To                   string     `json:"to,omitempty"`
	ReplyTo              string     `json:"replyTo,omitempty"`
	Subject              string     `json:"subject,omitempty"`
	ContentType          string     `json:"contentType,omitempty"`
	ContentEncoding      string     `json:"contentEncoding,omitempty"`
	PartitionKey         string     `json:"partitionKey,omitempty"`
	TimeToLive           string     `json:"timeToLive,omitempty"`
	EnqueuedTime         time.Time  `json:"enqueuedTime"`
	ScheduledEnqueueTime time.Time  `json:"scheduledEnqueueTime"`
	ExpiresAt            time.Time  `json:"expiresAt"`
	DeliveryCount        int32      `json:"deliveryCount"`
	DeadLetterSource     string     `json:"deadLetterSource,omitempty"`
	EnqueuedSequence     int64      `json:"enqueuedSequenceNumber"`
	BodyType             string     `json:"bodyType"`
	BodySize             int        `json:"bodySize"`
	Properties           []propJSON `json:"properties"`
	// PropertiesError says why the properties could not be read (a
	// damaged record, which `omnibus check` reports too).
	PropertiesError string `json:"propertiesError,omitempty"`
}

// propJSON is a custom property: its name, a type name the send form
// also offers, and its value as text.
type propJSON struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// peek browses messages without locking them. Parameters: path (queue or
// subscription), state (active, deadletter, scheduled, deferred, or all),
// from (sequence number, default 1), max (1 to 200, default 50).
// Dead-lettered messages are those of the entity's dead-letter subqueue,
// deferred ones there included.
func (h *Handler) peek(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	path := qs.Get("path")
	if path == "" {
		writeJSONError(w, http.StatusBadRequest, "peek needs the path parameter")
		return
	}
	if !h.authorize(w, r, path, sas.Listen) {
		return
	}
	from, max := int64(1), 50
	var err error
	if s := qs.Get("from"); s != "" {
		if from, err = strconv.ParseInt(s, 10, 64); err != nil || from < 0 {
			writeJSONError(w, http.StatusBadRequest, "from must be a sequence number")
			return
		}
	}
	if s := qs.Get("max"); s != "" {
		if max, err = strconv.Atoi(s); err != nil || max < 1 || max > maxPeek {
			writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("max must be a number from 1 to %d", maxPeek))
			return
		}
	}
	keep := func(*core.Message) bool { return true }
	switch st := qs.Get("state"); st {
	case "all", "":
	case "active":
		keep = func(m *core.Message) bool { return m.State == core.StateActive }
	case "scheduled":
		keep = func(m *core.Message) bool { return m.State == core.StateScheduled }
	case "deferred":
		keep = func(m *core.Message) bool { return m.State == core.StateDeferred }
	case "deadletter":
		path += "/$DeadLetterQueue"
	default:
		writeJSONError(w, http.StatusBadRequest, "state must be active, deadletter, scheduled, deferred or all")
		return
	}
	pg := &page{mem: h.mem}
	defer pg.release()
	for pg.scanned < maxPeekScan && len(pg.msgs) < max && !pg.full {
		got, err := h.broker(r).Peek(r.Context(), path, core.PeekOptions{From: from, Max: peekChunk, Reserve: pg.reserve})
		if err != nil {
			h.writeCoreError(w, r, err)
			return
		}
		if len(got) == 0 {
			if !pg.full {
				from = 0 // the end
			}
			break
		}
		for i, m := range got {
			got[i] = nil
			if len(pg.msgs) == max {
				pg.drop(m)
				continue
			}
			pg.scanned++
			from = m.SequenceNumber + 1
			if keep(m) {
				pg.msgs = append(pg.msgs, m)
			} else {
				pg.drop(m)
			}
		}
	}
	if len(pg.msgs) == 0 && pg.refused {
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeJSONError(w, http.StatusServiceUnavailable, memoryBusyText)
		return
	}
	pg.write(w, from)
}

// toJSON converts a peeked message.
func toJSON(m *core.Message) messageJSON {
	j := messageJSON{
		SequenceNumber: m.SequenceNumber, State: m.State.String(),
		MessageID: m.MessageIDString(), CorrelationID: m.CorrelationIDString(),
		SessionID: m.SessionID, ReplyToSessionID: m.ReplyToSessionID, To: m.To, ReplyTo: m.ReplyTo,
		Subject: m.Subject, ContentType: m.ContentType, ContentEncoding: m.ContentEncoding,
		PartitionKey: m.PartitionKey, EnqueuedTime: m.EnqueuedTime, ScheduledEnqueueTime: m.ScheduledEnqueueTime,
		ExpiresAt: m.ExpiresAt, DeliveryCount: m.DeliveryCount, DeadLetterSource: m.DeadLetterSource,
		EnqueuedSequence: m.EnqueuedSequenceNumber, BodyType: "binary", BodySize: len(m.Body),
		Properties: []propJSON{},
	}
	if m.TimeToLive > 0 {
		j.TimeToLive = m.TimeToLive.String()
	}
	if m.BodyType == core.BodyAMQP {
		j.BodyType = "amqp"
	}
	props, err := m.Properties()
	if err != nil {
		j.PropertiesError = err.Error()
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t, v := typedValue(props[k])
		j.Properties = append(j.Properties, propJSON{Name: k, Type: t, Value: v})
	}
	return j
}

// typedValue names a property value's type and writes it as text.
func typedValue(v any) (typ, text string) {
	switch x := v.(type) {
	case nil:
		return "null", ""
	case string:
		return "string", x
	case core.Symbol:
		return "symbol", string(x)
	case bool:
		return "bool", strconv.FormatBool(x)
	case int8, int16, int32, int, int64:
		return fmt.Sprintf("%T", v), fmt.Sprint(x)
	case uint8, uint16, uint32, uint64:
		return fmt.Sprintf("%T", v), fmt.Sprint(x)
	case float32:
		return "float", strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return "double", strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return "datetime", x.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return "timespan", x.String()
	case core.UUID:
		return "uuid", x.String()
	case []byte:
		return "binary", fmt.Sprintf("%x", x)
	}
	return fmt.Sprintf("%T", v), fmt.Sprint(v)
}
