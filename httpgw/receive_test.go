package httpgw

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

func TestPeekLockResponse(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "HttpClientSampleQueue")
	w := e.do(t, request{method: "POST", target: "/HttpClientSampleQueue/messages", body: "This is a message.",
		header: map[string]string{"Content-Type": "text/plain", "BrokerProperties": `{"Label":"M1","TimeToLive":10}`,
			"Priority": `"High"`, "Customer": `"12345,ABC"`, "N": "5", "F": "2.5", "Ok": "true", "When": `"Fri, 04 Mar 2011 08:49:37 GMT"`}})
	if w.Code != http.StatusCreated {
		t.Fatalf("send: %d %s", w.Code, w.Body.String())
	}
	w = e.do(t, request{method: "POST", target: "/HttpClientSampleQueue/messages/head?timeout=60"})
	if w.Code != http.StatusCreated {
		t.Fatalf("peek-lock: %d %s", w.Code, w.Body.String())
	}
	if got := body(t, w); got != "This is a message." {
		t.Errorf("body %q", got)
	}
	h := w.Header()
	var bp map[string]any
	if err := json.Unmarshal([]byte(hget(h, "BrokerProperties")), &bp); err != nil {
		t.Fatalf("BrokerProperties %q: %v", hget(h, "BrokerProperties"), err)
	}
	lock, _ := bp["LockToken"].(string)
	if _, err := core.ParseUUID(lock); err != nil {
		t.Fatalf("LockToken %q", lock)
	}
	enq := coretest.Epoch.Format(http.TimeFormat)
	locked := coretest.Epoch.Add(time.Minute).Format(http.TimeFormat)
	want := map[string]any{"DeliveryCount": 1.0, "EnqueuedSequenceNumber": 1.0, "EnqueuedTimeUtc": enq, "Label": "M1",
		"LockToken": lock, "LockedUntilUtc": locked, "SequenceNumber": 1.0, "State": "Active", "TimeToLive": 10.0}
	for k, v := range want {
		if bp[k] != v {
			t.Errorf("BrokerProperties[%s] = %v, want %v", k, bp[k], v)
		}
	}
	if id, _ := bp["MessageId"].(string); len(id) != 32 {
		t.Errorf("MessageId %v", bp["MessageId"])
	}
	if loc, want := hget(h, "Location"), "http://localhost/httpclientsamplequeue/messages/1/"+lock; loc != want {
		t.Errorf("Location %q, want %q", loc, want)
	}
	for k, v := range map[string]string{"Content-Type": "text/plain", "Priority": `"High"`, "Customer": `"12345,ABC"`,
		"N": "5", "F": "2.5", "Ok": "true", "When": `"Fri, 04 Mar 2011 08:49:37 GMT"`} {
		if got := hget(h, k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	// BrokerProperties keys come in alphabetical order, as the service writes them.
	raw := hget(h, "BrokerProperties")
	if strings.Index(raw, `"DeliveryCount"`) > strings.Index(raw, `"LockToken"`) ||
		strings.Index(raw, `"LockToken"`) > strings.Index(raw, `"LockedUntilUtc"`) ||
		strings.Index(raw, `"State"`) > strings.Index(raw, `"TimeToLive"`) {
		t.Errorf("keys not alphabetical: %s", raw)
	}
}

func TestReceiveAndDeleteResponse(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	e.MustSend(t, "q", &core.Message{Body: []byte("hi"), MessageID: "m1"})
	w := e.do(t, request{method: "DELETE", target: "/q/messages/head?timeout=5"})
	if w.Code != http.StatusOK || body(t, w) != "hi" {
		t.Fatalf("receive: %d %q", w.Code, w.Body.String())
	}
	h := w.Header()
	if hget(h, "Location") != "" {
		t.Errorf("Location on receive-and-delete: %q", hget(h, "Location"))
	}
	if _, ok := h["Content-Type"]; ok && hget(h, "Content-Type") != "" {
		t.Errorf("Content-Type %q for a message without one", hget(h, "Content-Type"))
	}
	bp := hget(h, "BrokerProperties")
	if strings.Contains(bp, "LockToken") || !strings.Contains(bp, `"MessageId":"m1"`) ||
		!strings.Contains(bp, `"TimeToLive":`+maxTTLSeconds) {
		t.Errorf("BrokerProperties %s", bp)
	}
	if c, _ := e.Broker.Counts("q"); c.Total != 0 {
		t.Errorf("message still stored: %+v", c)
	}
}

func TestReceiveTimeoutIsALongPoll(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "q")
	start := time.Now()
	w := e.do(t, request{method: "POST", target: "/q/messages/head?timeout=0.05"})
	if w.Code != http.StatusNoContent || hget(w.Header(), "Content-Length") != "0" {
		t.Fatalf("empty peek-lock: %d %v", w.Code, w.Header())
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("returned after %v, before the timeout", took)
	}
	// A message sent while the request waits is delivered to it.
	done := make(chan int, 1)
	go func() {
		done <- e.do(t, request{method: "POST", target: "/q/messages/head?timeout=30"}).Code
	}()
	for {
		e.MustSend(t, "q", coretest.Text("late"))
		select {
		case code := <-done:
			if code != http.StatusCreated {
				t.Fatalf("waiting peek-lock: %d", code)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestReceiveFromSubscriptionAndDeadLetter(t *testing.T) {
	e := newTestEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	e.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
	e.mustQueue(t, "q")
	if w := e.do(t, request{method: "POST", target: "/t/messages", body: "to-sub"}); w.Code != 201 {
		t.Fatalf("send to topic: %d", w.Code)
	}
	w := e.do(t, request{method: "POST", target: "/t/subscriptions/s/messages/head?timeout=1"})
	if w.Code != 201 || body(t, w) != "to-sub" || !strings.Contains(hget(w.Header(), "Location"), "/t/subscriptions/s/messages/1/") {
		t.Fatalf("subscription peek-lock: %d %v", w.Code, w.Header())
	}
	e.MustSend(t, "q", coretest.Text("dead"))
	msgs, err := e.Broker.Receive(t.Context(), "q", core.ReceiveOptions{Mode: core.PeekLock})
	if err != nil || len(msgs) != 1 {
		t.Fatal(err)
	}
	if err := e.Broker.Settle(t.Context(), "q", msgs[0].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "r"}); err != nil {
		t.Fatal(err)
	}
	w = e.do(t, request{method: "DELETE", target: "/q/$DeadLetterQueue/messages/head?timeout=1"})
	if w.Code != 200 || body(t, w) != "dead" || hget(w.Header(), "DeadLetterReason") != `"r"` {
		t.Fatalf("dead-letter receive: %d %v", w.Code, w.Header())
	}
}

func TestReceiveErrors(t *testing.T) {
	e := newTestEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true})
	cases := []struct {
		req    request
		status int
	}{
		{request{method: "POST", target: "/missing/messages/head?timeout=0"}, 410},
		{request{method: "DELETE", target: "/missing/messages/head?timeout=0"}, 410},
		{request{method: "POST", target: "/sq/messages/head?timeout=abc"}, 400},
		{request{method: "POST", target: "/sq/messages/head?timeout=-1"}, 400},
		{request{method: "POST", target: "/sq/messages/head?timeout=0"}, 400}, // sessions are not served over REST
	}
	for _, c := range cases {
		if w := e.do(t, c.req); w.Code != c.status {
			t.Errorf("%s %s: got %d, want %d: %s", c.req.method, c.req.target, w.Code, c.status, w.Body.String())
		}
	}
}
