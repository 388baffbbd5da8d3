package httpgw

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/omnibusmq/omnibus/core"
)

// batchContentType marks a send-batch request (rest.md §1.4).
const batchContentType = "application/vnd.microsoft.servicebus.json"

// sendMessages handles POST {queue|topic}/messages: one message, or a JSON
// batch when the Content-Type says so. Both answer 201 with no body.
func (g *Gateway) sendMessages(w http.ResponseWriter, r *http.Request) {
	path := mux.Vars(r)["entity"]
	d, err := g.broker(r).GetEntity(path)
	if err != nil {
		g.writeCoreError(w, r, runtimeAPI, err)
		return
	}
	limit := d.MaxMessageSizeInKilobytes * 1024
	body, held, err := readBody(r, limit, g.cfg.Memory)
	defer g.cfg.Memory.Release(held) // the body is stored, or dropped, when the handler returns
	if errors.Is(err, errMemory) {
		g.refuseMemory(w, r)
		return
	}
	if errors.Is(err, errBodyTooLarge) {
		g.writeError(w, r, http.StatusForbidden, fmt.Sprintf("The received message (size above %d bytes) exceeds the limit (%d bytes) of '%s'", limit, limit, d.Path()))
		return
	}
	if err != nil {
		g.badRequest(w, r, "Reading the request body failed: %v", err)
		return
	}
	var msgs []*core.Message
	if isBatch(r.Header.Get("Content-Type")) {
		msgs, err = parseBatch(body)
	} else {
		var m *core.Message
		m, err = g.singleMessage(r, body)
		msgs = []*core.Message{m}
	}
	if err != nil {
		g.badRequest(w, r, "%v", err)
		return
	}
	for _, m := range msgs {
		if m.MessageID == nil {
			m.MessageID = newMessageID()
		}
	}
	// A batch goes to one partition: on a partitioned entity its messages
	// must share a partition key, as over AMQP (the ids just given count
	// where the entity detects duplicates, as the service's own do).
	if err := core.CheckBatchKeys(d, msgs); err != nil {
		g.writeCoreError(w, r, runtimeAPI, err)
		return
	}
	if _, err := g.broker(r).Send(r.Context(), path, msgs...); err != nil {
		g.writeCoreError(w, r, runtimeAPI, err)
		return
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusCreated)
}

// singleMessage builds the message of a plain send: the body as is, the
// Content-Type kept for the receiver, BrokerProperties and one custom
// property per other header.
func (g *Gateway) singleMessage(r *http.Request, body []byte) (*core.Message, error) {
	m := &core.Message{Body: body, BodyType: core.BodyBinary, ContentType: r.Header.Get("Content-Type")}
	if err := parseBrokerProperties(r.Header.Get(headerBrokerProperties), m); err != nil {
		return nil, err
	}
	props, err := propertiesFromHeaders(r.Header, g.cfg.StrictProperties)
	if err != nil {
		return nil, err
	}
	m.ApplicationProperties = props
	return m, nil
}

// isBatch reports whether a Content-Type is the batch media type.
func isBatch(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && strings.EqualFold(mt, batchContentType)
}

// batchItem is one element of a send-batch body (rest.md §1.4). Field
// names match case-insensitively (encoding/json).
type batchItem struct {
	Body             json.RawMessage
	IsBodyBase64     bool
	BrokerProperties json.RawMessage
	UserProperties   map[string]json.RawMessage
	// ContentType is not documented; honoured when present so batch
	// senders can label bodies (rest.md §1.4 REC).
	ContentType string
}

// parseBatch decodes a send-batch body into messages.
func parseBatch(body []byte) ([]*core.Message, error) {
	var items []batchItem
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, fmt.Errorf("the batch body is not a JSON array of messages: %v", err)
	}
	if len(items) == 0 {
		return nil, errors.New("the batch body holds no messages")
	}
	msgs := make([]*core.Message, len(items))
	for i, it := range items {
		m, err := it.message()
		if err != nil {
			return nil, fmt.Errorf("batch message %d: %v", i, err)
		}
		msgs[i] = m
	}
	return msgs, nil
}

func (it *batchItem) message() (*core.Message, error) {
	m := &core.Message{BodyType: core.BodyBinary, ContentType: it.ContentType}
	switch {
	case len(it.Body) == 0 || string(it.Body) == "null":
	case it.Body[0] == '"':
		var s string
		if err := json.Unmarshal(it.Body, &s); err != nil {
			return nil, fmt.Errorf("Body: %v", err)
		}
		m.Body = []byte(s)
		if it.IsBodyBase64 {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, fmt.Errorf("Body is not valid base64 although IsBodyBase64 is true")
			}
			m.Body = b
		}
	default:
		if it.IsBodyBase64 {
			return nil, errors.New("Body must be a string when IsBodyBase64 is true")
		}
		m.Body = []byte(it.Body) // a JSON value sent unquoted: keep its text
	}
	if len(it.BrokerProperties) > 0 && string(it.BrokerProperties) != "null" {
		if err := parseBrokerProperties(string(it.BrokerProperties), m); err != nil {
			return nil, err
		}
	}
	var budget propertyBudget
	for name, raw := range it.UserProperties {
		if err := budget.take(name, len(raw)); err != nil {
			return nil, err
		}
		v, keep, err := userPropertyValue(raw)
		if err != nil {
			return nil, fmt.Errorf("UserProperties %q: %v", name, err)
		}
		if !keep {
			continue
		}
		if m.ApplicationProperties == nil {
			m.ApplicationProperties = make(map[string]any)
		}
		m.ApplicationProperties[name] = v
	}
	return m, nil
}

// userPropertyValue types a batch UserProperties value: strings stay
// strings, integers become int64, other numbers float64, booleans bool;
// null is dropped; lists and objects are refused.
func userPropertyValue(raw json.RawMessage) (any, bool, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false, err
	}
	switch x := v.(type) {
	case nil:
		return nil, false, nil
	case string, bool:
		return x, true, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, true, nil
		}
		f, err := x.Float64()
		return f, err == nil, err
	}
	return nil, false, errors.New("must be a string, number or boolean")
}

// newMessageID is the id the service gives a message sent without one: a
// GUID without dashes (rest.md §1.5).
func newMessageID() string {
	u := core.NewUUID()
	return hex.EncodeToString(u[:])
}
