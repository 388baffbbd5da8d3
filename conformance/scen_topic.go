package conformance

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Topics, subscriptions, rules and forwarding.

func init() {
	register(
		Scenario{Name: "topic-fanout", Seed: "topics: a message sent to a topic reaches every subscription", Protocol: AMQP, Run: func(t *T) {
			tp := t.Topic("cf-topic")
			t.Send(tp, Text("news"))
			for _, s := range []string{"a", "b"} {
				t.expectBodies(t.ReceiveN(t.Receiver(tp, s, nil), 1, 10*time.Second), "news")
			}
		}},
		Scenario{Name: "topic-subscriptions-independent", Seed: "topics: each subscription settles its own copy", Protocol: AMQP, Run: func(t *T) {
			tp := t.Topic("cf-topic")
			t.Send(tp, Text("x"))
			ra := t.Receiver(tp, "a", nil)
			t.Complete(ra, t.ReceiveN(ra, 1, 10*time.Second)[0])
			t.expectBodies(t.ReceiveN(t.Receiver(tp, "b", nil), 1, 10*time.Second), "x")
		}},
		Scenario{Name: "topic-correlation-filter", Seed: "filters: a correlation filter matches on system and application properties", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreFilters, "no other message"}}, Run: func(t *T) {
				tp := t.Topic("cf-topic-corr")
				t.Send(tp,
					&azservicebus.Message{Body: []byte("red-order"), Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"color": "red"}},
					&azservicebus.Message{Body: []byte("blue-order"), Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"color": "blue"}},
					&azservicebus.Message{Body: []byte("red-note"), Subject: to.Ptr("note"), ApplicationProperties: map[string]any{"color": "red"}})
				r := t.Receiver(tp, "red", nil)
				t.expectBodies(t.ReceiveN(r, 1, 10*time.Second), "red-order")
				t.Check("no other message")
				t.ReceiveNone(r, 2*time.Second, "only the matching message may arrive")
			}},
		Scenario{Name: "topic-sql-filter", Seed: "filters: a SQL filter selects messages by expression", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreFilters, "no other message"}}, Run: func(t *T) {
				tp := t.Topic("cf-topic-sql")
				t.Send(tp,
					&azservicebus.Message{Body: []byte("11"), Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"quantity": int64(11)}},
					&azservicebus.Message{Body: []byte("5"), Subject: to.Ptr("order"), ApplicationProperties: map[string]any{"quantity": int64(5)}},
					&azservicebus.Message{Body: []byte("12-note"), Subject: to.Ptr("note"), ApplicationProperties: map[string]any{"quantity": int64(12)}})
				r := t.Receiver(tp, "big", nil)
				t.expectBodies(t.ReceiveN(r, 1, 10*time.Second), "11")
				t.Check("no other message")
				t.ReceiveNone(r, 2*time.Second, "only the matching message may arrive")
			}},
		Scenario{Name: "topic-sql-action", Seed: "filters: a SQL rule action changes the subscription's copy only", Protocol: AMQP, Run: func(t *T) {
			tp := t.Topic("cf-topic-action")
			t.Send(tp, Text("x"))
			tagged := t.ReceiveN(t.Receiver(tp, "tagged", nil), 1, 10*time.Second)[0]
			plain := t.ReceiveN(t.Receiver(tp, "plain", nil), 1, 10*time.Second)[0]
			if tagged.ApplicationProperties["tagged"] != "yes" {
				t.Errorf("tagged copy properties %v", tagged.ApplicationProperties)
			}
			if _, ok := plain.ApplicationProperties["tagged"]; ok {
				t.Errorf("the action leaked into another subscription: %v", plain.ApplicationProperties)
			}
		}},
		Scenario{Name: "topic-no-matching-subscription", Seed: "topics: a message no rule matches is not delivered anywhere", Protocol: AMQP,
			Detects: []Detection{{FaultIgnoreFilters, "no message"}}, Run: func(t *T) {
				tp := t.Topic("cf-topic-none")
				t.Send(tp, Text("x"))
				t.Check("no message")
				t.ReceiveNone(t.Receiver(tp, "none", nil), 2*time.Second, "a false filter matches nothing")
			}},
		Scenario{Name: "topic-subscription-deadletter", Seed: "002 a subscription has its own dead-letter subqueue", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "in the dead-letter subqueue"}}, Run: func(t *T) {
				tp := t.Topic("cf-topic")
				r := t.Receiver(tp, "a", nil)
				t.Send(tp, Text("x"))
				t.must(r.DeadLetterMessage(t.ctx, t.ReceiveN(r, 1, 10*time.Second)[0], &azservicebus.DeadLetterOptions{Reason: to.Ptr("r")}), "dead-letter")
				t.Check("in the dead-letter subqueue")
				d := t.ReceiveN(t.DLQ(tp, "a"), 1, 10*time.Second)[0]
				if deref(d.DeadLetterReason) != "r" {
					t.Fatalf("reason %v", deref(d.DeadLetterReason))
				}
			}},
		Scenario{Name: "topic-ttl-smaller-applies", Seed: "003 if the topic's TTL is smaller than the subscription's, the topic TTL applies", Protocol: AMQP, Run: func(t *T) {
			tp := t.Topic("cf-topic-ttl")
			t.Send(tp, Text("x"))
			m := t.ReceiveN(t.Receiver(tp, "long", nil), 1, 10*time.Second)[0]
			if m.ExpiresAt == nil || m.ExpiresAt.Sub(*m.EnqueuedTime) != 5*time.Minute {
				t.Fatalf("TTL %v, want the topic's 5m", m.ExpiresAt.Sub(*m.EnqueuedTime))
			}
		}},
		Scenario{Name: "rules-add-list-remove", Seed: "rules: rules are added, listed and removed at run time", Protocol: REST, Run: func(t *T) {
			if t.target.Predeclared {
				t.Skipf("needs management")
			}
			tp := t.Topic("cf-topic")
			_, err := t.target.admin.CreateRule(t.ctx, tp, "a", &admin.CreateRuleOptions{Name: to.Ptr("vip"), Filter: &admin.SQLFilter{Expression: "vip = true"}})
			t.must(err, "create rule")
			_, err = t.target.admin.CreateRule(t.ctx, tp, "a", &admin.CreateRuleOptions{Name: to.Ptr("vip"), Filter: &admin.TrueFilter{}})
			if err == nil {
				t.Errorf("creating a rule with a taken name succeeded")
			}
			names := map[string]bool{}
			p := t.target.admin.NewListRulesPager(tp, "a", nil)
			for p.More() {
				page, err := p.NextPage(t.ctx)
				t.must(err, "list rules")
				for _, r := range page.Rules {
					names[r.Name] = true
				}
			}
			if !names["vip"] || !names["$Default"] {
				t.Errorf("rules %v, want $Default and vip", names)
			}
			_, err = t.target.admin.DeleteRule(t.ctx, tp, "a", "vip", nil)
			t.must(err, "delete rule")
		}},
		Scenario{Name: "forward-to-queue", Seed: "forwarding: ForwardTo moves messages to the target entity", Protocol: AMQP, Run: func(t *T) {
			target := t.Queue("cf-fwd-target")
			src := t.Queue("cf-fwd-source")
			t.Send(src, Text("moved"))
			t.expectBodies(t.ReceiveN(t.Receiver(target, "", nil), 1, 10*time.Second), "moved")
		}},
		Scenario{Name: "forward-dead-letters", Seed: "forwarding: ForwardDeadLetteredMessagesTo sends dead letters to the target", Protocol: AMQP,
			Detects: []Detection{{FaultDropDeadLetters, "in the target"}}, Run: func(t *T) {
				target := t.Queue("cf-fwd-target")
				src := t.Queue("cf-fwd-dlq-source")
				t.Send(src, Text("dead"))
				r := t.Receiver(src, "", nil)
				t.must(r.DeadLetterMessage(t.ctx, t.ReceiveN(r, 1, 10*time.Second)[0], &azservicebus.DeadLetterOptions{Reason: to.Ptr("why")}), "dead-letter")
				t.Check("in the target")
				m := t.ReceiveN(t.Receiver(target, "", nil), 1, 10*time.Second)[0]
				if deref(m.DeadLetterReason) != "why" {
					t.Errorf("forwarded dead letter reason %v", deref(m.DeadLetterReason))
				}
			}},
	)
}
