package httpgw

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Service Bus's name and range rules (core/names.go, core/validate.go)
// seen through ATOM management over a real socket: a PUT the service
// would refuse gets 400 with its text and creates nothing.

const atomNS = `xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"`

// atomEntry wraps a description element (QueueDescription, ...) holding
// inner in an ATOM entry.
func atomEntry(kind, inner string) string {
	return `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><` + kind + ` ` + atomNS + `>` +
		inner + `</` + kind + `></content></entry>`
}

// wireCall sends one request to srv with the raw path given (kept as
// written: no cleaning, escapes sent as they are) and returns the status
// and body.
func wireCall(t *testing.T, srv *httptest.Server, method, path, body, token string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", "application/atom+xml;type=entry;charset=utf-8")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// want400 checks a Service Bus 400: SubCode=40000 and the text.
func want400(t *testing.T, what string, status int, body, text string) {
	t.Helper()
	if status != http.StatusBadRequest || !strings.HasPrefix(body, "<Error><Code>400</Code><Detail>SubCode=40000. ") || !strings.Contains(body, text) {
		t.Errorf("%s: %d %s\nwant 400 with SubCode=40000 saying %q", what, status, body, text)
	}
}

func TestATOMRefusesNamesServiceBusRefuses(t *testing.T) {
	e := newTestEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	e.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
	srv := httptest.NewServer(e.gw.Handler())
	t.Cleanup(srv.Close)
	const (
		badChars = "contains character(s) that is not allowed by Service Bus. Entity segments can contain only letters, numbers, periods (.), hyphens (-), and underscores (_)."
		dotSegs  = "has an empty, '.' or '..' segment"
		startEnd = "must start and end with a letter or a number"
	)
	queue, sub := atomEntry("QueueDescription", ""), atomEntry("SubscriptionDescription", "")
	rule := atomEntry("RuleDescription", `<Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression></Filter>`)
	for _, tc := range []struct{ path, body, text string }{
		{"/a/../orders", queue, dotSegs},
		{"/a/%2e%2e/orders", queue, dotSegs},
		{"/a/%2E%2E/orders", queue, dotSegs},
		{"/a/./orders", queue, dotSegs},
		{"/a//orders", queue, dotSegs},
		{"/a~b", queue, badChars},
		{"/a%20b", queue, badChars},
		{"/a%2Bb", queue, badChars},
		{"/-orders", queue, startEnd},
		{"/orders_", queue, startEnd},
		{"/a" + strings.Repeat("b", 260), queue, "exceeds the '260' character limit"},
		{"/t/Subscriptions/" + strings.Repeat("s", 51), sub, "exceeds the '50' character limit"},
		{"/t/Subscriptions/s~1", sub, badChars},
		{"/t/Subscriptions/s/Rules/r~1", rule, badChars},
		{"/t/Subscriptions/s/Rules/" + strings.Repeat("r", 51), rule, "exceeds the '50' character limit"},
	} {
		status, body := wireCall(t, srv, http.MethodPut, tc.path+"?api-version=2021-05", tc.body, testToken(), nil)
		want400(t, "PUT "+tc.path, status, body, tc.text)
	}
	if qs, _ := e.Broker.ListEntities(core.KindQueue, ""); len(qs) != 0 {
		t.Errorf("queues after the refused PUTs: %d, want none", len(qs))
	}
	if subs, _ := e.Broker.ListEntities(core.KindSubscription, "t"); len(subs) != 1 || len(subs[0].Rules) != 1 {
		t.Errorf("subscriptions of t after the refused PUTs: %+v, want s with its $Default rule only", subs)
	}
}

func TestATOMRefusesValuesOutOfRange(t *testing.T) {
	e := newTestEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	e.mustQueue(t, "existing")
	srv := httptest.NewServer(e.gw.Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		path, kind, inner, text string
	}{
		{"/q", "QueueDescription", "<MaxSizeInMegabytes>9223372036854775807</MaxSizeInMegabytes>",
			"The specified value 9223372036854775807 is invalid. The property 'MaxSizeInMegabytes', must be one of the following values: 1024;2048;3072;4096;5120;10240;20480;40960;81920."},
		{"/q", "QueueDescription", "<MaxSizeInMegabytes>1</MaxSizeInMegabytes>", "The specified value 1 is invalid."},
		{"/tt", "TopicDescription", "<MaxSizeInMegabytes>16384</MaxSizeInMegabytes>", "The specified value 16384 is invalid."},
		{"/q", "QueueDescription", "<LockDuration>PT10M</LockDuration>", "The property value for 'LockDuration' must be between 00:00:05 and 00:05:00, got 00:10:00."},
		{"/q", "QueueDescription", "<LockDuration>PT1S</LockDuration>", "'LockDuration' must be between 00:00:05 and 00:05:00"},
		{"/q", "QueueDescription", "<MaxDeliveryCount>-1</MaxDeliveryCount>", "'MaxDeliveryCount' must be between 1 and 2147483647"},
		{"/q", "QueueDescription", "<DefaultMessageTimeToLive>PT0.5S</DefaultMessageTimeToLive>", "'DefaultMessageTimeToLive' must be at least 00:00:01"},
		{"/q", "QueueDescription", "<AutoDeleteOnIdle>PT1M</AutoDeleteOnIdle>", "'AutoDeleteOnIdle' must be at least 00:05:00"},
		{"/q", "QueueDescription", "<DuplicateDetectionHistoryTimeWindow>PT5S</DuplicateDetectionHistoryTimeWindow>", "'DuplicateDetectionHistoryTimeWindow' must be between 00:00:20 and 7.00:00:00"},
		{"/tt", "TopicDescription", "<DuplicateDetectionHistoryTimeWindow>P8D</DuplicateDetectionHistoryTimeWindow>", "'DuplicateDetectionHistoryTimeWindow'"},
		{"/q", "QueueDescription", "<MaxMessageSizeInKilobytes>1</MaxMessageSizeInKilobytes>", "'MaxMessageSizeInKilobytes' must be 256, or between 1024 and 102400"},
		{"/tt", "TopicDescription", "<MaxMessageSizeInKilobytes>204800</MaxMessageSizeInKilobytes>", "'MaxMessageSizeInKilobytes'"},
		{"/q", "QueueDescription", "<UserMetadata>" + strings.Repeat("m", 1025) + "</UserMetadata>", "'UserMetadata' must be at most 1024 characters"},
		{"/t/Subscriptions/s", "SubscriptionDescription", "<LockDuration>PT6M</LockDuration>", "'LockDuration'"},
		{"/t/Subscriptions/s", "SubscriptionDescription", "<MaxDeliveryCount>-5</MaxDeliveryCount>", "'MaxDeliveryCount'"},
		// Zero is no default when sent: every range excludes it.
		{"/q", "QueueDescription", "<MaxDeliveryCount>0</MaxDeliveryCount>", "'MaxDeliveryCount' must be between 1 and 2147483647, got 0."},
		{"/q", "QueueDescription", "<LockDuration>PT0S</LockDuration>", "'LockDuration' must be between 00:00:05 and 00:05:00, got 00:00:00."},
		{"/q", "QueueDescription", "<MaxSizeInMegabytes>0</MaxSizeInMegabytes>", "The specified value 0 is invalid."},
		{"/tt", "TopicDescription", "<DefaultMessageTimeToLive>PT0S</DefaultMessageTimeToLive>", "'DefaultMessageTimeToLive'"},
		{"/t/Subscriptions/s", "SubscriptionDescription", "<MaxDeliveryCount>0</MaxDeliveryCount>", "'MaxDeliveryCount'"},
		{"/t/Subscriptions/s", "SubscriptionDescription", "<AutoDeleteOnIdle>PT0S</AutoDeleteOnIdle>", "'AutoDeleteOnIdle'"},
	} {
		status, body := wireCall(t, srv, http.MethodPut, tc.path, atomEntry(tc.kind, tc.inner), testToken(), nil)
		want400(t, tc.path+" "+tc.inner, status, body, tc.text)
	}
	// An update is held to the same ranges, and leaves the entity as it was.
	status, body := wireCall(t, srv, http.MethodPut, "/existing", atomEntry("QueueDescription", "<MaxSizeInMegabytes>2</MaxSizeInMegabytes>"), testToken(), map[string]string{"If-Match": "*"})
	want400(t, "update of existing", status, body, "The specified value 2 is invalid.")
	if d, err := e.Broker.GetEntity("existing"); err != nil || d.MaxSizeInMegabytes != core.DefaultMaxSizeInMegabytes {
		t.Errorf("existing after the refused update: %+v, %v", d, err)
	}
	if qs, _ := e.Broker.ListEntities(core.KindQueue, ""); len(qs) != 1 {
		t.Errorf("%d queues after the refused PUTs, want only existing", len(qs))
	}
}

// A token for "a" reaches neither "a/../orders" nor "orders" through a
// dot segment, escaped or not, on any route; the namespace key reaches no
// entity there either (the path is not resolved to "orders").
func TestTokenScopeIgnoresDotSegments(t *testing.T) {
	e := newTestEnv(t)
	e.mustQueue(t, "a")
	e.mustQueue(t, "orders")
	srv := httptest.NewServer(e.gw.Handler())
	t.Cleanup(srv.Close)
	forA := sas.Sign("https://localhost/a", DefaultKeyName, DefaultKey, time.Now().Add(time.Hour))
	if status, body := wireCall(t, srv, http.MethodPost, "/a/messages", "hello", forA, nil); status != http.StatusCreated {
		t.Fatalf("send to a with a token for a: %d %s", status, body)
	}
	for _, p := range []string{"/a/../orders", "/a/%2e%2e/orders", "/a/%2E%2e/orders", "/a/./../orders", "/a/%2e/%2e%2e/orders"} {
		for _, c := range []struct{ method, suffix, body string }{
			{http.MethodPost, "/messages", "x"},
			{http.MethodPost, "/messages/head", ""},
			{http.MethodDelete, "/messages/head", ""},
			{http.MethodPut, "", atomEntry("QueueDescription", "")},
			{http.MethodGet, "", ""},
			{http.MethodDelete, "", ""},
		} {
			if status, body := wireCall(t, srv, c.method, p+c.suffix+"?timeout=0", c.body, forA, nil); status != http.StatusUnauthorized {
				t.Errorf("%s %s%s with a token for a: %d %s, want 401", c.method, p, c.suffix, status, body)
			}
		}
		if status, body := wireCall(t, srv, http.MethodPost, p+"/messages", "x", testToken(), nil); status != http.StatusGone {
			t.Errorf("send to %s with the namespace key: %d %s, want 410 (no such entity)", p, status, body)
		}
	}
	if c, err := e.Broker.Counts("orders"); err != nil || c.Total != 0 {
		t.Errorf("orders holds %+v (%v), want nothing", c, err)
	}
	if c, err := e.Broker.Counts("a"); err != nil || c.Total != 1 {
		t.Errorf("a holds %+v (%v), want the one message", c, err)
	}
}

// The official Go admin client hears the 400 and its text.
func TestGoAdminClientHearsRangeErrors(t *testing.T) {
	e := newTestEnv(t)
	c := newAdminClient(t, e, false)
	_, err := c.CreateQueue(t.Context(), "q", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{MaxSizeInMegabytes: to.Ptr[int32](1)}})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "MaxSizeInMegabytes") {
		t.Errorf("CreateQueue with MaxSizeInMegabytes 1: %v, want a 400 naming MaxSizeInMegabytes", err)
	}
	// The client signs each request's URL, so its token is for
	// a/../orders itself and the name is what is refused.
	_, err = c.CreateQueue(t.Context(), "a/../orders", nil)
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "segment") {
		t.Errorf("CreateQueue a/../orders: %v, want a 400 about the name", err)
	}
	_, err = c.CreateTopic(t.Context(), "t", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{DuplicateDetectionHistoryTimeWindow: to.Ptr("PT1S")}})
	if err == nil || !strings.Contains(err.Error(), "DuplicateDetectionHistoryTimeWindow") {
		t.Errorf("CreateTopic with a 1 s duplicate window: %v", err)
	}
	if qs, _ := e.Broker.ListEntities(core.KindQueue, ""); len(qs) != 0 {
		t.Errorf("%d queues created", len(qs))
	}
}
