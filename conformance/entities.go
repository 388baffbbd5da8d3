package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Sub describes a subscription a scenario needs.
type Sub struct {
	Name  string
	Props *admin.SubscriptionProperties
	Rules []admin.RuleProperties // nil: the $Default rule
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Queue returns a queue with the given properties for this scenario: a
// fresh one deleted when the scenario ends, or, on a predeclared target,
// the Config.json queue named profile, drained first.
func (t *T) Queue(profile string, props *admin.QueueProperties) string {
	if t.target.Predeclared {
		t.drain(profile, "")
		return profile
	}
	name := profile + "-" + suffix()
	_, err := t.target.admin.CreateQueue(t.ctx, name, &admin.CreateQueueOptions{Properties: props})
	t.must(err, "creating queue %s", name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = t.target.admin.DeleteQueue(ctx, name, nil)
	})
	return name
}

// Topic returns a topic with the given subscriptions (see Queue).
func (t *T) Topic(profile string, props *admin.TopicProperties, subs ...Sub) string {
	if t.target.Predeclared {
		for _, s := range subs {
			t.drain(profile, s.Name)
		}
		return profile
	}
	name := profile + "-" + suffix()
	_, err := t.target.admin.CreateTopic(t.ctx, name, &admin.CreateTopicOptions{Properties: props})
	t.must(err, "creating topic %s", name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = t.target.admin.DeleteTopic(ctx, name, nil)
	})
	for _, s := range subs {
		opts := &admin.CreateSubscriptionOptions{Properties: s.Props}
		_, err := t.target.admin.CreateSubscription(t.ctx, name, s.Name, opts)
		t.must(err, "creating subscription %s/%s", name, s.Name)
		if len(s.Rules) > 0 {
			_, err := t.target.admin.DeleteRule(t.ctx, name, s.Name, "$Default", nil)
			t.must(err, "removing $Default from %s/%s", name, s.Name)
		}
		for _, r := range s.Rules {
			_, err := t.target.admin.CreateRule(t.ctx, name, s.Name, &admin.CreateRuleOptions{Name: &r.Name, Filter: r.Filter, Action: r.Action})
			t.must(err, "creating rule %s on %s/%s", r.Name, name, s.Name)
		}
	}
	return name
}

// drain removes every message of a predeclared entity (and its
// dead-letter subqueue) so a scenario starts from empty.
func (t *T) drain(entity, sub string) {
	for _, sq := range []azservicebus.SubQueue{0, azservicebus.SubQueueDeadLetter} {
		opts := &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete, SubQueue: sq}
		var r *azservicebus.Receiver
		var err error
		if sub == "" {
			r, err = t.target.sb.NewReceiverForQueue(entity, opts)
		} else {
			r, err = t.target.sb.NewReceiverForSubscription(entity, sub, opts)
		}
		t.must(err, "draining %s", entity)
		for {
			ctx, cancel := context.WithTimeout(t.ctx, time.Second)
			msgs, err := r.ReceiveMessages(ctx, 100, nil)
			cancel()
			if len(msgs) == 0 || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
				break
			}
		}
		_ = r.Close(t.ctx)
	}
}
