package atom

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func decodeFile(t *testing.T, name string) any {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := DecodeEntry(f)
	if err != nil {
		t.Fatalf("DecodeEntry(%s): %v", name, err)
	}
	return d
}

// TestDecodeClientBodies decodes request bodies as clients send them. The
// go_*.xml files were captured from the real Go admin client (rewritten by
// TestGoAdmin* with -update); the js_ and dotnet_ files are written by hand
// after the shapes in amqp.md §9.2 (p4/p6 XSI prefixes, XML declarations,
// indentation, i:nil).
func TestDecodeClientBodies(t *testing.T) {
	goQueue := goQueueWant()
	goQueue.CreatedAt, goQueue.UpdatedAt, goQueue.AccessedAt = time.Time{}, time.Time{}, time.Time{}
	goQueue.SizeInBytes, goQueue.MessageCount, goQueue.CountDetails = 0, 0, CountDetails{}

	goTopic := DefaultTopicDescription()
	goTopic.DefaultMessageTimeToLive = time.Hour
	goTopic.MaxSizeInMegabytes = 5120
	goTopic.RequiresDuplicateDetection = true
	goTopic.UserMetadata = "topic"
	goTopic.SupportOrdering = false
	goTopic.EnablePartitioning = true

	goSub := DefaultSubscriptionDescription()
	goSub.LockDuration = 2 * time.Minute
	goSub.RequiresSession = true
	goSub.DeadLetteringOnFilterEvaluationExceptions = false
	goSub.MaxDeliveryCount = 4
	goSub.ForwardTo = "sb://localhost/sink"
	goSub.UserMetadata = "sub"
	goSub.DefaultRuleDescription = &RuleDescription{
		Filter: &SQLFilter{SQLExpression: "region = @r", CompatibilityLevel: 20, Parameters: []KeyValue{{"@r", "eu"}}},
		Action: &SQLRuleAction{SQLExpression: "SET seen = true", CompatibilityLevel: 20},
		Name:   "first",
	}

	jsQueue := DefaultQueueDescription()
	jsQueue.LockDuration = 2 * time.Minute
	jsQueue.DeadLetteringOnMessageExpiration = true
	jsQueue.DuplicateDetectionHistoryTimeWindow = time.Minute
	jsQueue.MaxDeliveryCount = 5
	jsQueue.ForwardTo = "sb://localhost/q2"
	jsQueue.UserMetadata = "from js"
	jsQueue.ForwardDeadLetteredMessagesTo = "sb://localhost/dlq"

	dotnetSub := DefaultSubscriptionDescription()
	dotnetSub.LockDuration = 30 * time.Second
	dotnetSub.UserMetadata = "  spaced  "
	dotnetSub.DefaultRuleDescription = &RuleDescription{
		Filter: &CorrelationFilter{
			CorrelationID: "order-1",
			Label:         "created",
			Properties:    []KeyValue{{"priority", int32(3)}, {"big", int64(9000000000)}, {"missing", nil}},
		},
		Action: &EmptyRuleAction{},
		Name:   "$Default",
	}

	tests := []struct {
		file string
		want any
	}{
		{"go_create_queue.xml", &goQueue},
		{"go_create_queue_defaults.xml", ptr(DefaultQueueDescription())},
		{"go_create_topic.xml", &goTopic},
		{"go_create_subscription.xml", &goSub},
		{"go_create_rule_sql.xml", &RuleDescription{
			Filter: &SQLFilter{SQLExpression: "a > @a", CompatibilityLevel: 20, Parameters: []KeyValue{{"@a", int32(3)}}},
			Action: &SQLRuleAction{SQLExpression: "SET b = @b", CompatibilityLevel: 20, Parameters: []KeyValue{{"@b", "x"}}},
			Name:   "sql",
		}},
		{"go_create_rule_true.xml", &RuleDescription{Filter: &TrueFilter{}, Action: &EmptyRuleAction{}, Name: "always"}},
		{"go_create_rule_false.xml", &RuleDescription{Filter: &FalseFilter{}, Action: &EmptyRuleAction{}, Name: "never"}},
		{"go_create_rule_correlation.xml", &RuleDescription{
			Filter: &CorrelationFilter{CorrelationID: "c", Properties: []KeyValue{{"k", "v"}}},
			Action: &EmptyRuleAction{},
			Name:   "corr1",
		}},
		{"js_create_queue.xml", &jsQueue},
		{"js_create_rule_sql.xml", &RuleDescription{
			Filter: &SQLFilter{
				SQLExpression:      "price > @min AND region = @region",
				CompatibilityLevel: 20,
				Parameters:         []KeyValue{{"@min", 9.99}, {"@region", "eu-west"}},
			},
			Action: &SQLRuleAction{SQLExpression: "SET sys.label = 'cheap'", CompatibilityLevel: 20},
			Name:   "cheap",
		}},
		{"dotnet_create_subscription.xml", &dotnetSub},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got := decodeFile(t, tt.file)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("DecodeEntry(%s) (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestDecodeLenient(t *testing.T) {
	tests := []struct {
		name, body string
		check      func(t *testing.T, d any)
	}{
		{
			"bare description",
			`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><MaxDeliveryCount>3</MaxDeliveryCount></QueueDescription>`,
			func(t *testing.T, d any) {
				if q := d.(*QueueDescription); q.MaxDeliveryCount != 3 || q.LockDuration != time.Minute {
					t.Errorf("got %+v", q)
				}
			},
		},
		{
			"no namespaces, undeclared i prefix, content after other elements",
			`<entry><title>x</title><author><name>n</name></author><content type="application/xml"><RuleDescription><Filter i:type="FalseFilter"/><Name>r</Name></RuleDescription></content></entry>`,
			func(t *testing.T, d any) {
				r := d.(*RuleDescription)
				if _, ok := r.Filter.(*FalseFilter); !ok || r.Name != "r" {
					t.Errorf("got %+v", r)
				}
				if _, ok := r.Action.(*EmptyRuleAction); !ok {
					t.Errorf("missing action decoded as %T", r.Action)
				}
			},
		},
		{
			"missing filter is TrueFilter",
			`<entry xmlns="http://www.w3.org/2005/Atom"><content><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Name>r</Name></RuleDescription></content></entry>`,
			func(t *testing.T, d any) {
				if _, ok := d.(*RuleDescription).Filter.(*TrueFilter); !ok {
					t.Errorf("filter = %T", d.(*RuleDescription).Filter)
				}
			},
		},
		{
			"CountDetails under another prefix, 1/0 booleans, status case",
			`<TopicDescription><EnableBatchedOperations>0</EnableBatchedOperations><EnableExpress>1</EnableExpress><Status>senddisabled</Status><CountDetails xmlns:d3p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d3p1:ActiveMessageCount>4</d3p1:ActiveMessageCount></CountDetails><AccessedAt>0001-01-01T00:00:00</AccessedAt></TopicDescription>`,
			func(t *testing.T, d any) {
				tp := d.(*TopicDescription)
				if tp.EnableBatchedOperations || !tp.EnableExpress || tp.Status != StatusSendDisabled || tp.CountDetails.ActiveMessageCount != 4 || !tp.AccessedAt.IsZero() {
					t.Errorf("got %+v", tp)
				}
			},
		},
		{
			"namespace info",
			`<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><NamespaceInfo xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><CreatedTime>2019-12-03T22:18:04.09Z</CreatedTime><MessagingSKU>Premium</MessagingSKU><MessagingUnits>2</MessagingUnits><Name>ns</Name></NamespaceInfo></content></entry>`,
			func(t *testing.T, d any) {
				n := d.(*NamespaceInfo)
				if n.MessagingUnits != 2 || n.MessagingSKU != "Premium" || n.Name != "ns" || n.CreatedTime.Nanosecond() != 90000000 {
					t.Errorf("got %+v", n)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeEntry(strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, d)
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const q = `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">%s</QueueDescription></content></entry>`
	wrap := func(inner string) string { return strings.Replace(q, "%s", inner, 1) }
	tests := []struct{ name, body, mention string }{
		{"empty", "", "root"},
		{"not xml", "hello", "root"},
		{"truncated", `<entry><content><QueueDescription><LockDuration>PT1M`, "QueueDescription"},
		{"feed", `<feed xmlns="http://www.w3.org/2005/Atom"><title>Queues</title></feed>`, "feed"},
		{"entry without content", `<entry xmlns="http://www.w3.org/2005/Atom"><title>x</title></entry>`, "content"},
		{"empty content", `<entry><content type="application/xml"></content></entry>`, "description"},
		{"unknown description", `<entry><content><EventHubDescription/></content></entry>`, "EventHubDescription"},
		{"bad duration", wrap("<LockDuration>1 minute</LockDuration>"), "LockDuration"},
		{"bad bool", wrap("<RequiresSession>yes</RequiresSession>"), "RequiresSession"},
		{"bad int", wrap("<MaxDeliveryCount>ten</MaxDeliveryCount>"), "MaxDeliveryCount"},
		{"int32 overflow", wrap("<MaxDeliveryCount>99999999999</MaxDeliveryCount>"), "MaxDeliveryCount"},
		{"bad time", wrap("<CreatedAt>yesterday</CreatedAt>"), "CreatedAt"},
		{"bad count", wrap(`<CountDetails><ActiveMessageCount>x</ActiveMessageCount></CountDetails>`), "ActiveMessageCount"},
		{"unknown filter", `<RuleDescription><Filter i:type="XPathFilter"/></RuleDescription>`, "XPathFilter"},
		{"unknown action", `<RuleDescription><Action i:type="Teleport"/></RuleDescription>`, "Teleport"},
		{"bad value type", `<RuleDescription><Filter i:type="SqlFilter"><Parameters><KeyValueOfstringanyType><Key>k</Key><Value i:type="x:blob">1</Value></KeyValueOfstringanyType></Parameters></Filter></RuleDescription>`, "blob"},
		{"bad typed value", `<RuleDescription><Filter i:type="CorrelationFilter"><Properties><KeyValueOfstringanyType><Key>k</Key><Value i:type="x:int">one</Value></KeyValueOfstringanyType></Properties></Filter></RuleDescription>`, "Properties/k"},
		{"bad default rule", `<SubscriptionDescription><DefaultRuleDescription><Filter i:type="Nope"/></DefaultRuleDescription></SubscriptionDescription>`, "Nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeEntry(strings.NewReader(tt.body))
			if !errors.Is(err, ErrInvalidBody) {
				t.Fatalf("DecodeEntry = %v, %v; want ErrInvalidBody", d, err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
		})
	}
}
