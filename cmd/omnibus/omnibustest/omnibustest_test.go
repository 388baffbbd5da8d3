package omnibustest_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/cmd/omnibus/omnibustest"
	"github.com/omnibusmq/omnibus/core"
)

func newClient(t *testing.T, b *omnibustest.Broker) *azservicebus.Client {
	t.Helper()
	c, err := azservicebus.NewClientFromConnectionString(b.ConnectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestQueueRoundTrip: the broker Start returns takes a send on the queue
// it was asked to create and hands the message to a receiver.
func TestQueueRoundTrip(t *testing.T) {
	b := omnibustest.Start(t, omnibustest.Queue("orders"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := newClient(t, b)
	s, err := c.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("hello")}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := c.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "hello" {
		t.Fatalf("received %v, %v", msgs, err)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
}

// TestTopicSessionsAndEntities: a topic's subscriptions each get the
// message, a session queue takes sessions, and an entity created with
// its own properties has them (read back through the admin client over
// HTTP).
func TestTopicSessionsAndEntities(t *testing.T) {
	b := omnibustest.Start(t,
		omnibustest.Topic("events", "audit", "billing"),
		omnibustest.SessionQueue("per-customer"),
		omnibustest.Entity(core.Entity{Kind: core.KindQueue, Name: "short-lock", LockDuration: 5 * time.Second, MaxDeliveryCount: 2}))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := newClient(t, b)
	s, err := c.NewSender("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("event")}, nil); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"audit", "billing"} {
		r, err := c.NewReceiverForSubscription("events", sub, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		if msgs, err := r.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 {
			t.Fatalf("%s: %v, %v", sub, msgs, err)
		}
	}
	ss, err := c.NewSender("per-customer", nil)
	if err != nil {
		t.Fatal(err)
	}
	sid := "customer-7"
	if err := ss.SendMessage(ctx, &azservicebus.Message{Body: []byte("x"), SessionID: &sid}, nil); err != nil {
		t.Fatal(err)
	}
	sr, err := c.AcceptSessionForQueue(ctx, "per-customer", sid, nil)
	if err != nil {
		t.Fatalf("accept session: %v", err)
	}
	if msgs, err := sr.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 {
		t.Fatalf("session receive: %v, %v", msgs, err)
	}

	ac, err := admin.NewClientFromConnectionString(b.AdminConnectionString,
		&admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: b.HTTPClient}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := ac.GetQueue(ctx, "short-lock", nil)
	if err != nil || q == nil || *q.LockDuration != "PT5S" || *q.MaxDeliveryCount != 2 {
		t.Fatalf("short-lock: %+v, %v", q, err)
	}
}

// TestBrokersAreIsolated: two brokers in one test process are two
// namespaces; a message sent to one never reaches the other.
func TestBrokersAreIsolated(t *testing.T) {
	one := omnibustest.Start(t, omnibustest.Queue("q"))
	two := omnibustest.Start(t, omnibustest.Queue("q"))
	if one.ConnectionString == two.ConnectionString {
		t.Fatalf("both brokers have %s", one.ConnectionString)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := newClient(t, one).NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("for one")}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := newClient(t, two).NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	peeked, err := r.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 0 {
		t.Fatalf("the second broker holds %d messages (%v)", len(peeked), err)
	}
}
