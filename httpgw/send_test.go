package httpgw

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/core"
)

// receiveOne takes the next message straight from the broker.
func (e *testEnv) receiveOne(t testing.TB, path string) *core.Message {
	t.Helper()
	msgs, err := e.Broker.Receive(t.Context(), path, core.ReceiveOptions{Mode: core.ReceiveAndDelete})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive %s: %v, %d messages", path, err, len(msgs))
	}
	return msgs[0]
}

func TestSendSingle(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	w := e.do(t, request{method: "POST", target: "/q/messages?timeout=60", body: "This is a message.",
		header: map[string]string{
			"Content-Type":     "text/plain",
			"BrokerProperties": `{"Label":"M1","State":"Active","TimeToLive":10,"SequenceNumber":99,"CorrelationId":"c1","SessionId":"","To":"x","ReplyTo":"y","ReplyToSessionId":"z","ScheduledEnqueueTimeUtc":"Sun, 06 Nov 1994 08:49:37 GMT","MessageId":"m-1"}`,
			"Priority":         `"High"`,
			"Customer":         "12345,ABC",
			"Price":            "299.98",
			"Count":            "3",
			"Flag":             "true",
			"Order-Time":       `"Fri, 04 Mar 2011 08:49:37 GMT"`,
			"X-Ms-Retrypolicy": "NoRetry",
			"User-Agent":       "test",
		}})
	if w.Code != http.StatusCreated {
		t.Fatalf("send: %d %s", w.Code, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/xml; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	m := e.receiveOne(t, "q")
	if string(m.Body) != "This is a message." || m.ContentType != "text/plain" {
		t.Errorf("body %q type %q", m.Body, m.ContentType)
	}
	if m.Subject != "M1" || m.TimeToLive != 10*time.Second || m.CorrelationID != "c1" || m.To != "x" ||
		m.ReplyTo != "y" || m.ReplyToSessionID != "z" || m.MessageID != "m-1" || m.SequenceNumber == 99 {
		t.Errorf("system properties not applied: %+v", m)
	}
	if !m.ScheduledEnqueueTime.Equal(time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC)) {
		t.Errorf("ScheduledEnqueueTime %v", m.ScheduledEnqueueTime)
	}
	want := map[string]any{
		"Priority": "High", "Customer": "12345,ABC", "Price": 299.98, "Count": int64(3), "Flag": true,
		"Order-Time": time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC),
	}
	if diff := cmp.Diff(want, m.ApplicationProperties); diff != "" {
		t.Errorf("application properties (-want +got):\n%s", diff)
	}
}

func TestSendGeneratesMessageID(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.do(t, request{method: "POST", target: "/q/messages", body: "x"})
	m := e.receiveOne(t, "q")
	id, _ := m.MessageID.(string)
	if len(id) != 32 || strings.Contains(id, "-") {
		t.Errorf("generated MessageId %q, want 32 hex digits", id)
	}
}

func TestSendBatch(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	batch := `[{"Body":"Message1","UserProperties":{"Color":"red","N":7,"F":1.5,"B":false,"Nil":null},"BrokerProperties":{"Label":"L1","MessageId":"a"}},
	{"Body":"aGVsbG8=","IsBodyBase64":true},
	{"body":"third","ContentType":"text/plain"}]`
	w := e.do(t, request{method: "POST", target: "/q/messages", body: batch,
		header: map[string]string{"Content-Type": batchContentType + "; charset=utf-8", "Ignored": `"header"`}})
	if w.Code != http.StatusCreated {
		t.Fatalf("batch: %d %s", w.Code, w.Body.String())
	}
	m1 := e.receiveOne(t, "q")
	if string(m1.Body) != "Message1" || m1.Subject != "L1" || m1.MessageID != "a" || m1.ContentType != "" {
		t.Errorf("first: %+v", m1)
	}
	if diff := cmp.Diff(map[string]any{"Color": "red", "N": int64(7), "F": 1.5, "B": false}, m1.ApplicationProperties); diff != "" {
		t.Errorf("user properties (-want +got):\n%s", diff)
	}
	if m2 := e.receiveOne(t, "q"); string(m2.Body) != "hello" {
		t.Errorf("base64 body %q", m2.Body)
	}
	if m3 := e.receiveOne(t, "q"); string(m3.Body) != "third" || m3.ContentType != "text/plain" {
		t.Errorf("third: %+v", m3)
	}
}

func TestSendErrors(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "small", MaxMessageSizeInKilobytes: core.DefaultMaxMessageSizeKB})
	batch := map[string]string{"Content-Type": batchContentType}
	cases := []struct {
		name   string
		req    request
		status int
		detail string
	}{
		{"missing entity", request{method: "POST", target: "/nope/messages", body: "x"}, 410, "could not be found"},
		{"bad BrokerProperties", request{method: "POST", target: "/q/messages", header: map[string]string{"BrokerProperties": "{nope"}}, 400, "BrokerProperties"},
		{"bad TTL", request{method: "POST", target: "/q/messages", header: map[string]string{"BrokerProperties": `{"TimeToLive":"soon"}`}}, 400, "TimeToLive"},
		{"negative TTL", request{method: "POST", target: "/q/messages", header: map[string]string{"BrokerProperties": `{"TimeToLive":-1}`}}, 400, "positive"},
		{"bad date", request{method: "POST", target: "/q/messages", header: map[string]string{"BrokerProperties": `{"ScheduledEnqueueTimeUtc":"tomorrow"}`}}, 400, "RFC 1123"},
		{"session mismatch", request{method: "POST", target: "/q/messages", header: map[string]string{"BrokerProperties": `{"SessionId":"a","PartitionKey":"b"}`}}, 400, "must be equal"},
		{"too large", request{method: "POST", target: "/small/messages", body: strings.Repeat("x", 256<<10+1)}, 403, "exceeds the limit"},
		{"too large with props", request{method: "POST", target: "/small/messages", body: strings.Repeat("x", 256<<10-50), header: map[string]string{"P": `"` + strings.Repeat("y", 100) + `"`}}, 403, "exceeds the limit"},
		{"property too large", request{method: "POST", target: "/q/messages", header: map[string]string{"P": strings.Repeat("y", 33<<10)}}, 400, "at most"},
		{"batch not JSON", request{method: "POST", target: "/q/messages", body: "nope", header: batch}, 400, "JSON array"},
		{"batch empty", request{method: "POST", target: "/q/messages", body: "[]", header: batch}, 400, "no messages"},
		{"batch bad base64", request{method: "POST", target: "/q/messages", body: `[{"Body":"!!","IsBodyBase64":true}]`, header: batch}, 400, "base64"},
		{"batch bad property", request{method: "POST", target: "/q/messages", body: `[{"Body":"x","UserProperties":{"L":[1]}}]`, header: batch}, 400, "UserProperties"},
		{"send to subscription path", request{method: "POST", target: "/q/$DeadLetterQueue/messages", body: "x"}, 400, "send to its queue"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := e.do(t, c.req)
			got := body(t, w)
			if w.Code != c.status || !strings.Contains(got, c.detail) || !strings.HasPrefix(got, "<Error><Code>") {
				t.Fatalf("got %d %q, want %d containing %q", w.Code, got, c.status, c.detail)
			}
		})
	}
}

func TestSendStrictProperties(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	gw, err := New(Config{Broker: e.Broker, StrictProperties: true})
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	w := e.do(t, request{method: "POST", target: "/q/messages", header: map[string]string{"Priority": "High"}})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "quote strings") {
		t.Fatalf("strict: %d %s", w.Code, w.Body.String())
	}
	w = e.do(t, request{method: "POST", target: "/q/messages", header: map[string]string{"Priority": `"High"`}})
	if w.Code != http.StatusCreated {
		t.Fatalf("strict quoted: %d %s", w.Code, w.Body.String())
	}
}

// TestSendBatchPartitioned: a send-batch to a partitioned entity goes to
// one partition, so its messages must share a partition key, as over
// AMQP (core.CheckBatchKeys): else 400 and nothing stored.
func TestSendBatchPartitioned(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pdq", EnablePartitioning: true, RequiresDuplicateDetection: true})
	const (
		plain = "Batching brokered messages with distinct SessionId or PartitionKey is not supported for an entity with partitioning enabled."
		dedup = "Batching brokered messages with distinct SessionId, PartitionKey, or MessageId is not supported for an entity with partitioning and duplicate detection enabled."
	)
	twoKeys := `[{"Body":"a","BrokerProperties":{"PartitionKey":"red"}},{"Body":"b","BrokerProperties":{"PartitionKey":"blue"}}]`
	oneKey := `[{"Body":"a","BrokerProperties":{"PartitionKey":"red"}},{"Body":"b","BrokerProperties":{"SessionId":"red"}}]`
	keyAndNone := `[{"Body":"a","BrokerProperties":{"PartitionKey":"red"}},{"Body":"b"}]`
	twoSessions := `[{"Body":"a","BrokerProperties":{"SessionId":"s1"}},{"Body":"b","BrokerProperties":{"SessionId":"s2"}}]`
	noKeys := `[{"Body":"a"},{"Body":"b"}]`
	onePartitionKey := `[{"Body":"a","BrokerProperties":{"PartitionKey":"k"}},{"Body":"b","BrokerProperties":{"PartitionKey":"k"}}]`
	for _, c := range []struct {
		name, to, batch string
		refused         string // "" when the batch is taken
	}{
		{"two partition keys", "pq", twoKeys, plain},
		{"a key and none", "pq", keyAndNone, plain},
		{"two session ids", "pq", twoSessions, plain},
		{"a partition key and the same session id", "pq", oneKey, ""},
		{"no keys", "pq", noKeys, ""},
		{"no keys, duplicate detection (each gets its own MessageId)", "pdq", noKeys, dedup},
		{"one partition key, duplicate detection", "pdq", onePartitionKey, ""},
		{"two partition keys, not partitioned", "q", twoKeys, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.MustCounts(t, c.to).Total
			w := e.do(t, request{method: "POST", target: "/" + c.to + "/messages", body: c.batch,
				header: map[string]string{"Content-Type": batchContentType}})
			got := body(t, w)
			after := e.MustCounts(t, c.to).Total
			if c.refused == "" {
				if w.Code != http.StatusCreated || after != before+2 {
					t.Fatalf("got %d %q, %d stored; want 201 and 2 stored", w.Code, got, after-before)
				}
				return
			}
			if w.Code != http.StatusBadRequest || !strings.Contains(got, c.refused) {
				t.Fatalf("got %d %q, want 400 containing %q", w.Code, got, c.refused)
			}
			if after != before {
				t.Fatalf("the refused batch stored %d messages", after-before)
			}
		})
	}
}
