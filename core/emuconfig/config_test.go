package emuconfig

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

func mustLoad(t *testing.T, path string) *Config {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := Load(f)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return c
}

func TestLoadEmulatorSample(t *testing.T) {
	c := mustLoad(t, "testdata/emulator-default.json")
	if c.Namespace != "sbemulatorns" || c.LoggingType != "File" {
		t.Fatalf("namespace/logging = %q/%q", c.Namespace, c.LoggingType)
	}
	var paths []string
	for _, e := range c.Entities {
		paths = append(paths, e.Path())
	}
	want := "queue.1 topic.1 topic.1/Subscriptions/subscription.1 topic.1/Subscriptions/subscription.2 topic.1/Subscriptions/subscription.3"
	if got := strings.Join(paths, " "); got != want {
		t.Fatalf("entities = %s, want %s", got, want)
	}
	q := c.Entities[0]
	if q.MaxDeliveryCount != 3 || q.LockDuration != time.Minute || q.DefaultMessageTimeToLive != time.Hour ||
		q.DuplicateDetectionHistoryTimeWindow != 20*time.Second {
		t.Fatalf("queue props = %+v", q)
	}
	s1 := c.Entities[2]
	if len(s1.Rules) != 1 || s1.Rules[0].Filter.Kind != core.FilterCorrelation || s1.Rules[0].Filter.Correlation.Subject != "subject1" {
		t.Fatalf("subscription.1 rules = %+v", s1.Rules)
	}
	s2 := c.Entities[3]
	if got := s2.Rules[0].Filter.Correlation.Properties["prop3"]; got != "value3" {
		t.Fatalf("prop3 = %v", got)
	}
	if s3 := c.Entities[4]; len(s3.Rules) != 0 {
		t.Fatalf("subscription.3 has rules %v; want none (the broker adds $Default)", s3.Rules)
	}
}

func TestLoadFullExampleWithCommentsAndSQL(t *testing.T) {
	c := mustLoad(t, "testdata/full.json")
	var sub core.Entity
	for _, e := range c.Entities {
		if e.Kind == core.KindSubscription {
			sub = e
		}
	}
	if !sub.RequiresSession || len(sub.Rules) != 2 {
		t.Fatalf("billing = %+v", sub)
	}
	sql := sub.Rules[1]
	if sql.Filter.Kind != core.FilterSQL || sql.Action != "SET sys.To = 'Entity'" {
		t.Fatalf("sql rule = %+v", sql)
	}
	if !c.Entities[0].RequiresDuplicateDetection || !c.Entities[0].DeadLetteringOnMessageExpiration {
		t.Fatalf("orders = %+v", c.Entities[0])
	}
}

func TestLoadRejectsNamingEntityAndProperty(t *testing.T) {
	cases := []struct{ name, json, want string }{
		{"bad lock", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"LockDuration":"PT10M"}}]}],"Logging":{"Type":"Console"}}}`, `queue "q": The property value for 'LockDuration'`},
		{"bad duration", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"DefaultMessageTimeToLive":"1 hour"}}]}],"Logging":{"Type":"Console"}}}`, `queue "q": DefaultMessageTimeToLive`},
		{"zero deliveries", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"MaxDeliveryCount":0}}]}],"Logging":{"Type":"Console"}}}`, `queue "q": MaxDeliveryCount`},
		{"unknown filter", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Regex"}}]}]}]}],"Logging":{"Type":"Console"}}}`, `subscription "t/Subscriptions/s" rule "r": FilterType "Regex"`},
		{"bad sql", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"a = "}}}]}]}]}],"Logging":{"Type":"Console"}}}`, `rule "r"`},
		{"no namespace", `{"UserConfig":{"Namespaces":[],"Logging":{"Type":"Console"}}}`, `at least one namespace`},
		{"namespace twice", `{"UserConfig":{"Namespaces":[{"Name":"sales"},{"Name":"Sales"}],"Logging":{"Type":"Console"}}}`, `the namespace "Sales" is defined twice`},
		{"bad namespace name", `{"UserConfig":{"Namespaces":[{"Name":"n"},{"Name":"9lives"}],"Logging":{"Type":"Console"}}}`, `The namespace name '9lives' is invalid: it must start with a letter`},
		{"short key", `{"UserConfig":{"Namespaces":[{"Name":"n","AuthorizationRules":[{"KeyName":"k","PrimaryKey":"short","Rights":["Send"]}]}],"Logging":{"Type":"Console"}}}`, `namespace 'n': the PrimaryKey of authorization rule 'k' is 5 characters long`},
		{"key name twice", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"AuthorizationRules":[{"KeyName":"k","PrimaryKey":"` + strings.Repeat("k", 44) + `","Rights":["Send"]},{"KeyName":"K","PrimaryKey":"` + strings.Repeat("k", 44) + `","Rights":["Listen"]}]}}]}],"Logging":{"Type":"Console"}}}`, `queue 'q': the authorization rule 'K' is defined twice`},
		{"rule without key", `{"UserConfig":{"Namespaces":[{"Name":"n","AuthorizationRules":[{"KeyName":"k","Rights":["Send"]}]}],"Logging":{"Type":"Console"}}}`, `authorization rule "k" needs a PrimaryKey`},
		{"unknown right", `{"UserConfig":{"Namespaces":[{"Name":"n","AuthorizationRules":[{"KeyName":"k","PrimaryKey":"` + strings.Repeat("k", 44) + `","Rights":["Read"]}]}],"Logging":{"Type":"Console"}}}`, `unknown right "Read"`},
		{"bad name", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"-q"}]}],"Logging":{"Type":"Console"}}}`, `'-q'`},
		{"dot segment", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"a/../orders"}]}],"Logging":{"Type":"Console"}}}`, `The queue name 'a/../orders' has an empty, '.' or '..' segment`},
		{"bad topic name", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t~1"}]}],"Logging":{"Type":"Console"}}}`, `'t~1' contains character(s) that is not allowed by Service Bus`},
		{"long subscription", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Subscriptions":[{"Name":"` + strings.Repeat("s", 51) + `"}]}]}],"Logging":{"Type":"Console"}}}`, `exceeds the '50' character limit`},
		{"bad rule name", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r 1","Properties":{"FilterType":"Sql","SqlFilter":{"SqlExpression":"1=1"}}}]}]}]}],"Logging":{"Type":"Console"}}}`, `rule "r 1": core: 'r 1' contains character(s)`},
		{"huge size", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"MaxSizeInMegabytes":9223372036854775807}}]}],"Logging":{"Type":"Console"}}}`, `queue "q": The specified value 9223372036854775807 is invalid. The property 'MaxSizeInMegabytes'`},
		{"small size", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Properties":{"MaxSizeInMegabytes":1}}]}],"Logging":{"Type":"Console"}}}`, `topic "t": The specified value 1 is invalid`},
		{"message size", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"MaxMessageSizeInKilobytes":1}}]}],"Logging":{"Type":"Console"}}}`, `queue "q": The property value for 'MaxMessageSizeInKilobytes'`},
		{"auto delete", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"AutoDeleteOnIdle":"PT1M"}}]}],"Logging":{"Type":"Console"}}}`, `queue "q": The property value for 'AutoDeleteOnIdle' must be at least 00:05:00`},
		{"dedup under the emulator's floor", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"DuplicateDetectionHistoryTimeWindow":"PT4S"}}]}],"Logging":{"Type":"Console"}}}`, `queue "q": The property value for 'DuplicateDetectionHistoryTimeWindow' must be between 00:00:20 and 7.00:00:00`},
		{"zero lock", `{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"LockDuration":"PT0S"}}]}],"Logging":{"Type":"Console"}}}`, `queue "q": The property value for 'LockDuration' must be between 00:00:05 and 00:05:00, got 00:00:00`},
		{"zero size", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Properties":{"MaxSizeInMegabytes":0}}]}],"Logging":{"Type":"Console"}}}`, `topic "t": The specified value 0 is invalid`},
		{"dedup over 7 days", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Properties":{"DuplicateDetectionHistoryTimeWindow":"P8D"}}]}],"Logging":{"Type":"Console"}}}`, `topic "t": The property value for 'DuplicateDetectionHistoryTimeWindow'`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %s", err, tc.want)
			}
		})
	}
}

// The emulator takes duplicate-detection windows from 5 s, the cloud
// service from 20 s: a file's 5 to 20 s window loads as 20 s.
func TestLoadRaisesEmulatorDuplicateWindow(t *testing.T) {
	for in, want := range map[string]time.Duration{"PT5S": 20 * time.Second, "PT19S": 20 * time.Second, "PT20S": 20 * time.Second, "PT1M": time.Minute} {
		c, err := Load(strings.NewReader(`{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"q","Properties":{"DuplicateDetectionHistoryTimeWindow":"` + in + `"}}]}],"Logging":{"Type":"Console"}}}`))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := c.Entities[0].DuplicateDetectionHistoryTimeWindow; got != want {
			t.Errorf("window %s loads as %v, want %v", in, got, want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT1M": time.Minute, "PT5S": 5 * time.Second, "P14D": 14 * 24 * time.Hour, "PT0.5S": 500 * time.Millisecond,
		"P1DT1H": 25 * time.Hour, "P10675199DT2H48M5.4775807S": core.MaxTimeToLive,
	} {
		got, err := ParseDuration(in)
		if err != nil || time.Duration(got) != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, time.Duration(got), err, want)
		}
	}
	for _, bad := range []string{"", "1M", "PT", "PTM", "P1H", "PT1X"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) succeeded", bad)
		}
	}
}

// A file may hold several namespaces, each with its entities and rules;
// the first is the default one.
func TestLoadSeveralNamespaces(t *testing.T) {
	key := strings.Repeat("k", 44)
	c, err := Load(strings.NewReader(`{"UserConfig":{"Namespaces":[
		{"Name":"sbemulatorns","Queues":[{"Name":"q"}]},
		{"Name":"sales","AuthorizationRules":[{"KeyName":"sender","PrimaryKey":"` + key + `","Rights":["Send"]}],
		 "Queues":[{"Name":"orders","Properties":{"AuthorizationRules":[{"KeyName":"reader","PrimaryKey":"` + key + `","Rights":["Listen"]}]}}],
		 "Topics":[{"Name":"t","Subscriptions":[{"Name":"s"}]}]}
	],"Logging":{"Type":"Console"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "sbemulatorns" || len(c.Entities) != 1 || len(c.Namespaces) != 2 {
		t.Fatalf("default %q with %d entities, %d namespaces; want sbemulatorns with 1, and 2", c.Namespace, len(c.Entities), len(c.Namespaces))
	}
	sales := c.Namespaces[1]
	if sales.Name != "sales" || len(sales.Entities) != 3 {
		t.Fatalf("second namespace %q with %d entities, want sales with 3", sales.Name, len(sales.Entities))
	}
	if r := sales.AuthorizationRules; len(r) != 1 || r[0].KeyName != "sender" || r[0].Rights != sas.Send || r[0].SecondaryKey != key {
		t.Errorf("sales rules %+v, want sender with Send and the primary key as secondary", r)
	}
	if r := sales.Entities[0].AuthorizationRules; len(r) != 1 || r[0].KeyName != "reader" || r[0].Rights != sas.Listen {
		t.Errorf("orders rules %+v, want reader with Listen", r)
	}
}
