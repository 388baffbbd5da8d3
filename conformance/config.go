package conformance

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// EmulatorConfig renders the profile table as the Config.json of
// Microsoft's Service Bus emulator, for --predeclared runs. Profiles the
// emulator's schema cannot express (CloudOnly) are left out. Every
// property is written out, with Service Bus defaults where the profile
// leaves one unset, except DefaultMessageTimeToLive, which is the
// emulator's maximum (PT1H) when unset.
func EmulatorConfig() ([]byte, error) {
	type rule struct {
		Name       string
		Properties map[string]any
	}
	type entity struct {
		Name          string
		Properties    map[string]any
		Subscriptions []entity `json:",omitempty"`
		Rules         []rule   `json:",omitempty"`
	}
	ns := struct {
		Name   string
		Queues []entity
		Topics []entity
	}{Name: "sbemulatorns", Queues: []entity{}, Topics: []entity{}}
	// Forwarding queues go last: a forwarding target must exist first.
	ps := Profiles()
	sort.SliceStable(ps, func(i, j int) bool { return !forwards(ps[i]) && forwards(ps[j]) })
	for _, p := range ps {
		if p.CloudOnly != "" {
			continue
		}
		if !p.IsTopic() {
			ns.Queues = append(ns.Queues, entity{Name: p.Name, Properties: queueConfig(p.Queue)})
			continue
		}
		t := entity{Name: p.Name, Properties: map[string]any{
			"DefaultMessageTimeToLive":            orDefault(p.Topic.DefaultMessageTimeToLive, "PT1H"),
			"DuplicateDetectionHistoryTimeWindow": orDefault(p.Topic.DuplicateDetectionHistoryTimeWindow, "PT1M"),
			"RequiresDuplicateDetection":          p.Topic.RequiresDuplicateDetection != nil && *p.Topic.RequiresDuplicateDetection,
		}}
		for _, s := range p.Subs {
			sub := entity{Name: s.Name, Properties: subscriptionConfig(s.Props)}
			for _, r := range s.Rules {
				props, err := ruleConfig(r)
				if err != nil {
					return nil, fmt.Errorf("profile %s subscription %s: %w", p.Name, s.Name, err)
				}
				sub.Rules = append(sub.Rules, rule{Name: r.Name, Properties: props})
			}
			t.Subscriptions = append(t.Subscriptions, sub)
		}
		ns.Topics = append(ns.Topics, t)
	}
	doc := map[string]any{"UserConfig": map[string]any{
		"Namespaces": []any{ns},
		"Logging":    map[string]string{"Type": "File"},
	}}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func forwards(p Profile) bool {
	return p.Queue != nil && (orDefault(p.Queue.ForwardTo, "") != "" || orDefault(p.Queue.ForwardDeadLetteredMessagesTo, "") != "")
}

func orDefault(p *string, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return *p
}

func boolOf(p *bool) bool { return p != nil && *p }

func int32Or(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func queueConfig(q *admin.QueueProperties) map[string]any {
	return map[string]any{
		"DeadLetteringOnMessageExpiration":    boolOf(q.DeadLetteringOnMessageExpiration),
		"DefaultMessageTimeToLive":            orDefault(q.DefaultMessageTimeToLive, "PT1H"),
		"DuplicateDetectionHistoryTimeWindow": orDefault(q.DuplicateDetectionHistoryTimeWindow, "PT1M"),
		"ForwardDeadLetteredMessagesTo":       orDefault(q.ForwardDeadLetteredMessagesTo, ""),
		"ForwardTo":                           orDefault(q.ForwardTo, ""),
		"LockDuration":                        orDefault(q.LockDuration, "PT1M"),
		"MaxDeliveryCount":                    int32Or(q.MaxDeliveryCount, 10),
		"RequiresDuplicateDetection":          boolOf(q.RequiresDuplicateDetection),
		"RequiresSession":                     boolOf(q.RequiresSession),
	}
}

func subscriptionConfig(s *admin.SubscriptionProperties) map[string]any {
	if s == nil {
		s = &admin.SubscriptionProperties{}
	}
	return map[string]any{
		"DeadLetteringOnMessageExpiration": boolOf(s.DeadLetteringOnMessageExpiration),
		"DefaultMessageTimeToLive":         orDefault(s.DefaultMessageTimeToLive, "PT1H"),
		"LockDuration":                     orDefault(s.LockDuration, "PT1M"),
		"MaxDeliveryCount":                 int32Or(s.MaxDeliveryCount, 10),
		"ForwardDeadLetteredMessagesTo":    orDefault(s.ForwardDeadLetteredMessagesTo, ""),
		"ForwardTo":                        orDefault(s.ForwardTo, ""),
		"RequiresSession":                  boolOf(s.RequiresSession),
	}
}

// ruleConfig expresses a rule in the emulator's two filter types.
func ruleConfig(r admin.RuleProperties) (map[string]any, error) {
	props := map[string]any{}
	switch f := r.Filter.(type) {
	case *admin.CorrelationFilter:
		cf := map[string]any{}
		for k, v := range map[string]*string{
			"ContentType": f.ContentType, "CorrelationId": f.CorrelationID, "Label": f.Subject, "MessageId": f.MessageID,
			"ReplyTo": f.ReplyTo, "ReplyToSessionId": f.ReplyToSessionID, "SessionId": f.SessionID, "To": f.To,
		} {
			if v != nil {
				cf[k] = *v
			}
		}
		if len(f.ApplicationProperties) > 0 {
			cf["Properties"] = f.ApplicationProperties
		}
		props["FilterType"] = "Correlation"
		props["CorrelationFilter"] = cf
	case *admin.SQLFilter:
		props["FilterType"] = "Sql"
		props["SqlFilter"] = map[string]string{"SqlExpression": f.Expression}
	case *admin.TrueFilter:
		props["FilterType"] = "Sql"
		props["SqlFilter"] = map[string]string{"SqlExpression": "1=1"}
	case *admin.FalseFilter:
		props["FilterType"] = "Sql"
		props["SqlFilter"] = map[string]string{"SqlExpression": "1=0"}
	default:
		return nil, fmt.Errorf("rule %s: filter %T has no Config.json form", r.Name, r.Filter)
	}
	if a, ok := r.Action.(*admin.SQLAction); ok {
		props["Action"] = map[string]string{"SqlExpression": a.Expression}
	} else if r.Action != nil {
		return nil, fmt.Errorf("rule %s: action %T has no Config.json form", r.Name, r.Action)
	}
	return props, nil
}
