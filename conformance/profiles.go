package conformance

import (
	"sort"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Profile is a named entity shape that scenarios ask for through
// [T.Queue] and [T.Topic]. The same table creates fresh entities at run
// time and generates Config.json for predeclared runs, so the two cannot
// drift apart.
type Profile struct {
	Name  string
	Queue *admin.QueueProperties // queue profiles (may be empty, not nil)
	Topic *admin.TopicProperties // topic profiles (may be empty, not nil)
	Subs  []Sub                  // a topic's subscriptions
	// CloudOnly, when set, says why the profile cannot be declared in the
	// emulator's Config.json (its schema lacks the property); scenarios
	// using it are skipped on predeclared targets.
	CloudOnly string
}

// Sub describes a subscription of a topic profile.
type Sub struct {
	Name  string
	Props *admin.SubscriptionProperties
	Rules []admin.RuleProperties // nil: the $Default rule
}

// IsTopic reports whether p describes a topic.
func (p Profile) IsTopic() bool { return p.Topic != nil }

func queueProfile(name string, props admin.QueueProperties) Profile {
	return Profile{Name: name, Queue: &props}
}

func topicProfile(name string, props admin.TopicProperties, subs ...Sub) Profile {
	return Profile{Name: name, Topic: &props, Subs: subs}
}

func rule(name string, f admin.RuleFilter, a admin.RuleAction) admin.RuleProperties {
	return admin.RuleProperties{Name: name, Filter: f, Action: a}
}

// noPartitioning says why partitioned profiles are not in Config.json.
const noPartitioning = "the emulator's Config.json has no EnablePartitioning"

// profileTable lists every entity shape the scenarios use. ForwardTo and
// ForwardDeadLetteredMessagesTo name other profiles.
func profileTable() []Profile {
	return []Profile{
		// Short locks, so that on a predeclared entity what one scenario
		// left locked is free again soon for the next one's drain.
		queueProfile("cf-basic", admin.QueueProperties{LockDuration: to.Ptr("PT5S")}),
		queueProfile("cf-lock5s", admin.QueueProperties{LockDuration: to.Ptr("PT5S"), MaxDeliveryCount: to.Ptr[int32](10)}),
		queueProfile("cf-lock5s-mdc1", admin.QueueProperties{LockDuration: to.Ptr("PT5S"), MaxDeliveryCount: to.Ptr[int32](1)}),
		queueProfile("cf-lock5s-dlq-expiry", admin.QueueProperties{LockDuration: to.Ptr("PT5S"), DeadLetteringOnMessageExpiration: to.Ptr(true)}),
		queueProfile("cf-maxdelivery2", admin.QueueProperties{MaxDeliveryCount: to.Ptr[int32](2)}),
		queueProfile("cf-session", admin.QueueProperties{RequiresSession: to.Ptr(true), LockDuration: to.Ptr("PT5S")}),
		queueProfile("cf-ttl5m", admin.QueueProperties{DefaultMessageTimeToLive: to.Ptr("PT5M")}),
		queueProfile("cf-dlq-expiry", admin.QueueProperties{DeadLetteringOnMessageExpiration: to.Ptr(true)}),
		queueProfile("cf-dedup", admin.QueueProperties{RequiresDuplicateDetection: to.Ptr(true), DuplicateDetectionHistoryTimeWindow: to.Ptr("PT1M")}),
		queueProfile("cf-fwd-target", admin.QueueProperties{}),
		// Transactions: the input's lock outlives a scenario's steps.
		queueProfile("cf-txn-in", admin.QueueProperties{LockDuration: to.Ptr("PT30S")}),
		queueProfile("cf-txn-out", admin.QueueProperties{}),
		queueProfile("cf-fwd-source", admin.QueueProperties{ForwardTo: to.Ptr("cf-fwd-target")}),
		queueProfile("cf-fwd-dlq-source", admin.QueueProperties{ForwardDeadLetteredMessagesTo: to.Ptr("cf-fwd-target")}),
		{Name: "cf-autodelete", Queue: &admin.QueueProperties{AutoDeleteOnIdle: to.Ptr("PT5M")},
			CloudOnly: "the emulator's Config.json has no AutoDeleteOnIdle"},
		{Name: "cf-large", Queue: &admin.QueueProperties{MaxMessageSizeInKilobytes: to.Ptr[int64](2048)},
			CloudOnly: "the emulator's Config.json has no MaxMessageSizeInKilobytes (and the emulator has no large messages)"},
		// Service Bus's smallest size; the quota scenarios need an endpoint
		// that caps it (Target.MaxEntityBytes).
		queueProfile("cf-quota", admin.QueueProperties{MaxSizeInMegabytes: to.Ptr[int32](1024)}),
		{Name: "cf-partitioned", Queue: &admin.QueueProperties{EnablePartitioning: to.Ptr(true), LockDuration: to.Ptr("PT5S")},
			CloudOnly: noPartitioning},
		{Name: "cf-partitioned-session", Queue: &admin.QueueProperties{EnablePartitioning: to.Ptr(true), RequiresSession: to.Ptr(true), LockDuration: to.Ptr("PT5S")},
			CloudOnly: noPartitioning},
		{Name: "cf-partitioned-dedup", Queue: &admin.QueueProperties{EnablePartitioning: to.Ptr(true), RequiresDuplicateDetection: to.Ptr(true),
			DuplicateDetectionHistoryTimeWindow: to.Ptr("PT1M")}, CloudOnly: noPartitioning},
		{Name: "cf-topic-partitioned", Topic: &admin.TopicProperties{EnablePartitioning: to.Ptr(true)}, Subs: []Sub{{Name: "a"}},
			CloudOnly: noPartitioning},
		topicProfile("cf-topic", admin.TopicProperties{}, Sub{Name: "a"}, Sub{Name: "b"}),
		topicProfile("cf-topic-corr", admin.TopicProperties{},
			Sub{Name: "red", Rules: []admin.RuleProperties{rule("red", &admin.CorrelationFilter{Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"color": "red"}}, nil)}}),
		topicProfile("cf-topic-sql", admin.TopicProperties{},
			Sub{Name: "big", Rules: []admin.RuleProperties{rule("big", &admin.SQLFilter{Expression: "quantity > 10 AND sys.Label LIKE 'ord%'"}, nil)}}),
		topicProfile("cf-topic-action", admin.TopicProperties{},
			Sub{Name: "tagged", Rules: []admin.RuleProperties{rule("tag", &admin.SQLFilter{Expression: "1=1"}, &admin.SQLAction{Expression: "SET tagged = 'yes'"})}},
			Sub{Name: "plain"}),
		topicProfile("cf-topic-none", admin.TopicProperties{},
			Sub{Name: "none", Rules: []admin.RuleProperties{rule("never", &admin.FalseFilter{}, nil)}}),
		topicProfile("cf-topic-ttl", admin.TopicProperties{DefaultMessageTimeToLive: to.Ptr("PT5M")},
			Sub{Name: "long", Props: &admin.SubscriptionProperties{DefaultMessageTimeToLive: to.Ptr("PT1H")}}),
		topicProfile("cf-topic-session", admin.TopicProperties{},
			Sub{Name: "sessions", Props: &admin.SubscriptionProperties{RequiresSession: to.Ptr(true), LockDuration: to.Ptr("PT5S")}},
			Sub{Name: "plain"}),
	}
}

// profileByName returns the profile called name.
func profileByName(name string) (Profile, bool) {
	for _, p := range profileTable() {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// Profiles returns every entity profile, sorted by name.
func Profiles() []Profile {
	ps := profileTable()
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps
}
