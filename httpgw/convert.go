package httpgw

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/httpgw/internal/atom"
)

// Conversions between the ATOM descriptions (package atom) and the core's
// entities and rules. Properties the core does not model (express,
// anonymous access) are accepted and not kept.

// atomGiven names, per kind, the properties the ATOM description of that
// kind always carries: package atom starts from Service Bus's defaults,
// none of them zero, so a zero among them was sent as zero, which the
// service refuses and the core, told so (core.Entity.ValidateGiven),
// refuses too rather than reading it as "default".
var atomGiven = map[core.EntityKind][]string{
	core.KindQueue: {"LockDuration", "MaxSizeInMegabytes", "DefaultMessageTimeToLive", "DuplicateDetectionHistoryTimeWindow",
		"MaxDeliveryCount", "AutoDeleteOnIdle", "MaxMessageSizeInKilobytes"},
	core.KindTopic: {"DefaultMessageTimeToLive", "MaxSizeInMegabytes", "DuplicateDetectionHistoryTimeWindow", "AutoDeleteOnIdle",
		"MaxMessageSizeInKilobytes"},
	core.KindSubscription: {"LockDuration", "DefaultMessageTimeToLive", "MaxDeliveryCount", "AutoDeleteOnIdle"},
}

func queueEntity(name string, q *atom.QueueDescription) core.Entity {
	return core.Entity{
		Kind: core.KindQueue, Name: name,
		LockDuration:                        q.LockDuration,
		MaxSizeInMegabytes:                  q.MaxSizeInMegabytes,
		RequiresDuplicateDetection:          q.RequiresDuplicateDetection,
		RequiresSession:                     q.RequiresSession,
		DefaultMessageTimeToLive:            q.DefaultMessageTimeToLive,
		DeadLetteringOnMessageExpiration:    q.DeadLetteringOnMessageExpiration,
		DuplicateDetectionHistoryTimeWindow: q.DuplicateDetectionHistoryTimeWindow,
		MaxDeliveryCount:                    q.MaxDeliveryCount,
		EnableBatchedOperations:             q.EnableBatchedOperations,
		Status:                              core.EntityStatus(q.Status),
		ForwardTo:                           forwardName(q.ForwardTo),
		UserMetadata:                        q.UserMetadata,
		SupportOrdering:                     q.SupportOrdering,
		AutoDeleteOnIdle:                    q.AutoDeleteOnIdle,
		EnablePartitioning:                  q.EnablePartitioning,
		ForwardDeadLetteredMessagesTo:       forwardName(q.ForwardDeadLetteredMessagesTo),
		MaxMessageSizeInKilobytes:           q.MaxMessageSizeInKilobytes,
	}
}

// coreAuthorizationRules converts a description's AuthorizationRules; a
// right Service Bus does not know is a bad request (the core checks the
// rest: keys, names, duplicates).
func coreAuthorizationRules(in []atom.AuthorizationRule) ([]core.AuthorizationRule, error) {
	var out []core.AuthorizationRule
	for _, r := range in {
		if r.Type != "SharedAccessAuthorizationRule" {
			return nil, &core.Error{Code: core.CodeBadRequest, Msg: fmt.Sprintf("authorization rule '%s': only SharedAccessAuthorizationRule rules are supported, not %s", r.KeyName, r.Type)}
		}
		rights, err := sas.ParseRights(r.Rights...)
		if err != nil {
			return nil, &core.Error{Code: core.CodeBadRequest, Msg: fmt.Sprintf("authorization rule '%s': %s", r.KeyName, strings.TrimPrefix(err.Error(), "sas: "))}
		}
		out = append(out, core.AuthorizationRule{KeyName: r.KeyName, PrimaryKey: r.PrimaryKey, SecondaryKey: r.SecondaryKey, Rights: rights})
	}
	return out, nil
}

// atomAuthorizationRules is the AuthorizationRules element of e's
// description, keys included (the caller has Manage, as on Service Bus).
func atomAuthorizationRules(e *core.Entity) []atom.AuthorizationRule {
	var out []atom.AuthorizationRule
	for _, r := range e.AuthorizationRules {
		out = append(out, atom.AuthorizationRule{Rights: strings.Split(r.Rights.String(), ","), KeyName: r.KeyName,
			CreatedTime: e.CreatedAt, ModifiedTime: e.UpdatedAt, PrimaryKey: r.PrimaryKey, SecondaryKey: r.SecondaryKey})
	}
	return out
}

func queueDescription(e *core.Entity, c core.Counts) *atom.QueueDescription {
	return &atom.QueueDescription{
		AuthorizationRules:                  atomAuthorizationRules(e),
		LockDuration:                        e.LockDuration,
		MaxSizeInMegabytes:                  e.MaxSizeInMegabytes,
		RequiresDuplicateDetection:          e.RequiresDuplicateDetection,
		RequiresSession:                     e.RequiresSession,
		DefaultMessageTimeToLive:            e.DefaultMessageTimeToLive,
		DeadLetteringOnMessageExpiration:    e.DeadLetteringOnMessageExpiration,
		DuplicateDetectionHistoryTimeWindow: e.DuplicateDetectionHistoryTimeWindow,
		MaxDeliveryCount:                    e.MaxDeliveryCount,
		EnableBatchedOperations:             e.EnableBatchedOperations,
		SizeInBytes:                         c.SizeBytes,
		MessageCount:                        c.Total,
		Status:                              atom.EntityStatus(e.Status),
		ForwardTo:                           e.ForwardTo,
		UserMetadata:                        e.UserMetadata,
		CreatedAt:                           e.CreatedAt,
		UpdatedAt:                           e.UpdatedAt,
		AccessedAt:                          e.AccessedAt,
		SupportOrdering:                     e.SupportOrdering,
		CountDetails:                        countDetails(c),
		AutoDeleteOnIdle:                    e.AutoDeleteOnIdle,
		EnablePartitioning:                  e.EnablePartitioning,
		ForwardDeadLetteredMessagesTo:       e.ForwardDeadLetteredMessagesTo,
		MaxMessageSizeInKilobytes:           e.MaxMessageSizeInKilobytes,
	}
}

func topicEntity(name string, t *atom.TopicDescription) core.Entity {
	return core.Entity{
		Kind: core.KindTopic, Name: name,
		DefaultMessageTimeToLive:            t.DefaultMessageTimeToLive,
		MaxSizeInMegabytes:                  t.MaxSizeInMegabytes,
		RequiresDuplicateDetection:          t.RequiresDuplicateDetection,
		DuplicateDetectionHistoryTimeWindow: t.DuplicateDetectionHistoryTimeWindow,
		EnableBatchedOperations:             t.EnableBatchedOperations,
		Status:                              core.EntityStatus(t.Status),
		UserMetadata:                        t.UserMetadata,
		SupportOrdering:                     t.SupportOrdering,
		AutoDeleteOnIdle:                    t.AutoDeleteOnIdle,
		EnablePartitioning:                  t.EnablePartitioning,
		MaxMessageSizeInKilobytes:           t.MaxMessageSizeInKilobytes,
	}
}

func topicDescription(e *core.Entity, c core.Counts, sqlFilters, correlationFilters int32) *atom.TopicDescription {
	return &atom.TopicDescription{
		AuthorizationRules:                  atomAuthorizationRules(e),
		DefaultMessageTimeToLive:            e.DefaultMessageTimeToLive,
		MaxSizeInMegabytes:                  e.MaxSizeInMegabytes,
		RequiresDuplicateDetection:          e.RequiresDuplicateDetection,
		DuplicateDetectionHistoryTimeWindow: e.DuplicateDetectionHistoryTimeWindow,
		EnableBatchedOperations:             e.EnableBatchedOperations,
		SizeInBytes:                         c.SizeBytes,
		Status:                              atom.EntityStatus(e.Status),
		UserMetadata:                        e.UserMetadata,
		CreatedAt:                           e.CreatedAt,
		UpdatedAt:                           e.UpdatedAt,
		AccessedAt:                          e.AccessedAt,
		SupportOrdering:                     e.SupportOrdering,
		CountDetails:                        countDetails(c),
		SubscriptionCount:                   int32(c.Subscriptions),
		AutoDeleteOnIdle:                    e.AutoDeleteOnIdle,
		EnablePartitioning:                  e.EnablePartitioning,
		MaxMessageSizeInKilobytes:           e.MaxMessageSizeInKilobytes,
		SqlFilterCount:                      sqlFilters,
		CorrelationFilterCount:              correlationFilters,
	}
}

func subscriptionEntity(topic, name string, s *atom.SubscriptionDescription) (core.Entity, error) {
	e := core.Entity{
		Kind: core.KindSubscription, Topic: topic, Name: name,
		LockDuration:                              s.LockDuration,
		RequiresSession:                           s.RequiresSession,
		DefaultMessageTimeToLive:                  s.DefaultMessageTimeToLive,
		DeadLetteringOnMessageExpiration:          s.DeadLetteringOnMessageExpiration,
		DeadLetteringOnFilterEvaluationExceptions: s.DeadLetteringOnFilterEvaluationExceptions,
		MaxDeliveryCount:                          s.MaxDeliveryCount,
		EnableBatchedOperations:                   s.EnableBatchedOperations,
		Status:                                    core.EntityStatus(s.Status),
		ForwardTo:                                 forwardName(s.ForwardTo),
		UserMetadata:                              s.UserMetadata,
		ForwardDeadLetteredMessagesTo:             forwardName(s.ForwardDeadLetteredMessagesTo),
		AutoDeleteOnIdle:                          s.AutoDeleteOnIdle,
	}
	if s.DefaultRuleDescription != nil {
		r, err := coreRule(s.DefaultRuleDescription)
		if err != nil {
			return e, err
		}
		if r.Name == "" {
			r.Name = core.DefaultRuleName
		}
		e.Rules = []core.Rule{r}
	}
	return e, nil
}

func subscriptionDescription(e *core.Entity, c core.Counts) *atom.SubscriptionDescription {
	return &atom.SubscriptionDescription{
		LockDuration:                              e.LockDuration,
		RequiresSession:                           e.RequiresSession,
		DefaultMessageTimeToLive:                  e.DefaultMessageTimeToLive,
		DeadLetteringOnMessageExpiration:          e.DeadLetteringOnMessageExpiration,
		DeadLetteringOnFilterEvaluationExceptions: e.DeadLetteringOnFilterEvaluationExceptions,
		MessageCount:                              c.Total,
		MaxDeliveryCount:                          e.MaxDeliveryCount,
		EnableBatchedOperations:                   e.EnableBatchedOperations,
		Status:                                    atom.EntityStatus(e.Status),
		ForwardTo:                                 e.ForwardTo,
		CreatedAt:                                 e.CreatedAt,
		UpdatedAt:                                 e.UpdatedAt,
		AccessedAt:                                e.AccessedAt,
		CountDetails:                              countDetails(c),
		UserMetadata:                              e.UserMetadata,
		ForwardDeadLetteredMessagesTo:             e.ForwardDeadLetteredMessagesTo,
		AutoDeleteOnIdle:                          e.AutoDeleteOnIdle,
	}
}

func countDetails(c core.Counts) atom.CountDetails {
	return atom.CountDetails{
		ActiveMessageCount:     c.Active,
		DeadLetterMessageCount: c.DeadLetter,
		ScheduledMessageCount:  c.Scheduled,
		TransferMessageCount:   c.Transfer,
	}
}

// forwardName reduces a ForwardTo value to an entity path: the JS client
// sends "sb://host/name", the others the bare name.
func forwardName(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			return strings.Trim(rest[j+1:], "/")
		}
		return ""
	}
	return s
}

// errUnsupportedParameters refuses SQL parameters, which the core's
// filter engine does not bind.
var errUnsupportedParameters = errors.New("SQL filter and action parameters are not supported")

// coreRule converts an ATOM rule to the core's.
func coreRule(d *atom.RuleDescription) (core.Rule, error) {
	r := core.Rule{Name: d.Name}
	switch f := d.Filter.(type) {
	case nil, *atom.TrueFilter:
		r.Filter = core.Filter{Kind: core.FilterTrue}
	case *atom.FalseFilter:
		r.Filter = core.Filter{Kind: core.FilterFalse}
	case *atom.SQLFilter:
		if len(f.Parameters) > 0 {
			return r, errUnsupportedParameters
		}
		r.Filter = core.Filter{Kind: core.FilterSQL, SQL: f.SQLExpression}
	case *atom.CorrelationFilter:
		cf := &core.CorrelationFilter{
			CorrelationID: f.CorrelationID, MessageID: f.MessageID, To: f.To, ReplyTo: f.ReplyTo,
			Subject: f.Label, SessionID: f.SessionID, ReplyToSessionID: f.ReplyToSessionID, ContentType: f.ContentType,
		}
		for _, kv := range f.Properties {
			if cf.Properties == nil {
				cf.Properties = make(map[string]any)
			}
			cf.Properties[kv.Key] = coreValue(kv.Value)
		}
		r.Filter = core.Filter{Kind: core.FilterCorrelation, Correlation: cf}
	default:
		return r, fmt.Errorf("unsupported filter type %T", f)
	}
	switch a := d.Action.(type) {
	case nil, *atom.EmptyRuleAction:
	case *atom.SQLRuleAction:
		if len(a.Parameters) > 0 {
			return r, errUnsupportedParameters
		}
		r.Action = a.SQLExpression
	default:
		return r, fmt.Errorf("unsupported action type %T", a)
	}
	return r, nil
}

// coreValue converts a KeyValue value to one the core stores: durations
// (which it does not) become their xs:duration text.
func coreValue(v any) any {
	if d, ok := v.(time.Duration); ok {
		return atom.FormatDuration(d)
	}
	return v
}

// ruleDescription converts a core rule to ATOM.
func ruleDescription(r core.Rule) *atom.RuleDescription {
	d := &atom.RuleDescription{Name: r.Name, CreatedAt: r.CreatedAt}
	switch r.Filter.Kind {
	case core.FilterTrue:
		d.Filter = &atom.TrueFilter{}
	case core.FilterFalse:
		d.Filter = &atom.FalseFilter{}
	case core.FilterSQL:
		d.Filter = &atom.SQLFilter{SQLExpression: r.Filter.SQL}
	case core.FilterCorrelation:
		cf := r.Filter.Correlation
		if cf == nil {
			cf = &core.CorrelationFilter{}
		}
		out := &atom.CorrelationFilter{
			CorrelationID: cf.CorrelationID, MessageID: cf.MessageID, To: cf.To, ReplyTo: cf.ReplyTo,
			Label: cf.Subject, SessionID: cf.SessionID, ReplyToSessionID: cf.ReplyToSessionID, ContentType: cf.ContentType,
		}
		keys := make([]string, 0, len(cf.Properties))
		for k := range cf.Properties {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out.Properties = append(out.Properties, atom.KeyValue{Key: k, Value: cf.Properties[k]})
		}
		d.Filter = out
	}
	if r.Action != "" {
		d.Action = &atom.SQLRuleAction{SQLExpression: r.Action}
	} else {
		d.Action = &atom.EmptyRuleAction{}
	}
	return d
}
