package amqpserver

import (
	"context"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/core"
)

// Rule operations of the $management node of a subscription (amqp.md §6.2),
// used by the JS ServiceBusRuleManager. Requests describe rules as plain
// maps; enumerate-rules answers with the described types of DOC-RR "Get
// Rules", whose numeric descriptors the JS SDK compares.

// Described-type descriptors of rule descriptions, filters and actions.
const (
	descRuleDescription   uint64 = 0x0000013700000004
	descEmptyRuleAction   uint64 = 0x0000013700000005
	descSQLRuleAction     uint64 = 0x0000013700000006
	descSQLFilter         uint64 = 0x0000001370000006
	descTrueFilter        uint64 = 0x0000001370000007
	descFalseFilter       uint64 = 0x0000001370000008
	descCorrelationFilter uint64 = 0x0000001370000009
)

// correlationFields are the correlation-filter map keys, in the order of
// the described list; the getters tie them to core.CorrelationFilter.
var correlationFields = []struct {
	key string
	ptr func(*core.CorrelationFilter) *string
}{
	{"correlation-id", func(c *core.CorrelationFilter) *string { return &c.CorrelationID }},
	{"message-id", func(c *core.CorrelationFilter) *string { return &c.MessageID }},
	{"to", func(c *core.CorrelationFilter) *string { return &c.To }},
	{"reply-to", func(c *core.CorrelationFilter) *string { return &c.ReplyTo }},
	{"label", func(c *core.CorrelationFilter) *string { return &c.Subject }},
	{"session-id", func(c *core.CorrelationFilter) *string { return &c.SessionID }},
	{"reply-to-session-id", func(c *core.CorrelationFilter) *string { return &c.ReplyToSessionID }},
	{"content-type", func(c *core.CorrelationFilter) *string { return &c.ContentType }},
}

// mgmtAddRule: rule-name and rule-description (a map with one of
// sql-filter {expression}, correlation-filter {…}, true-filter or
// false-filter, plus an optional sql-rule-action {expression}) → 200.
// A taken name fails with 409 entity-already-exists.
func (s *mgmtNode) mgmtAddRule(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	name, err := r.str("rule-name", true)
	if err != nil {
		return nil, 0, err
	}
	v, _ := r.field("rule-description")
	desc, ok := v.(encoding.Map)
	if !ok {
		return nil, 0, badf("The field 'rule-description' must be a map, not %T.", v)
	}
	rule, err := ruleFromRequest(name, desc)
	if err != nil {
		return nil, 0, err
	}
	if err := s.b.AddRule(ctx, r.entity, rule); err != nil {
		return nil, 0, err
	}
	return nil, statusOK, nil
}

// ruleFromRequest decodes an add-rule rule-description.
func ruleFromRequest(name string, desc encoding.Map) (core.Rule, error) {
	rule := core.Rule{Name: name}
	sub := func(k string) (encoding.Map, bool, error) {
		v, ok := mapField(desc, k)
		if !ok || v == nil {
			return nil, false, nil
		}
		m, isMap := v.(encoding.Map)
		if !isMap {
			return nil, false, badf("The field '%s' must be a map, not %T.", k, v)
		}
		return m, true, nil
	}
	filters := 0
	if m, ok, err := sub("sql-filter"); err != nil {
		return rule, err
	} else if ok {
		filters++
		expr, err := stringField(m, "expression", true)
		if err != nil {
			return rule, err
		}
		rule.Filter = core.Filter{Kind: core.FilterSQL, SQL: expr}
	}
	if m, ok, err := sub("correlation-filter"); err != nil {
		return rule, err
	} else if ok {
		filters++
		cf, err := correlationFromRequest(m)
		if err != nil {
			return rule, err
		}
		rule.Filter = core.Filter{Kind: core.FilterCorrelation, Correlation: cf}
	}
	for k, kind := range map[string]core.FilterKind{"true-filter": core.FilterTrue, "false-filter": core.FilterFalse} {
		if v, ok := mapField(desc, k); ok && v != nil {
			filters++
			rule.Filter = core.Filter{Kind: kind}
		}
	}
	if filters != 1 {
		return rule, badf("The rule-description must hold exactly one filter, not %d.", filters)
	}
	if m, ok, err := sub("sql-rule-action"); err != nil {
		return rule, err
	} else if ok {
		if rule.Action, err = stringField(m, "expression", true); err != nil {
			return rule, err
		}
	}
	return rule, nil
}

func correlationFromRequest(m encoding.Map) (*core.CorrelationFilter, error) {
	cf := new(core.CorrelationFilter)
	for _, f := range correlationFields {
		v, err := stringField(m, f.key, false)
		if err != nil {
			return nil, err
		}
		*f.ptr(cf) = v
	}
	if v, _ := mapField(m, "properties"); v != nil {
		pm, ok := v.(encoding.Map)
		if !ok {
			return nil, badf("The field 'properties' must be a map, not %T.", v)
		}
		props, err := valueFromAMQP(pm)
		if err != nil {
			return nil, badf("correlation-filter properties: %v", err)
		}
		if p := props.(map[string]any); len(p) > 0 {
			cf.Properties = p
		}
	}
	return cf, nil
}

// mgmtRemoveRule: rule-name → 200, or 404 amqp:not-found.
func (s *mgmtNode) mgmtRemoveRule(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	name, err := r.str("rule-name", true)
	if err != nil {
		return nil, 0, err
	}
	if err := s.b.RemoveRule(ctx, r.entity, name); err != nil {
		return nil, 0, err
	}
	return nil, statusOK, nil
}

// mgmtEnumerateRules: skip, top → rules (a list of maps
// {rule-description: described}), or 204 when the page is empty.
func (s *mgmtNode) mgmtEnumerateRules(ctx context.Context, r *mgmtRequest) (encoding.Map, int32, error) {
	skip, top, err := r.page()
	if err != nil {
		return nil, 0, err
	}
	rules, err := s.b.ListRules(r.entity)
	if err != nil {
		return nil, 0, err
	}
	rules = window(rules, skip, top)
	if len(rules) == 0 {
		return nil, statusNoContent, nil
	}
	list := make([]any, len(rules))
	for i := range rules {
		list[i] = encoding.Map{{Key: "rule-description", Value: describeRule(&rules[i])}}
	}
	return encoding.Map{{Key: "rules", Value: list}}, statusOK, nil
}

// describeRule encodes a rule as the rule-description described list:
// [filter, action, name, created-at]. The action is never null (JS
// dereferences it).
func describeRule(rule *core.Rule) encoding.Described {
	action := encoding.Described{Descriptor: descEmptyRuleAction, Value: []any{}}
	if rule.Action != "" {
		action = encoding.Described{Descriptor: descSQLRuleAction, Value: []any{rule.Action}}
	}
	var created any
	if !rule.CreatedAt.IsZero() {
		created = rule.CreatedAt
	}
	return encoding.Described{
		Descriptor: descRuleDescription,
		Value:      []any{describeFilter(&rule.Filter), action, rule.Name, created},
	}
}

func describeFilter(f *core.Filter) encoding.Described {
	switch f.Kind {
	case core.FilterSQL:
		return encoding.Described{Descriptor: descSQLFilter, Value: []any{f.SQL}}
	case core.FilterFalse:
		return encoding.Described{Descriptor: descFalseFilter, Value: []any{}}
	case core.FilterCorrelation:
		cf := f.Correlation
		if cf == nil {
			cf = new(core.CorrelationFilter)
		}
		fields := make([]any, 0, len(correlationFields)+1)
		for _, fd := range correlationFields {
			var v any
			if s := *fd.ptr(cf); s != "" {
				v = s
			}
			fields = append(fields, v)
		}
		props := encoding.Map{}
		if len(cf.Properties) > 0 {
			props = valueToAMQP(cf.Properties).(encoding.Map)
		}
		return encoding.Described{Descriptor: descCorrelationFilter, Value: append(fields, props)}
	}
	return encoding.Described{Descriptor: descTrueFilter, Value: []any{}}
}
