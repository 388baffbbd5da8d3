package emuconfig

import (
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
)

// TestLoadEveryPropertyOfTheSchema loads a file that sets every property
// of the schema Microsoft publishes with its emulator, and checks that
// each one reached the entity it belongs to.
func TestLoadEveryPropertyOfTheSchema(t *testing.T) {
	c := mustLoad(t, "testdata/schema-every-property.json")
	if c.Namespace != "sbemulatorns" || c.LoggingType != "File,Console" {
		t.Fatalf("namespace, logging = %q, %q", c.Namespace, c.LoggingType)
	}
	byPath := map[string]core.Entity{}
	for _, e := range c.Entities {
		byPath[e.Path()] = e
	}
	q := byPath["orders.v1"]
	if !q.DeadLetteringOnMessageExpiration || q.DefaultMessageTimeToLive != 30*time.Minute ||
		q.DuplicateDetectionHistoryTimeWindow != 5*time.Minute || q.LockDuration != 45*time.Second ||
		q.MaxDeliveryCount != 7 || !q.RequiresDuplicateDetection || !q.RequiresSession {
		t.Errorf("orders.v1 = %+v", q)
	}
	if a := byPath["audit/incoming"]; a.ForwardDeadLetteredMessagesTo != "orders.v1" || a.MaxDeliveryCount != 1 {
		t.Errorf("audit/incoming = %+v", a)
	}
	// The file's PT5S window, the emulator's floor, loads as the cloud's
	// floor of 20 s (MinEmulatorDuplicateWindow).
	if tp := byPath["events"]; tp.DefaultMessageTimeToLive != 10*time.Minute ||
		tp.DuplicateDetectionHistoryTimeWindow != core.MinDuplicateWindow || !tp.RequiresDuplicateDetection {
		t.Errorf("events = %+v", tp)
	}
	b := byPath["events/Subscriptions/billing"]
	if !b.DeadLetteringOnMessageExpiration || b.DefaultMessageTimeToLive != 5*time.Minute ||
		b.LockDuration != 5*time.Minute || b.MaxDeliveryCount != 10 || b.ForwardDeadLetteredMessagesTo != "audit/incoming" {
		t.Errorf("billing = %+v", b)
	}
	if len(b.Rules) != 2 {
		t.Fatalf("billing rules = %+v", b.Rules)
	}
	cf := b.Rules[0].Filter.Correlation
	if cf == nil || cf.ContentType != "application/json" || cf.CorrelationID != "corr-1" || cf.Subject != "invoice" ||
		cf.MessageID != "m-1" || cf.ReplyTo != "replies" || cf.ReplyToSessionID != "rs-1" || cf.SessionID != "s-1" ||
		cf.To != "billing" || cf.Properties["region"] != "emea" || cf.Properties["priority"] != int64(2) || cf.Properties["urgent"] != true {
		t.Errorf("correlation filter = %+v", cf)
	}
	if sql := b.Rules[1]; sql.Filter.Kind != core.FilterSQL || sql.Action != "SET big = TRUE" {
		t.Errorf("sql rule = %+v", sql)
	}
	if f := byPath["events/Subscriptions/forwarder"]; f.ForwardTo != "audit/incoming" || f.MaxDeliveryCount != 3 {
		t.Errorf("forwarder = %+v", f)
	}
}

// TestLoadRefusesWithLineAndField: a file the emulator would answer with
// "Out of memory" names the line, the column and the property instead.
func TestLoadRefusesWithLineAndField(t *testing.T) {
	cases := []struct{ name, json, want string }{
		{"misspelt property", "{\"UserConfig\": {\n  \"Namespaces\": [{\"Name\": \"n\",\n    \"Queues\": [{\"Name\": \"q\", \"Properties\": {\n      \"LockDurration\": \"PT1M\"}}]}],\n  \"Logging\": {\"Type\": \"Console\"}}}",
			`line 4, column 7: unknown property "LockDurration" in UserConfig.Namespaces[0].Queues[0].Properties`},
		{"unknown top level", "{\n\"UserConfig\": {\"Namespaces\": [], \"Logging\": {\"Type\": \"File\"}},\n\"Extra\": 1}",
			`line 3, column 1: unknown property "Extra" in the top-level object`},
		{"unknown rule property", `{"UserConfig":{"Namespaces":[{"Name":"n","Topics":[{"Name":"t","Subscriptions":[{"Name":"s","Rules":[{"Name":"r","Properties":{"FilterType":"Sql","SqlFiltre":{}}}]}]}]}],"Logging":{"Type":"File"}}}`,
			`unknown property "SqlFiltre" in UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Rules[0].Properties`},
		{"syntax", "{\"UserConfig\": {\n  \"Namespaces\": [\n    {\"Name\": \"n\",, }]}}",
			"line 3, column 18: invalid character ','"},
		{"wrong type", "{\"UserConfig\": {\"Namespaces\": [{\"Name\": \"n\",\n \"Queues\": [{\"Name\": \"q\", \"Properties\": {\"MaxDeliveryCount\": \"ten\"}}]}]}}",
			`line 2, column 62: UserConfig.Namespaces.Queues.Properties.MaxDeliveryCount must be int64, not a JSON string`},
		{"cut short", "{\"UserConfig\": {\"Namespaces\": [",
			"line 1, column 32: the file ends before the JSON does"},
		{"comment keeps lines", "{\n/* a\n block\n comment */ \"UserConfig\": {\"Nmespaces\": []}}",
			`line 4, column 28: unknown property "Nmespaces" in UserConfig`},
	}
	for _, c := range cases {
		_, err := Load(strings.NewReader(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

// TestLoadAnyNamespaceName: Aspire names the namespace after its resource,
// not sbemulatorns, and the file must load as it does for the emulator.
func TestLoadAnyNamespaceName(t *testing.T) {
	c, err := Load(strings.NewReader(`{"UserConfig":{"Namespaces":[{"Name":"servicebus","Queues":[{"Name":"q"}],"Topics":[]}],"Logging":{"Type":"Console"}}}`))
	if err != nil || c.Namespace != "servicebus" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
}

// TestLoadNamespaceLimits: each namespace's "Limits" object (omnibus's
// addition) loads as that namespace's limits; one left out leaves the
// namespace on the defaults.
func TestLoadNamespaceLimits(t *testing.T) {
	c, err := Load(strings.NewReader(`{"UserConfig":{"Namespaces":[
  {"Name":"first"},
  {"Name":"small","Limits":{"MaxEntities":2,"MaxConnections":1,"MaxEntitySizeInMegabytes":1}},
  {"Name":"wide","limits":{"maxEntities":20000}}],"Logging":{"Type":"Console"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Namespaces[0]; n.HasLimits {
		t.Errorf("first has limits %+v, want none", n.Limits)
	}
	if n := c.Namespaces[1]; !n.HasLimits || n.Limits != (namespace.Limits{MaxEntities: 2, MaxConnections: 1, MaxEntityBytes: 1 << 20}) {
		t.Errorf("small's limits = %+v (%v)", n.Limits, n.HasLimits)
	}
	if n := c.Namespaces[2]; !n.HasLimits || n.Limits != (namespace.Limits{MaxEntities: 20000}) {
		t.Errorf("wide's limits = %+v (%v)", n.Limits, n.HasLimits)
	}
}

// TestLoadRefusesBadLimits: a limit that is negative, zero, not a
// number or unknown stops the load with the line, the column and the
// property.
func TestLoadRefusesBadLimits(t *testing.T) {
	file := func(limits string) string {
		return "{\"UserConfig\": {\"Namespaces\": [\n  {\"Name\": \"first\"},\n  {\"Name\": \"small\",\n   \"Limits\": " + limits + "}],\n \"Logging\": {\"Type\": \"Console\"}}}"
	}
	for _, c := range []struct{ name, limits, want string }{
		{"negative", `{"MaxEntities": 2, "MaxConnections": -1}`,
			"line 4, column 51: UserConfig.Namespaces[1].Limits.MaxConnections: Limits.MaxConnections must be between 1 and 2147483647, got -1"},
		{"zero", `{"maxEntitySizeInMegabytes": 0}`,
			"line 4, column 43: UserConfig.Namespaces[1].Limits.maxEntitySizeInMegabytes: Limits.MaxEntitySizeInMegabytes must be between 1 and 2147483647, got 0"},
		{"too large", `{"MaxEntities": 2147483648}`,
			"line 4, column 30: UserConfig.Namespaces[1].Limits.MaxEntities: Limits.MaxEntities must be between 1 and 2147483647, got 2147483648"},
		{"not a number", `{"MaxEntities": "ten"}`,
			"line 4, column 30: UserConfig.Namespaces.Limits.MaxEntities must be int64, not a JSON string"},
		{"fraction", `{"MaxEntities": 2.5}`,
			"line 4, column 30: UserConfig.Namespaces.Limits.MaxEntities must be int64, not a JSON number 2.5"},
		{"unknown limit", `{"MaxQueues": 5}`,
			`line 4, column 15: unknown property "MaxQueues" in UserConfig.Namespaces[1].Limits (known: MaxConnections, MaxEntities, MaxEntitySizeInMegabytes)`},
		{"not an object", `5`,
			"line 4, column 14: UserConfig.Namespaces.Limits must be namespace.LimitsJSON, not a JSON number"},
	} {
		_, err := Load(strings.NewReader(file(c.limits)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
}
