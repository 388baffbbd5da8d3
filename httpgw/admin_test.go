package httpgw

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core/coretest"
)

// The official Go admin client always builds https://<host:port>/ URLs
// (internal/atom/entity_manager.go newEntityManagerImpl). These tests run
// it against the gateway over HTTPS with the generated certificate
// trusted, and over plain HTTP with a transport that rewrites the scheme,
// as emulator users do.

// httpOnly rewrites the admin client's https requests to http.
type httpOnly struct{ base http.RoundTripper }

func (h httpOnly) Do(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme = "http"
	return h.base.RoundTrip(req)
}

func newAdminClient(t *testing.T, e *testEnv, useTLS bool) *admin.Client {
	t.Helper()
	srv := httptest.NewUnstartedServer(e.gw.Handler())
	var transport policy.Transporter
	if useTLS {
		cert, _, err := LoadOrCreateCertificate(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(leaf)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		srv.StartTLS()
		transport = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	} else {
		srv.Start()
		transport = httpOnly{base: &http.Transport{}}
	}
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	cs := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=" + DefaultKeyName + ";SharedAccessKey=" + DefaultKey
	c, err := admin.NewClientFromConnectionString(cs, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: transport, Retry: policy.RetryOptions{MaxRetries: -1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGoAdminClient(t *testing.T) {
	for _, mode := range []struct {
		name string
		tls  bool
	}{{"https", true}, {"http", false}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newTestEnv(t)
			adminScenario(t, e, newAdminClient(t, e, mode.tls))
		})
	}
}

func adminScenario(t *testing.T, e *testEnv, c *admin.Client) {
	ctx := t.Context()
	// Queues.
	if _, err := c.CreateQueue(ctx, "orders", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
		LockDuration: to.Ptr("PT45S"), MaxDeliveryCount: to.Ptr[int32](7),
	}}); err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	if _, err := c.CreateQueue(ctx, "orders", nil); err == nil {
		t.Error("CreateQueue of an existing queue succeeded")
	}
	q, err := c.GetQueue(ctx, "orders", nil)
	if err != nil || q == nil || *q.LockDuration != "PT45S" || *q.MaxDeliveryCount != 7 {
		t.Fatalf("GetQueue: %+v %v", q, err)
	}
	props := q.QueueProperties
	props.MaxDeliveryCount = to.Ptr[int32](3)
	if _, err := c.UpdateQueue(ctx, "orders", props, nil); err != nil {
		t.Fatalf("UpdateQueue: %v", err)
	}
	if d, _ := e.Broker.GetEntity("orders"); d.MaxDeliveryCount != 3 {
		t.Errorf("update not applied: %d", d.MaxDeliveryCount)
	}
	if missing, err := c.GetQueue(ctx, "nope", nil); err != nil || missing != nil {
		t.Errorf("GetQueue of a missing queue: %+v %v", missing, err)
	}
	e.MustSend(t, "orders", coretest.Text("a"), coretest.Text("b"))
	rt, err := c.GetQueueRuntimeProperties(ctx, "orders", nil)
	if err != nil || rt.ActiveMessageCount != 2 || rt.TotalMessageCount != 2 {
		t.Fatalf("GetQueueRuntimeProperties: %+v %v", rt, err)
	}
	if _, err := c.CreateQueue(ctx, "second", nil); err != nil {
		t.Fatal(err)
	}
	var names []string
	pager := c.NewListQueuesPager(&admin.ListQueuesOptions{MaxPageSize: 1})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListQueues: %v", err)
		}
		for _, q := range page.Queues {
			names = append(names, q.QueueName)
		}
	}
	if len(names) != 2 || names[0] != "orders" || names[1] != "second" {
		t.Errorf("listed queues %v", names)
	}
	if _, err := c.DeleteQueue(ctx, "second", nil); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}

	// Topics, subscriptions, rules.
	if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	tp, err := c.GetTopic(ctx, "events", nil)
	if err != nil || tp == nil {
		t.Fatalf("GetTopic: %v", err)
	}
	tp.TopicProperties.DefaultMessageTimeToLive = to.Ptr("PT1H")
	if _, err := c.UpdateTopic(ctx, "events", tp.TopicProperties, nil); err != nil {
		t.Fatalf("UpdateTopic: %v", err)
	}
	if _, err := c.CreateSubscription(ctx, "events", "billing", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		LockDuration: to.Ptr("PT30S"),
	}}); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	sub, err := c.GetSubscription(ctx, "events", "billing", nil)
	if err != nil || sub == nil || *sub.LockDuration != "PT30S" {
		t.Fatalf("GetSubscription: %+v %v", sub, err)
	}
	sub.SubscriptionProperties.MaxDeliveryCount = to.Ptr[int32](4)
	if _, err := c.UpdateSubscription(ctx, "events", "billing", sub.SubscriptionProperties, nil); err != nil {
		t.Fatalf("UpdateSubscription: %v", err)
	}
	if missing, err := c.GetSubscription(ctx, "events", "nope", nil); err != nil || missing != nil {
		t.Errorf("GetSubscription of a missing one: %+v %v", missing, err)
	}
	e.MustSend(t, "events", coretest.Text("x"))
	srt, err := c.GetSubscriptionRuntimeProperties(ctx, "events", "billing", nil)
	if err != nil || srt.ActiveMessageCount != 1 {
		t.Fatalf("GetSubscriptionRuntimeProperties: %+v %v", srt, err)
	}
	trt, err := c.GetTopicRuntimeProperties(ctx, "events", nil)
	if err != nil || trt.SubscriptionCount != 1 {
		t.Fatalf("GetTopicRuntimeProperties: %+v %v", trt, err)
	}
	if _, err := c.CreateRule(ctx, "events", "billing", &admin.CreateRuleOptions{
		Name: to.Ptr("red"), Filter: &admin.SQLFilter{Expression: "color = 'red'"}, Action: &admin.SQLAction{Expression: "SET seen = true"},
	}); err != nil {
		t.Fatalf("CreateRule: %v", err)
	}
	if _, err := c.CreateRule(ctx, "events", "billing", &admin.CreateRuleOptions{
		Name: to.Ptr("corr"), Filter: &admin.CorrelationFilter{CorrelationID: to.Ptr("c1"), ApplicationProperties: map[string]any{"n": 5}},
	}); err != nil {
		t.Fatalf("CreateRule correlation: %v", err)
	}
	rule, err := c.GetRule(ctx, "events", "billing", "corr", nil)
	if err != nil || rule == nil {
		t.Fatalf("GetRule: %v", err)
	}
	if f, ok := rule.Filter.(*admin.CorrelationFilter); !ok || *f.CorrelationID != "c1" || f.ApplicationProperties["n"] != int32(5) && f.ApplicationProperties["n"] != int64(5) {
		t.Errorf("correlation rule %#v", rule.Filter)
	}
	rule.RuleProperties.Filter = &admin.SQLFilter{Expression: "n > 1"}
	if _, err := c.UpdateRule(ctx, "events", "billing", rule.RuleProperties); err != nil {
		t.Fatalf("UpdateRule: %v", err)
	}
	var rules []string
	rp := c.NewListRulesPager("events", "billing", nil)
	for rp.More() {
		page, err := rp.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListRules: %v", err)
		}
		for _, r := range page.Rules {
			rules = append(rules, r.Name)
		}
	}
	if len(rules) != 3 {
		t.Errorf("rules %v, want $Default, red, corr", rules)
	}
	if _, err := c.DeleteRule(ctx, "events", "billing", "red", nil); err != nil {
		t.Fatalf("DeleteRule: %v", err)
	}
	var subs []string
	sp := c.NewListSubscriptionsPager("events", nil)
	for sp.More() {
		page, err := sp.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListSubscriptions: %v", err)
		}
		for _, s := range page.Subscriptions {
			subs = append(subs, s.SubscriptionName)
		}
	}
	if len(subs) != 1 || subs[0] != "billing" {
		t.Errorf("subscriptions %v", subs)
	}
	var topics []string
	tpg := c.NewListTopicsPager(nil)
	for tpg.More() {
		page, err := tpg.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListTopics: %v", err)
		}
		for _, tp := range page.Topics {
			topics = append(topics, tp.TopicName)
		}
	}
	if len(topics) != 1 || topics[0] != "events" {
		t.Errorf("topics %v", topics)
	}
	ns, err := c.GetNamespaceProperties(ctx, nil)
	if err != nil || ns.Name != "omnibus" {
		t.Fatalf("GetNamespaceProperties: %+v %v", ns, err)
	}
	if _, err := c.DeleteSubscription(ctx, "events", "billing", nil); err != nil {
		t.Fatalf("DeleteSubscription: %v", err)
	}
	if _, err := c.DeleteTopic(ctx, "events", nil); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if tp, err := c.GetTopic(ctx, "events", nil); err != nil || tp != nil {
		t.Errorf("GetTopic after delete: %+v %v", tp, err)
	}
}
