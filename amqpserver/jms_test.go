package amqpserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// jmsReceiver attaches a receiver to a topic as Qpid JMS does for a
// consumer: the link name carries the JMS subscription name, the source
// its durability, capabilities and selector.
func jmsReceiver(t *testing.T, s *amqp.Session, topic, linkName string, durable bool, selector string, caps ...string) *amqp.Receiver {
	t.Helper()
	opts := &amqp.ReceiverOptions{Name: linkName, Credit: -1, SourceCapabilities: append([]string{"topic"}, caps...)}
	if durable {
		opts.SourceDurability, opts.SourceExpiryPolicy = amqp.DurabilityUnsettledState, amqp.ExpiryPolicyNever
	} else {
		opts.SourceExpiryPolicy = amqp.ExpiryPolicyLinkDetach
	}
	if selector != "" {
		opts.Filters = []amqp.LinkFilter{amqp.NewSelectorFilter(selector)}
	}
	r, err := s.NewReceiver(t.Context(), topic, opts)
	if err != nil {
		t.Fatalf("attach %s on %s: %v", linkName, topic, err)
	}
	return r
}

// waitGone waits until the entity at path is deleted.
func (ts *testServer) waitGone(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := ts.Broker.GetEntity(path); core.CodeOf(err) == core.CodeNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestJMSTopicSubscriptions: a receiver on a topic gets the subscription
// Service Bus makes for a JMS consumer: "<name>$<client id>$D" for a
// durable one (the connection's container-id is the client id), kept
// after the link goes; "<name>$$D" for a shared one without client id
// ("global"), whatever the "|…" suffix of the link name; a selector
// becomes the subscription's SQL filter; a non-durable one is deleted
// with its link.
func TestJMSTopicSubscriptions(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	conn := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey), ContainerID: "client-a"})
	s := mustSession(t, conn)

	durable := jmsReceiver(t, s, "t", "orders", true, "color = 'red'")
	shared := jmsReceiver(t, s, "t", "workers|global2", true, "", "shared", "global")
	volatile := jmsReceiver(t, s, "t", "qpid-jms:receiver:ID:1:1:1:t", false, "")
	for _, name := range []string{"orders$client-a$D", "workers$$D"} {
		e, err := ts.Broker.GetEntity("t/Subscriptions/" + name)
		if err != nil || e.ClientAffine == nil || !e.ClientAffine.Durable {
			subs, _ := ts.Broker.ListEntities(core.KindSubscription, "t")
			for _, e := range subs {
				t.Logf("subscription %s %+v", e.Name, e.ClientAffine)
			}
			t.Fatalf("subscription %s: %+v %v", name, e, err)
		}
	}
	subs, err := ts.Broker.ListEntities(core.KindSubscription, "t")
	if err != nil || len(subs) != 3 {
		t.Fatalf("subscriptions of t: %d %v, want 3", len(subs), err)
	}
	var volatilePath string
	for _, e := range subs {
		if !e.ClientAffine.Durable {
			volatilePath = e.Path()
		}
	}

	snd := mustSender(t, s, "t")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for _, color := range []string{"blue", "red"} {
		m := amqp.NewMessage([]byte(color))
		m.ApplicationProperties = map[string]any{"color": color}
		if err := snd.Send(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := string(mustReceive(t, durable).GetData()); got != "red" {
		t.Errorf("the selector's subscription got %q first, want red", got)
	}
	for _, r := range []*amqp.Receiver{shared, volatile} {
		if got := string(mustReceive(t, r).GetData()); got != "blue" {
			t.Errorf("got %q, want blue", got)
		}
	}

	for _, r := range []*amqp.Receiver{durable, shared, volatile} {
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ts.waitGone(t, volatilePath)
	for _, name := range []string{"orders$client-a$D", "workers$$D"} {
		if _, err := ts.Broker.GetEntity("t/Subscriptions/" + name); err != nil {
			t.Errorf("durable %s after its link closed: %v", name, err)
		}
	}
}

// TestJMSUnsubscribe: an attach without a source names a durable
// subscription by its link name (Qpid JMS's unsubscribe): it is
// answered with the subscription's source, and the closing detach
// deletes the subscription before it is answered. An unknown one gets a
// null source and amqp:not-found.
func TestJMSUnsubscribe(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	aff := &core.ClientAffine{ClientID: "raw", Durable: true}
	ts.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "orders$raw$D", ClientAffine: aff})

	p := ts.rawDial(t)
	p.open() // container-id "raw"
	p.writeFrame(0, beginFrame())
	p.readFrame()
	p.writeFrame(0, &frames.Attach{Name: "orders", Handle: 0, Role: frames.RoleReceiver, Target: &frames.Target{}})
	a, ok := p.readFrame().(*frames.Attach)
	if !ok || a.Source == nil || a.Source.Address != "t" {
		t.Fatalf("lookup answered %+v, want the source on t", a)
	}
	p.writeFrame(0, &frames.Detach{Handle: 0, Closed: true})
	if d, ok := p.readFrame().(*frames.Detach); !ok || !d.Closed || d.Error != nil {
		t.Fatalf("detach answered %+v", d)
	}
	if _, err := ts.Broker.GetEntity("t/Subscriptions/orders$raw$D"); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("after unsubscribe: %v, want not found", err)
	}

	p.writeFrame(0, &frames.Attach{Name: "orders", Handle: 1, Role: frames.RoleReceiver, Target: &frames.Target{}})
	if a, ok := p.readFrame().(*frames.Attach); !ok || a.Source != nil {
		t.Fatalf("lookup of an unknown subscription answered %+v, want no source", a)
	}
	if d, ok := p.readFrame().(*frames.Detach); !ok || d.Error == nil || d.Error.Condition != frames.CondNotFound {
		t.Fatalf("then %+v, want a detach with amqp:not-found", d)
	}
}

// TestJMSSubscriptionNeedsManage: making a JMS consumer's subscription
// needs Manage on the topic; Listen alone is refused.
func TestJMSSubscriptionNeedsManage(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	s := mustSession(t, ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("listen-only", "listen-key")}))
	_, err := s.NewReceiver(t.Context(), "t", &amqp.ReceiverOptions{Name: "orders", SourceDurability: amqp.DurabilityUnsettledState, SourceCapabilities: []string{"topic"}})
	var ae *amqp.Error
	if err == nil {
		t.Fatal("attached with Listen only")
	}
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondUnauthorizedAccess {
		t.Fatalf("attach: %v, want amqp:unauthorized-access", err)
	}
	if subs, _ := ts.Broker.ListEntities(core.KindSubscription, "t"); len(subs) != 0 {
		t.Errorf("%d subscriptions made, want none", len(subs))
	}
}

// TestTopicReceiverWithoutJMS: a receiver on a topic without the
// capability "topic" (every SDK's) is still refused with amqp:not-allowed,
// and no subscription is made.
func TestTopicReceiverWithoutJMS(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	_, err := ts.session(t).NewReceiver(t.Context(), "t", nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotAllowed {
		t.Fatalf("attach: %v, want amqp:not-allowed", err)
	}
	if subs, _ := ts.Broker.ListEntities(core.KindSubscription, "t"); len(subs) != 0 {
		t.Errorf("%d subscriptions made, want none", len(subs))
	}
}

// TestJMSTemporaryQueue: a sender attached to a dynamic target with the
// capability temporary-queue (Qpid JMS's createTemporaryQueue) gets a
// queue of omnibus's naming as its target address; messages sent to it
// arrive; the queue is deleted when that link goes. Without the
// capability, a dynamic target is refused.
func TestJMSTemporaryQueue(t *testing.T) {
	ts := newTestServer(t, nil)
	s := ts.session(t)
	creator, err := s.NewSender(t.Context(), "", &amqp.SenderOptions{DynamicAddress: true, TargetCapabilities: []string{"temporary-queue"}})
	if err != nil {
		t.Fatal(err)
	}
	name := creator.Address()
	if e, err := ts.Broker.GetEntity(name); err != nil || e.Kind != core.KindQueue || !strings.HasPrefix(name, "jms-temp-") {
		t.Fatalf("temporary queue %q: %+v %v", name, e, err)
	}
	mustSend(t, mustSender(t, s, name), "reply")
	if got := string(mustReceive(t, mustReceiver(t, s, name, amqp.ReceiverSettleModeFirst)).GetData()); got != "reply" {
		t.Errorf("got %q from the temporary queue", got)
	}
	if err := creator.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ts.waitGone(t, name)

	_, err = s.NewSender(t.Context(), "", &amqp.SenderOptions{DynamicAddress: true})
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotImplemented {
		t.Fatalf("a dynamic target without a JMS capability: %v, want amqp:not-implemented", err)
	}
}

// TestJMSQueueSelectorRefused: a selector on a queue (or subscription)
// receiver is refused with amqp:not-implemented rather than ignored,
// which would hand the consumer messages it did not select.
func TestJMSQueueSelectorRefused(t *testing.T) {
	ts := newTestServer(t, nil)
	_, err := ts.session(t).NewReceiver(t.Context(), "q", &amqp.ReceiverOptions{
		SourceCapabilities: []string{"queue"}, Filters: []amqp.LinkFilter{amqp.NewSelectorFilter("color = 'red'")}})
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotImplemented {
		t.Fatalf("attach: %v, want amqp:not-implemented", err)
	}
}

// TestSelectorSQL: a JMS selector's header fields read the message's
// system properties; strings, qualified names and other identifiers stay.
func TestSelectorSQL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"color = 'red'", "color = 'red'"},
		{"JMSCorrelationID = '5' AND prop1 = 'test'", "sys.CorrelationId = '5' AND prop1 = 'test'"},
		{"JMSType='order' OR JMSMessageID<>'ID:1'", "sys.Label='order' OR sys.MessageId<>'ID:1'"},
		{"note = 'JMSType is ''JMSType''' AND user.JMSType = 1", "note = 'JMSType is ''JMSType''' AND user.JMSType = 1"},
		{"JMSTypeX = 1 AND xJMSType = 2", "JMSTypeX = 1 AND xJMSType = 2"},
		{"'unterminated JMSType", "'unterminated JMSType"},
	} {
		if got := selectorSQL(c.in); got != c.want {
			t.Errorf("selectorSQL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestJMSAutoCreate: a connection marked com.microsoft:is-client-provider
// (Microsoft's JMS connection factory) that sends to a queue that does
// not exist, with the capability "queue", gets it made with the
// auto-delete-on-idle its open asked for (raised to Service Bus's 5
// minutes); a consumer with "topic" gets the topic. Without the mark, or
// without Manage, the attach is refused as before.
func TestJMSAutoCreate(t *testing.T) {
	ts := newTestServer(t, nil)
	props := map[string]any{"com.microsoft:is-client-provider": true,
		"com.microsoft:queue-auto-delete-on-idle-duration-in-seconds": int64(600),
		"com.microsoft:topic-auto-delete-on-idle-duration-in-seconds": int64(60)}
	s := mustSession(t, ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey), Properties: props}))
	if _, err := s.NewSender(t.Context(), "made", &amqp.SenderOptions{TargetCapabilities: []string{"queue"}}); err != nil {
		t.Fatalf("sender to a missing queue: %v", err)
	}
	if e, err := ts.Broker.GetEntity("made"); err != nil || e.Kind != core.KindQueue || e.AutoDeleteOnIdle != 10*time.Minute {
		t.Fatalf("made: %+v %v, want a queue deleted after 10 idle minutes", e, err)
	}
	jmsReceiver(t, s, "made-topic", "sub", true, "")
	if e, err := ts.Broker.GetEntity("made-topic"); err != nil || e.Kind != core.KindTopic || e.AutoDeleteOnIdle != core.MinAutoDeleteOnIdle {
		t.Fatalf("made-topic: %+v %v, want a topic with the minimum auto-delete", e, err)
	}

	var ae *amqp.Error
	_, err := ts.session(t).NewSender(t.Context(), "not-made", &amqp.SenderOptions{TargetCapabilities: []string{"queue"}})
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotFound {
		t.Errorf("a client without the mark: %v, want amqp:not-found", err)
	}
	listen := mustSession(t, ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("listen-only", "listen-key"), Properties: props}))
	_, err = listen.NewReceiver(t.Context(), "not-made", &amqp.ReceiverOptions{SourceCapabilities: []string{"queue"}})
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondUnauthorizedAccess {
		t.Errorf("Listen only: %v, want amqp:unauthorized-access", err)
	}
	if _, err := ts.Broker.GetEntity("not-made"); core.CodeOf(err) != core.CodeNotFound {
		t.Errorf("not-made: %v, want not found", err)
	}
}

// TestJMSSelectorChange: asking for a durable subscription with another
// selector replaces it (JMS 2.0 6.11.1: the old one is deleted and a new
// one made, messages and all), unless a consumer is using it, when the
// attach is refused with amqp:not-allowed.
func TestJMSSelectorChange(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	s := mustSession(t, ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(testKeyName, testKey), ContainerID: "c"}))
	first := jmsReceiver(t, s, "t", "orders", true, "color = 'red'")
	opts := &amqp.ReceiverOptions{Name: "orders|2", SourceCapabilities: []string{"topic", "shared"}, SourceDurability: amqp.DurabilityUnsettledState,
		Filters: []amqp.LinkFilter{amqp.NewSelectorFilter("color = 'blue'")}}
	_, err := s.NewReceiver(t.Context(), "t", opts)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotAllowed {
		t.Fatalf("another selector while in use: %v, want amqp:not-allowed", err)
	}
	if err := first.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	jmsReceiver(t, s, "t", "orders", true, "color = 'blue'")
	rules, err := ts.Broker.ListRules("t/Subscriptions/orders$c$D")
	if err != nil || len(rules) != 1 || rules[0].Filter.SQL != "color = 'blue'" {
		t.Fatalf("rules after the change: %+v %v, want the blue selector", rules, err)
	}
}
