package httpgw

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

const queueEntry = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
	`<LockDuration>PT45S</LockDuration><MaxDeliveryCount>7</MaxDeliveryCount></QueueDescription></content></entry>`

const topicEntry = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
	`<TopicDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><MaxSizeInMegabytes>2048</MaxSizeInMegabytes></TopicDescription></content></entry>`

func TestQueueLifecycle(t *testing.T) {
	e := newTestEnv(t)
	atomCT := map[string]string{"Content-Type": "application/atom+xml;type=entry;charset=utf-8"}
	w := e.do(t, request{method: "PUT", target: "/orders?api-version=2021-05", body: queueEntry, header: atomCT})
	if w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body.String())
	}
	got := body(t, w)
	for _, want := range []string{"<title type=\"text\">orders</title>", "<id>http://localhost/orders?api-version=2021-05</id>",
		"<LockDuration>PT45S</LockDuration>", "<MaxDeliveryCount>7</MaxDeliveryCount>"} {
		if !strings.Contains(got, want) {
			t.Errorf("create response lacks %q:\n%s", want, got)
		}
	}
	if d, err := e.Broker.GetEntity("orders"); err != nil || d.LockDuration != 45*time.Second || d.MaxDeliveryCount != 7 {
		t.Fatalf("core entity %+v, %v", d, err)
	}
	if w := e.do(t, request{method: "PUT", target: "/orders", body: queueEntry}); w.Code != http.StatusConflict {
		t.Errorf("second create: %d, want 409", w.Code)
	}
	update := strings.Replace(queueEntry, "PT45S", "PT2M", 1)
	w = e.do(t, request{method: "PUT", target: "/orders", body: update, header: map[string]string{"If-Match": "*"}})
	if w.Code != http.StatusOK || !strings.Contains(body(t, w), "<LockDuration>PT2M</LockDuration>") {
		t.Fatalf("update: %d %s", w.Code, w.Body.String())
	}
	e.MustSend(t, "orders", coretest.Text("a"), coretest.Text("b"))
	w = e.do(t, request{method: "GET", target: "/orders"})
	got = body(t, w)
	if w.Code != 200 || !strings.Contains(got, "<MessageCount>2</MessageCount>") || !strings.Contains(got, "<d2p1:ActiveMessageCount>2</d2p1:ActiveMessageCount>") {
		t.Errorf("get with counts: %d %s", w.Code, got)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/atom+xml;type=entry;charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if w := e.do(t, request{method: "DELETE", target: "/orders"}); w.Code != http.StatusOK {
		t.Errorf("delete: %d", w.Code)
	}
	if w := e.do(t, request{method: "DELETE", target: "/orders"}); w.Code != http.StatusNotFound {
		t.Errorf("second delete: %d, want 404", w.Code)
	}
	w = e.do(t, request{method: "GET", target: "/orders"})
	if got := body(t, w); w.Code != 200 || !strings.Contains(got, "<title type=\"text\">Publicly Listed Services</title>") {
		t.Errorf("get missing: %d %s", w.Code, got)
	}
}

func TestManagementErrors(t *testing.T) {
	e := newTestEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	cases := []struct {
		name   string
		req    request
		status int
	}{
		{"not XML", request{method: "PUT", target: "/q", body: "nope"}, 400},
		{"bad duration", request{method: "PUT", target: "/q", body: strings.Replace(queueEntry, "PT45S", "soon", 1)}, 400},
		{"out of range", request{method: "PUT", target: "/q", body: strings.Replace(queueEntry, "PT45S", "PT1S", 1)}, 400},
		{"topic body on sub path", request{method: "PUT", target: "/t/Subscriptions/s", body: topicEntry}, 400},
		{"update missing", request{method: "PUT", target: "/q", body: queueEntry, header: map[string]string{"If-Match": "*"}}, 404},
		{"sub of missing topic", request{method: "GET", target: "/nope/Subscriptions/s"}, 404},
		{"list subs of missing topic", request{method: "GET", target: "/nope/Subscriptions"}, 404},
		{"missing sub", request{method: "GET", target: "/t/Subscriptions/s"}, 404},
		{"bad $top", request{method: "GET", target: "/$Resources/Queues?$top=0"}, 400},
		{"topic as queue update", request{method: "PUT", target: "/t", body: queueEntry, header: map[string]string{"If-Match": "*"}}, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if w := e.do(t, c.req); w.Code != c.status {
				t.Fatalf("got %d, want %d: %s", w.Code, c.status, w.Body.String())
			}
		})
	}
}

func TestListPaging(t *testing.T) {
	e := newTestEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.mustQueue(t, n)
	}
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	w := e.do(t, request{method: "GET", target: "/$Resources/Queues?%24skip=1&%24top=1"})
	got := body(t, w)
	if w.Code != 200 || strings.Count(got, "<entry>") != 1 || !strings.Contains(got, `<title type="text">b</title>`) ||
		!strings.Contains(got, `rel="next"`) || !strings.Contains(got, "%24skip=2") {
		t.Fatalf("page: %d %s", w.Code, got)
	}
	w = e.do(t, request{method: "GET", target: "/$resources/topics"})
	got = body(t, w)
	if strings.Count(got, "<entry>") != 1 || !strings.Contains(got, "<TopicDescription") || strings.Contains(got, `rel="next"`) {
		t.Fatalf("topics: %s", got)
	}
}

func TestSubscriptionsAndRules(t *testing.T) {
	e := newTestEnv(t)
	e.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	sub := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><SubscriptionDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
		`<LockDuration>PT30S</LockDuration><DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>color = 'red'</SqlExpression></Filter><Name>red</Name></DefaultRuleDescription></SubscriptionDescription></content></entry>`
	if w := e.do(t, request{method: "PUT", target: "/t/Subscriptions/s", body: sub}); w.Code != 201 {
		t.Fatalf("create sub: %d %s", w.Code, w.Body.String())
	}
	w := e.do(t, request{method: "GET", target: "/t/subscriptions/s/rules/"})
	got := body(t, w)
	if w.Code != 200 || !strings.Contains(got, "<Name>red</Name>") || !strings.Contains(got, "color = &#39;red&#39;") && !strings.Contains(got, "color = 'red'") {
		t.Fatalf("rules: %d %s", w.Code, got)
	}
	rule := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">` +
		`<Filter i:type="CorrelationFilter"><CorrelationId>c1</CorrelationId></Filter><Action i:type="SqlRuleAction"><SqlExpression>SET x = 1</SqlExpression></Action><Name>corr</Name></RuleDescription></content></entry>`
	if w := e.do(t, request{method: "PUT", target: "/t/Subscriptions/s/Rules/corr", body: rule}); w.Code != 201 {
		t.Fatalf("create rule: %d %s", w.Code, w.Body.String())
	}
	if w := e.do(t, request{method: "PUT", target: "/t/Subscriptions/s/Rules/corr", body: rule}); w.Code != 409 {
		t.Fatalf("duplicate rule: %d", w.Code)
	}
	w = e.do(t, request{method: "GET", target: "/t/Subscriptions/s/Rules/corr"})
	if got := body(t, w); w.Code != 200 || !strings.Contains(got, "<CorrelationId>c1</CorrelationId>") || !strings.Contains(got, "SET x = 1") {
		t.Fatalf("get rule: %d %s", w.Code, got)
	}
	update := strings.Replace(rule, "c1", "c2", 1)
	if w := e.do(t, request{method: "PUT", target: "/t/Subscriptions/s/Rules/corr", body: update, header: map[string]string{"If-Match": "*"}}); w.Code != 200 || !strings.Contains(w.Body.String(), "c2") {
		t.Fatalf("update rule: %d %s", w.Code, w.Body.String())
	}
	w = e.do(t, request{method: "GET", target: "/t"})
	if got := body(t, w); !strings.Contains(got, "<SubscriptionCount>1</SubscriptionCount>") {
		t.Errorf("topic counts: %s", got)
	}
	if w := e.do(t, request{method: "DELETE", target: "/t/Subscriptions/s/Rules/red"}); w.Code != 200 {
		t.Fatalf("delete rule: %d", w.Code)
	}
	if w := e.do(t, request{method: "GET", target: "/t/Subscriptions/s/Rules/red"}); w.Code != 404 {
		t.Fatalf("get deleted rule: %d", w.Code)
	}
	if w := e.do(t, request{method: "GET", target: "/t/Subscriptions"}); !strings.Contains(w.Body.String(), "<SubscriptionDescription") {
		t.Fatalf("list subs: %s", w.Body.String())
	}
	if w := e.do(t, request{method: "DELETE", target: "/t/Subscriptions/s"}); w.Code != 200 {
		t.Fatalf("delete sub: %d", w.Code)
	}
}

func TestNamespaceInfo(t *testing.T) {
	e := newTestEnv(t)
	w := e.do(t, request{method: "GET", target: "/$namespaceinfo"})
	if got := body(t, w); w.Code != 200 || !strings.Contains(got, "<NamespaceInfo") || !strings.Contains(got, "<Name>omnibus</Name>") {
		t.Fatalf("namespace info: %d %s", w.Code, got)
	}
	if w := e.do(t, request{method: "GET", target: "/$namespaceinfo", noAuth: true}); w.Code != 401 {
		t.Errorf("without token: %d", w.Code)
	}
}
