package atom

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/google/go-cmp/cmp"
)

// newGoAdmin starts the fake management endpoint over TLS and returns the
// real Go admin client pointed at it.
func newGoAdmin(t *testing.T) (*admin.Client, *fakeMgmt) {
	t.Helper()
	fake := newFakeMgmt()
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	fake.base = srv.URL + "/"
	host := strings.TrimPrefix(srv.URL, "https://")
	client, err := admin.NewClientFromConnectionString(
		"Endpoint=sb://"+host+"/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE",
		&admin.ClientOptions{ClientOptions: azcore.ClientOptions{
			Transport: srv.Client(),
			Retry:     policy.RetryOptions{MaxRetries: -1},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return client, fake
}

// saveBody writes the captured PUT body for path to testdata/name with
// -update, so TestDecodeGoClientBodies keeps checking that exact shape.
func saveBody(t *testing.T, fake *fakeMgmt, path, name string) {
	t.Helper()
	fake.mu.Lock()
	body := fake.bodies[strings.ToLower(path)]
	fake.mu.Unlock()
	if body == nil {
		t.Fatalf("no PUT body captured for %s", path)
	}
	if *update {
		if err := os.WriteFile(filepath.Join("testdata", name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func stored(t *testing.T, fake *fakeMgmt, path string) any {
	t.Helper()
	fake.mu.Lock()
	defer fake.mu.Unlock()
	d, ok := fake.entities[strings.ToLower(path)]
	if !ok {
		t.Fatalf("nothing stored at %s", path)
	}
	return d
}

func TestGoAdminQueue(t *testing.T) {
	client, fake := newGoAdmin(t)
	ctx := t.Context()
	props := admin.QueueProperties{
		LockDuration:                        to.Ptr("PT45S"),
		MaxSizeInMegabytes:                  to.Ptr(int32(2048)),
		RequiresDuplicateDetection:          to.Ptr(true),
		RequiresSession:                     to.Ptr(true),
		DefaultMessageTimeToLive:            to.Ptr("P1D"),
		DeadLetteringOnMessageExpiration:    to.Ptr(true),
		DuplicateDetectionHistoryTimeWindow: to.Ptr("PT20M"),
		MaxDeliveryCount:                    to.Ptr(int32(7)),
		EnableBatchedOperations:             to.Ptr(false),
		Status:                              to.Ptr(admin.EntityStatusSendDisabled),
		AutoDeleteOnIdle:                    to.Ptr("PT10M"),
		EnablePartitioning:                  to.Ptr(true),
		ForwardTo:                           to.Ptr("sb://localhost/fwd"),
		ForwardDeadLetteredMessagesTo:       to.Ptr("sb://localhost/dlq"),
		UserMetadata:                        to.Ptr("hello & <bye>"),
		MaxMessageSizeInKilobytes:           to.Ptr(int64(1024)),
		AuthorizationRules: []admin.AuthorizationRule{{
			AccessRights: []admin.AccessRight{admin.AccessRightListen, admin.AccessRightSend},
			KeyName:      to.Ptr("app"),
			PrimaryKey:   to.Ptr("pk"),
			SecondaryKey: to.Ptr("sk"),
		}},
	}
	created, err := client.CreateQueue(ctx, "Orders", &admin.CreateQueueOptions{Properties: &props})
	if err != nil {
		t.Fatal(err)
	}
	saveBody(t, fake, "Orders", "go_create_queue.xml")

	want := goQueueWant()
	if diff := cmp.Diff(&want, stored(t, fake, "Orders"), cmpOpts...); diff != "" {
		t.Errorf("decoded Go CreateQueue body (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(props, created.QueueProperties); diff != "" {
		t.Errorf("Go client read back different properties (-sent +read):\n%s", diff)
	}

	rt, err := client.GetQueueRuntimeProperties(ctx, "Orders", nil)
	if err != nil || rt == nil {
		t.Fatalf("GetQueueRuntimeProperties: %v, %v", rt, err)
	}
	if rt.ActiveMessageCount != 5 || rt.DeadLetterMessageCount != 2 || rt.ScheduledMessageCount != 1 ||
		rt.TransferDeadLetterMessageCount != 3 || rt.TotalMessageCount != 11 || rt.SizeInBytes != 1234 ||
		!rt.CreatedAt.Equal(created0()) || !rt.AccessedAt.IsZero() {
		t.Errorf("runtime properties = %+v", rt.QueueRuntimeProperties)
	}

	// Update: a full replacement, sent with If-Match: *.
	upd := created.QueueProperties
	upd.MaxDeliveryCount = to.Ptr(int32(20))
	upd.ForwardTo = nil
	if _, err := client.UpdateQueue(ctx, "Orders", upd, nil); err != nil {
		t.Fatal(err)
	}
	saveBody(t, fake, "Orders", "go_update_queue.xml")
	got := stored(t, fake, "Orders").(*QueueDescription)
	if got.MaxDeliveryCount != 20 || got.ForwardTo != "" {
		t.Errorf("after update MaxDeliveryCount=%d ForwardTo=%q", got.MaxDeliveryCount, got.ForwardTo)
	}

	// Missing queue: the not-found feed must read as "does not exist".
	missing, err := client.GetQueue(ctx, "nope", nil)
	if err != nil || missing != nil {
		t.Errorf("GetQueue(missing) = %v, %v; want nil, nil", missing, err)
	}

	if _, err := client.CreateQueue(ctx, "zeta", nil); err != nil {
		t.Fatal(err)
	}
	saveBody(t, fake, "zeta", "go_create_queue_defaults.xml")
	if diff := cmp.Diff(withReadOnly(DefaultQueueDescription()), stored(t, fake, "zeta"), cmpOpts...); diff != "" {
		t.Errorf("queue created without properties (-want +got):\n%s", diff)
	}

	var names []string
	pager := client.NewListQueuesPager(&admin.ListQueuesOptions{MaxPageSize: 1})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range page.Queues {
			names = append(names, q.QueueName)
		}
	}
	if diff := cmp.Diff([]string{"Orders", "zeta"}, names); diff != "" {
		t.Errorf("listed queues (-want +got):\n%s", diff)
	}
}

// created0 is the creation time the fake reports.
func created0() time.Time { return created.Truncate(tick) }

func goQueueWant() QueueDescription {
	q := DefaultQueueDescription()
	q.LockDuration = 45 * time.Second
	q.MaxSizeInMegabytes = 2048
	q.RequiresDuplicateDetection = true
	q.RequiresSession = true
	q.DefaultMessageTimeToLive = 24 * time.Hour
	q.DeadLetteringOnMessageExpiration = true
	q.DuplicateDetectionHistoryTimeWindow = 20 * time.Minute
	q.MaxDeliveryCount = 7
	q.EnableBatchedOperations = false
	q.Status = StatusSendDisabled
	q.AutoDeleteOnIdle = 10 * time.Minute
	q.EnablePartitioning = true
	q.ForwardTo = "sb://localhost/fwd"
	q.ForwardDeadLetteredMessagesTo = "sb://localhost/dlq"
	q.UserMetadata = "hello & <bye>"
	q.MaxMessageSizeInKilobytes = 1024
	q.AuthorizationRules = []AuthorizationRule{{
		Type: "SharedAccessAuthorizationRule", ClaimType: "SharedAccessKey", ClaimValue: "None",
		Rights:     []string{"Listen", "Send"},
		KeyName:    "app",
		PrimaryKey: "pk", SecondaryKey: "sk",
	}}
	return *withReadOnly(q)
}

func withReadOnly(q QueueDescription) *QueueDescription {
	fillReadOnly(&q)
	return &q
}

func TestGoAdminTopicSubscriptionRules(t *testing.T) {
	client, fake := newGoAdmin(t)
	ctx := t.Context()

	if _, err := client.CreateTopic(ctx, "events", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{
		MaxSizeInMegabytes:         to.Ptr(int32(5120)),
		RequiresDuplicateDetection: to.Ptr(true),
		DefaultMessageTimeToLive:   to.Ptr("PT1H"),
		SupportOrdering:            to.Ptr(false),
		UserMetadata:               to.Ptr("topic"),
		EnablePartitioning:         to.Ptr(true),
	}}); err != nil {
		t.Fatal(err)
	}
	saveBody(t, fake, "events", "go_create_topic.xml")
	topic := stored(t, fake, "events").(*TopicDescription)
	if topic.MaxSizeInMegabytes != 5120 || !topic.RequiresDuplicateDetection || topic.DefaultMessageTimeToLive != time.Hour ||
		topic.SupportOrdering || topic.UserMetadata != "topic" || !topic.EnablePartitioning || topic.AutoDeleteOnIdle != MaxDuration {
		t.Errorf("decoded topic = %+v", topic)
	}
	trt, err := client.GetTopicRuntimeProperties(ctx, "events", nil)
	if err != nil || trt == nil {
		t.Fatalf("GetTopicRuntimeProperties: %v, %v", trt, err)
	}
	if trt.SubscriptionCount != 1 || trt.SQLFilterCount != 4 || trt.CorrelationFilterCount != 2 || trt.SizeInBytes != 99 || trt.ScheduledMessageCount != 1 {
		t.Errorf("topic runtime = %+v", trt.TopicRuntimeProperties)
	}

	sub, err := client.CreateSubscription(ctx, "events", "audit", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{
		LockDuration:     to.Ptr("PT2M"),
		RequiresSession:  to.Ptr(true),
		MaxDeliveryCount: to.Ptr(int32(4)),
		EnableDeadLetteringOnFilterEvaluationExceptions: to.Ptr(false),
		ForwardTo:    to.Ptr("sb://localhost/sink"),
		UserMetadata: to.Ptr("sub"),
		DefaultRule: &admin.RuleProperties{
			Name:   "first",
			Filter: &admin.SQLFilter{Expression: "region = @r", Parameters: map[string]any{"@r": "eu"}},
			Action: &admin.SQLAction{Expression: "SET seen = true"},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	saveBody(t, fake, "events/Subscriptions/audit", "go_create_subscription.xml")
	if sub.LockDuration == nil || *sub.LockDuration != "PT2M" || sub.MaxDeliveryCount == nil || *sub.MaxDeliveryCount != 4 {
		t.Errorf("Go client read back subscription %+v", sub.SubscriptionProperties)
	}
	fake.mu.Lock()
	body := fake.bodies["events/subscriptions/audit"]
	fake.mu.Unlock()
	d, err := DecodeEntry(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	wantRule := &RuleDescription{
		Filter: &SQLFilter{SQLExpression: "region = @r", CompatibilityLevel: 20, Parameters: []KeyValue{{Key: "@r", Value: "eu"}}},
		Action: &SQLRuleAction{SQLExpression: "SET seen = true", CompatibilityLevel: 20},
		Name:   "first",
	}
	if diff := cmp.Diff(wantRule, d.(*SubscriptionDescription).DefaultRuleDescription, cmpOpts...); diff != "" {
		t.Errorf("DefaultRuleDescription (-want +got):\n%s", diff)
	}

	srt, err := client.GetSubscriptionRuntimeProperties(ctx, "events", "audit", nil)
	if err != nil || srt == nil {
		t.Fatalf("GetSubscriptionRuntimeProperties: %v, %v", srt, err)
	}
	if srt.TotalMessageCount != 11 || srt.ActiveMessageCount != 5 || srt.DeadLetterMessageCount != 2 {
		t.Errorf("subscription runtime = %+v", srt.SubscriptionRuntimeProperties)
	}
	if s, err := client.GetSubscription(ctx, "events", "ghost", nil); err != nil || s != nil {
		t.Errorf("GetSubscription(missing) = %v, %v; want nil, nil", s, err)
	}

	when := time.Date(2026, 5, 6, 7, 8, 9, 123000000, time.UTC)
	corr := &admin.CorrelationFilter{
		CorrelationID: to.Ptr("c1"), MessageID: to.Ptr("m1"), To: to.Ptr("to"), ReplyTo: to.Ptr("rt"),
		Subject: to.Ptr("subj"), SessionID: to.Ptr("s1"), ReplyToSessionID: to.Ptr("rs1"), ContentType: to.Ptr("text/plain"),
		ApplicationProperties: map[string]any{"n": 42, "f": 2.5, "b": true, "s": "x", "t": when},
	}
	if _, err := client.CreateRule(ctx, "events", "audit", &admin.CreateRuleOptions{Name: to.Ptr("corr"), Filter: corr}); err != nil {
		t.Fatal(err)
	}
	rule := stored(t, fake, "events/Subscriptions/audit/Rules/corr").(*RuleDescription)
	cf, ok := rule.Filter.(*CorrelationFilter)
	if !ok {
		t.Fatalf("filter = %T", rule.Filter)
	}
	sort.Slice(cf.Properties, func(i, j int) bool { return cf.Properties[i].Key < cf.Properties[j].Key })
	wantCorr := &CorrelationFilter{
		CorrelationID: "c1", MessageID: "m1", To: "to", ReplyTo: "rt", Label: "subj", SessionID: "s1",
		ReplyToSessionID: "rs1", ContentType: "text/plain",
		Properties: []KeyValue{{"b", true}, {"f", 2.5}, {"n", int32(42)}, {"s", "x"}, {"t", when}},
	}
	if diff := cmp.Diff(wantCorr, cf, cmpOpts...); diff != "" {
		t.Errorf("decoded correlation filter (-want +got):\n%s", diff)
	}
	if _, ok := rule.Action.(*EmptyRuleAction); !ok {
		t.Errorf("action = %T, want *EmptyRuleAction", rule.Action)
	}

	got, err := client.GetRule(ctx, "events", "audit", "corr", nil)
	if err != nil || got == nil {
		t.Fatalf("GetRule: %v, %v", got, err)
	}
	// The client reads integers back as int64.
	corr.ApplicationProperties["n"] = int64(42)
	if diff := cmp.Diff(corr, got.Filter); diff != "" {
		t.Errorf("Go client read back correlation filter (-sent +read):\n%s", diff)
	}

	for _, r := range []struct {
		name   string
		filter admin.RuleFilter
		action admin.RuleAction
		golden string
	}{
		{"sql", &admin.SQLFilter{Expression: "a > @a", Parameters: map[string]any{"@a": 3}}, &admin.SQLAction{Expression: "SET b = @b", Parameters: map[string]any{"@b": "x"}}, "go_create_rule_sql.xml"},
		{"never", &admin.FalseFilter{}, nil, "go_create_rule_false.xml"},
		{"always", &admin.TrueFilter{}, nil, "go_create_rule_true.xml"},
		{"corr1", &admin.CorrelationFilter{CorrelationID: to.Ptr("c"), ApplicationProperties: map[string]any{"k": "v"}}, nil, "go_create_rule_correlation.xml"},
	} {
		if _, err := client.CreateRule(ctx, "events", "audit", &admin.CreateRuleOptions{Name: to.Ptr(r.name), Filter: r.filter, Action: r.action}); err != nil {
			t.Fatalf("CreateRule %s: %v", r.name, err)
		}
		saveBody(t, fake, "events/Subscriptions/audit/Rules/"+r.name, r.golden)
		back, err := client.GetRule(ctx, "events", "audit", r.name, nil)
		if err != nil || back == nil {
			t.Fatalf("GetRule %s: %v, %v", r.name, back, err)
		}
		wantFilter := r.filter
		if sf, ok := wantFilter.(*admin.SQLFilter); ok {
			// The client reads integers back as int64.
			wantFilter = &admin.SQLFilter{Expression: sf.Expression, Parameters: map[string]any{"@a": int64(3)}}
		}
		if diff := cmp.Diff(wantFilter, back.Filter); diff != "" {
			t.Errorf("rule %s filter (-sent +read):\n%s", r.name, diff)
		}
		if diff := cmp.Diff(r.action, back.Action); diff != "" {
			t.Errorf("rule %s action (-sent +read):\n%s", r.name, diff)
		}
	}

	var ruleNames []string
	pager := client.NewListRulesPager("events", "audit", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Rules {
			ruleNames = append(ruleNames, r.Name)
		}
	}
	if diff := cmp.Diff([]string{"always", "corr", "corr1", "never", "sql"}, ruleNames); diff != "" {
		t.Errorf("listed rules (-want +got):\n%s", diff)
	}

	var subNames []string
	subPager := client.NewListSubscriptionsPager("events", nil)
	for subPager.More() {
		page, err := subPager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Subscriptions {
			subNames = append(subNames, s.SubscriptionName)
		}
	}
	if diff := cmp.Diff([]string{"audit"}, subNames); diff != "" {
		t.Errorf("listed subscriptions (-want +got):\n%s", diff)
	}

	ns, err := client.GetNamespaceProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Name != "sbemulatorns" || ns.SKU != "Standard" || !ns.CreatedTime.Equal(created0()) || ns.MessagingUnits != nil {
		t.Errorf("namespace properties = %+v", ns.NamespaceProperties)
	}
}
