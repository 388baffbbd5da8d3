package conformance

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Helpers for the REST runtime API (rest.md §1, §2).

// BrokerProps is a decoded BrokerProperties header.
type BrokerProps map[string]any

// brokerProps decodes resp's BrokerProperties header, failing the
// scenario if it is missing or not JSON.
func (t *T) brokerProps(resp *RESTResponse) BrokerProps {
	h := resp.Header.Get("BrokerProperties")
	if h == "" {
		t.Fatalf("%s: no BrokerProperties header", resp.Request.URL.Path)
	}
	dec := json.NewDecoder(strings.NewReader(h))
	dec.UseNumber()
	var bp BrokerProps
	if err := dec.Decode(&bp); err != nil {
		t.Fatalf("BrokerProperties %q is not a JSON object: %v", h, err)
	}
	return bp
}

// String returns a string-valued key ("" if absent or not a string).
func (bp BrokerProps) String(k string) string {
	s, _ := bp[k].(string)
	return s
}

// Int returns an integral key and whether it is one.
func (bp BrokerProps) Int(k string) (int64, bool) {
	n, ok := bp[k].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// Float returns a numeric key and whether it is one.
func (bp BrokerProps) Float(k string) (float64, bool) {
	n, ok := bp[k].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Float64()
	return v, err == nil
}

// Time parses an RFC 1123 date key.
func (bp BrokerProps) Time(k string) (time.Time, error) {
	return time.Parse(http.TimeFormat, bp.String(k))
}

// expectStatus fails the scenario unless resp has the given status.
func (t *T) expectStatus(resp *RESTResponse, want int, what string) {
	if resp.StatusCode != want {
		t.Fatalf("%s: HTTP %d, want %d (body %s)", what, resp.StatusCode, want, oneLine(string(resp.Body), 200))
	}
}

// restSend sends one message over REST and expects 201.
func (t *T) restSend(entity string, body []byte, header http.Header) {
	t.expectStatus(t.REST(http.MethodPost, entity+"/messages", body, header), http.StatusCreated, "send")
}

// brokerHeader is a header set with a BrokerProperties JSON object.
func brokerHeader(bp map[string]any) http.Header {
	b, _ := json.Marshal(bp)
	return http.Header{"BrokerProperties": {string(b)}}
}

// peekLock posts to path/messages/head (path: queue, subscription or
// dead-letter path) with the given long-poll timeout in seconds.
func (t *T) peekLock(path string, timeout int) *RESTResponse {
	return t.REST(http.MethodPost, fmt.Sprintf("%s/messages/head?timeout=%d", path, timeout), nil, nil)
}

// lockedMessage peek-locks one message and fails unless it got 201.
func (t *T) lockedMessage(path string) *RESTResponse {
	resp := t.peekLock(path, 10)
	t.expectStatus(resp, http.StatusCreated, "peek-lock "+path)
	return resp
}

// location returns the namespace-relative path of resp's Location header.
func (t *T) location(resp *RESTResponse) string {
	loc := resp.Header.Get("Location")
	if loc == "" {
		t.Fatalf("peek-lock answer has no Location header")
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatalf("Location %q: %v", loc, err)
	}
	return strings.TrimPrefix(u.EscapedPath(), "/")
}

// messagePath is the unlock/complete/renew URL of a message by sequence
// number and lock token.
func messagePath(entityPath string, seq int64, lock string) string {
	return fmt.Sprintf("%s/messages/%d/%s", entityPath, seq, lock)
}

// uuidString formats a lock token in RFC byte order as a UUID.
func uuidString(b [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// parseUUID parses a dashed UUID into RFC byte order.
func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	raw, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(raw) != 16 {
		return u, fmt.Errorf("%q is not a UUID", s)
	}
	copy(u[:], raw)
	return u, nil
}

// headerValue finds a custom-property header case-insensitively.
func headerValue(h http.Header, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0], true
		}
	}
	return "", false
}

// propValue finds an application property case-insensitively (HTTP
// header names carry no case).
func propValue(props map[string]any, name string) (any, bool) {
	if v, ok := props[name]; ok {
		return v, true
	}
	for k, v := range props {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}

// atomQueueEntry is an ATOM create-queue body with default properties.
func atomQueueEntry() []byte {
	return []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"></QueueDescription>` +
		`</content></entry>`)
}

// atomHeader is the request header of ATOM management calls.
func atomHeader() http.Header {
	return http.Header{"Content-Type": {"application/atom+xml;type=entry;charset=utf-8"}}
}

// isNumber reports whether s is a bare JSON-style number.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// quoted reports whether s is wrapped in double quotes, and its inside.
func quoted(s string) (string, bool) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1], true
	}
	return s, false
}

func equalBytes(a, b []byte) bool { return bytes.Equal(a, b) }
