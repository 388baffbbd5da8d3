package amqpserver

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

const subPath = "t/Subscriptions/s"

func newRulesHarness(t testing.TB) *mgmtHarness {
	t.Helper()
	h := newMgmtHarness(t)
	h.env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	h.env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s"})
	return h
}

func addRule(name string, desc encoding.Map) encoding.Map {
	return encoding.Map{{Key: "rule-name", Value: name}, {Key: "rule-description", Value: desc}}
}

func TestMgmtAddRuleKinds(t *testing.T) {
	h := newRulesHarness(t)
	h.call(t, subPath, opRemoveRule, encoding.Map{{Key: "rule-name", Value: core.DefaultRuleName}}).mustOK(t)

	// The JS SDK's encodings: string-keyed maps, nulls for unset fields.
	h.call(t, subPath, opAddRule, addRule("sql", encoding.Map{
		{Key: "sql-filter", Value: encoding.Map{{Key: "expression", Value: "color = 'red'"}}},
		{Key: "sql-rule-action", Value: encoding.Map{{Key: "expression", Value: "SET n = 1"}}},
	})).mustOK(t)
	h.call(t, subPath, opAddRule, addRule("corr", encoding.Map{
		{Key: "correlation-filter", Value: encoding.Map{
			{Key: "correlation-id", Value: "cid"},
			{Key: "message-id", Value: nil},
			{Key: "label", Value: "lbl"},
			{Key: "properties", Value: encoding.Map{{Key: "k", Value: int64(5)}}},
		}},
		{Key: "sql-rule-action", Value: nil},
	})).mustOK(t)
	h.call(t, subPath, opAddRule, addRule("all", encoding.Map{{Key: "true-filter", Value: encoding.Map{}}})).mustOK(t)

	rules, err := h.env.Broker.ListRules(subPath)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rules {
		rules[i].CreatedAt = rules[i].CreatedAt.UTC()
	}
	want := []core.Rule{
		{Name: "sql", Filter: core.Filter{Kind: core.FilterSQL, SQL: "color = 'red'"}, Action: "SET n = 1"},
		{Name: "corr", Filter: core.Filter{Kind: core.FilterCorrelation, Correlation: &core.CorrelationFilter{
			CorrelationID: "cid", Subject: "lbl", Properties: map[string]any{"k": int64(5)}}}},
		{Name: "all", Filter: core.Filter{Kind: core.FilterTrue}},
	}
	if diff := cmp.Diff(want, rules, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".CreatedAt" }, cmp.Ignore())); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}

	h.call(t, subPath, opAddRule, addRule("sql", encoding.Map{{Key: "true-filter", Value: encoding.Map{}}})).
		mustFail(t, 409, condEntityAlreadyExists)
	h.call(t, subPath, opAddRule, addRule("two", encoding.Map{
		{Key: "true-filter", Value: encoding.Map{}}, {Key: "false-filter", Value: encoding.Map{}},
	})).mustFail(t, 400, condArgumentError)
	h.call(t, subPath, opAddRule, addRule("none", encoding.Map{})).mustFail(t, 400, condArgumentError)
	h.call(t, subPath, opAddRule, addRule("bad sql", encoding.Map{
		{Key: "sql-filter", Value: encoding.Map{{Key: "expression", Value: "color = "}}},
	})).mustFail(t, 400, frames.CondNotAllowed)
	h.callAs(t, subPath, sas.Listen, opAddRule, addRule("x", encoding.Map{{Key: "true-filter", Value: encoding.Map{}}})).
		mustFail(t, 401, frames.CondUnauthorizedAccess)
}

func TestMgmtRemoveRule(t *testing.T) {
	h := newRulesHarness(t)
	h.call(t, subPath, opRemoveRule, encoding.Map{{Key: "rule-name", Value: "$default"}}).mustOK(t)
	r := h.call(t, subPath, opRemoveRule, encoding.Map{{Key: "rule-name", Value: "$Default"}})
	r.mustFail(t, 404, frames.CondNotFound)
	if d, _ := r.ApplicationProperties.GetString("statusDescription"); !cmp.Equal(d, "The messaging entity '"+subPath+"/Rules/$Default' could not be found.") {
		// The JS SDK maps not-found to MessagingEntityNotFound only for this wording.
		t.Errorf("statusDescription = %q", d)
	}
}

// TestMgmtEnumerateRulesEncoding pins the described types the JS SDK
// decodes (DOC-RR "Get Rules").
func TestMgmtEnumerateRulesEncoding(t *testing.T) {
	h := newRulesHarness(t)
	h.call(t, subPath, opAddRule, addRule("sql", encoding.Map{
		{Key: "sql-filter", Value: encoding.Map{{Key: "expression", Value: "a > 1"}}},
		{Key: "sql-rule-action", Value: encoding.Map{{Key: "expression", Value: "SET b = 2"}}},
	})).mustOK(t)
	h.call(t, subPath, opAddRule, addRule("corr", encoding.Map{
		{Key: "correlation-filter", Value: encoding.Map{
			{Key: "session-id", Value: "sess"},
			{Key: "properties", Value: encoding.Map{{Key: "p", Value: "v"}}},
		}},
	})).mustOK(t)
	h.call(t, subPath, opAddRule, addRule("never", encoding.Map{{Key: "false-filter", Value: nil}, {Key: "sql-filter", Value: encoding.Map{{Key: "expression", Value: "1=0"}}}})).
		mustOK(t)

	body := h.call(t, subPath, opEnumerateRules, encoding.Map{{Key: "top", Value: int32(1 << 30)}, {Key: "skip", Value: int32(0)}}).mustOK(t)
	entries := listOfMaps(t, get(t, body, "rules"))
	if len(entries) != 4 {
		t.Fatalf("got %d rules, want 4", len(entries))
	}
	type rd struct {
		filter, action encoding.Described
		name           string
	}
	var got []rd
	for _, e := range entries {
		d, ok := get(t, e, "rule-description").(encoding.Described)
		if !ok || d.Descriptor != descRuleDescription {
			t.Fatalf("rule-description = %#v, want described 0x%x", get(t, e, "rule-description"), descRuleDescription)
		}
		fields := d.Value.([]any)
		if len(fields) != 4 {
			t.Fatalf("rule-description has %d fields, want 4", len(fields))
		}
		if _, ok := fields[3].(interface{ UnixMilli() int64 }); !ok {
			t.Errorf("created-at = %#v, want a timestamp", fields[3])
		}
		got = append(got, rd{fields[0].(encoding.Described), fields[1].(encoding.Described), fields[2].(string)})
	}
	empty := encoding.Described{Descriptor: descEmptyRuleAction, Value: []any{}}
	want := []rd{
		{encoding.Described{Descriptor: descTrueFilter, Value: []any{}}, empty, core.DefaultRuleName},
		{encoding.Described{Descriptor: descSQLFilter, Value: []any{"a > 1"}}, encoding.Described{Descriptor: descSQLRuleAction, Value: []any{"SET b = 2"}}, "sql"},
		{encoding.Described{Descriptor: descCorrelationFilter, Value: []any{nil, nil, nil, nil, nil, "sess", nil, nil, encoding.Map{{Key: "p", Value: "v"}}}}, empty, "corr"},
		{encoding.Described{Descriptor: descSQLFilter, Value: []any{"1=0"}}, empty, "never"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(rd{})); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}

	// Paging, and 204 past the end.
	body = h.call(t, subPath, opEnumerateRules, encoding.Map{{Key: "top", Value: int32(2)}, {Key: "skip", Value: int32(1)}}).mustOK(t)
	if n := len(listOfMaps(t, get(t, body, "rules"))); n != 2 {
		t.Errorf("page of 2 from 1 has %d rules", n)
	}
	if code := h.call(t, subPath, opEnumerateRules, encoding.Map{{Key: "skip", Value: int32(4)}}).status(t); code != 204 {
		t.Errorf("past the end: status %d, want 204", code)
	}
}

func TestDescribeFalseFilter(t *testing.T) {
	d := describeRule(&core.Rule{Name: "f", Filter: core.Filter{Kind: core.FilterFalse}})
	f := d.Value.([]any)[0].(encoding.Described)
	if f.Descriptor != descFalseFilter || len(f.Value.([]any)) != 0 {
		t.Errorf("false filter described as %#v", f)
	}
	if d.Value.([]any)[3] != nil {
		t.Errorf("zero created-at encoded as %#v, want null", d.Value.([]any)[3])
	}
}
