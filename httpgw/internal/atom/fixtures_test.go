package atom

import (
	"time"
)

// Fixed times so that golden files are stable.
var (
	created  = time.Date(2026, 2, 3, 19, 34, 5, 498303900, time.UTC)
	updated  = time.Date(2026, 4, 12, 1, 28, 26, 716332400, time.UTC)
	accessed = time.Date(2026, 4, 6, 20, 37, 28, 447000000, time.UTC)
)

const base = "https://localhost:5300/"

func fullQueue() *QueueDescription {
	q := DefaultQueueDescription()
	q.LockDuration = 30 * time.Second
	q.DefaultMessageTimeToLive = 14 * 24 * time.Hour
	q.MaxDeliveryCount = 11
	q.RequiresSession = true
	q.DeadLetteringOnMessageExpiration = true
	q.SizeInBytes = 542
	q.MessageCount = 3
	q.AuthorizationRules = []AuthorizationRule{{
		Type:         "SharedAccessAuthorizationRule",
		ClaimType:    "SharedAccessKey",
		ClaimValue:   "None",
		Rights:       []string{"Manage", "Listen", "Send"},
		KeyName:      "TestSharedKeyName",
		CreatedTime:  created,
		ModifiedTime: updated,
		PrimaryKey:   "primary-key",
		SecondaryKey: "secondary-key",
	}}
	q.ForwardTo = "sb://localhost/other"
	q.UserMetadata = "some <metadata> & more"
	q.CreatedAt, q.UpdatedAt, q.AccessedAt = created, updated, accessed
	q.CountDetails = CountDetails{ActiveMessageCount: 3, DeadLetterMessageCount: 1, ScheduledMessageCount: 2, TransferMessageCount: 4, TransferDeadLetterMessageCount: 5}
	q.ForwardDeadLetteredMessagesTo = "sb://localhost/dlq-sink"
	q.MaxMessageSizeInKilobytes = 1024
	return &q
}

func fullTopic() *TopicDescription {
	t := DefaultTopicDescription()
	t.DefaultMessageTimeToLive = time.Hour
	t.RequiresDuplicateDetection = true
	t.DuplicateDetectionHistoryTimeWindow = 20 * time.Second
	t.SizeInBytes = 1000
	t.UserMetadata = "topic metadata"
	t.CreatedAt, t.UpdatedAt, t.AccessedAt = created, updated, accessed
	t.CountDetails = CountDetails{ScheduledMessageCount: 7}
	t.SubscriptionCount = 2
	t.AutoDeleteOnIdle = 10 * time.Minute
	t.EnablePartitioning = true
	t.SqlFilterCount = 3
	t.CorrelationFilterCount = 1
	return &t
}

func fullSubscription() *SubscriptionDescription {
	s := DefaultSubscriptionDescription()
	s.LockDuration = 45 * time.Second
	s.RequiresSession = true
	s.DeadLetteringOnMessageExpiration = true
	s.DeadLetteringOnFilterEvaluationExceptions = false
	s.MessageCount = 9
	s.MaxDeliveryCount = 3
	s.Status = StatusReceiveDisabled
	s.ForwardTo = "q-forward"
	s.CreatedAt, s.UpdatedAt, s.AccessedAt = created, updated, time.Time{}
	s.CountDetails = CountDetails{ActiveMessageCount: 8, DeadLetterMessageCount: 1}
	s.UserMetadata = "sub metadata"
	s.AutoDeleteOnIdle = 5 * time.Minute
	return &s
}

func sqlRule() *RuleDescription {
	return &RuleDescription{
		Filter: &SQLFilter{
			SQLExpression:      "color = @color AND size > @size",
			CompatibilityLevel: 20,
			Parameters: []KeyValue{
				{Key: "@color", Value: "blue"},
				{Key: "@size", Value: int32(10)},
			},
		},
		Action: &SQLRuleAction{
			SQLExpression:      "SET priority = @p",
			CompatibilityLevel: 20,
			Parameters:         []KeyValue{{Key: "@p", Value: 1.5}},
		},
		CreatedAt: created,
		Name:      "sql-rule",
	}
}

func correlationRule() *RuleDescription {
	return &RuleDescription{
		Filter: &CorrelationFilter{
			CorrelationID:    "corr",
			MessageID:        "mid",
			To:               "to",
			ReplyTo:          "reply",
			Label:            "subject",
			SessionID:        "sess",
			ReplyToSessionID: "rsess",
			ContentType:      "application/json",
			Properties: []KeyValue{
				{Key: "s", Value: "text"},
				{Key: "i", Value: int32(-7)},
				{Key: "l", Value: int64(1) << 40},
				{Key: "d", Value: 2.25},
				{Key: "b", Value: true},
				{Key: "t", Value: created},
				{Key: "span", Value: 90 * time.Second},
				{Key: "none", Value: nil},
			},
		},
		Action:    &EmptyRuleAction{},
		CreatedAt: created,
		Name:      "correlation-rule",
	}
}

func namespaceInfo() *NamespaceInfo {
	return &NamespaceInfo{
		CreatedTime:  created,
		MessagingSKU: "Standard",
		ModifiedTime: updated,
		Name:         "sbemulatorns",
	}
}
