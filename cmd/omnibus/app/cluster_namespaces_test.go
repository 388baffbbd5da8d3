package app

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestClusterReplicatesNamespaces: a namespace created through one
// follower, a queue in it and a message sent through the other follower
// are replicated state like the rest: after the leader stops, the new
// leader serves the namespace and the message to a client that names the
// namespace by its key name.
func TestClusterReplicatesNamespaces(t *testing.T) {
	nodes := startTestCluster(t)
	leader := waitLeader(t, nodes)
	var followers []*Cluster
	for id, c := range nodes {
		if id != leader {
			followers = append(followers, c)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if st, body := nsCallAt(t, followers[0].HTTPAddr(), http.MethodPut, "/$namespaces/sales", DefaultKeyName, DefaultKey, ""); st != http.StatusCreated {
		t.Fatalf("create through a follower: %d %s", st, body)
	}
	queue := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`
	if st, body := nsCallAt(t, followers[0].HTTPAddr(), http.MethodPut, "/q", "sales", DefaultKey, queue); st != http.StatusCreated {
		t.Fatalf("create a queue in sales: %d %s", st, body)
	}
	salesClient := func(c *Cluster) *azservicebus.Client {
		cs := strings.Replace(c.ConnectionString(), "SharedAccessKeyName="+DefaultKeyName, "SharedAccessKeyName=sales", 1)
		cl, err := azservicebus.NewClientFromConnectionString(cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close(context.Background()) })
		return cl
	}
	s, err := salesClient(followers[1]).NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("replicated")}, nil); err != nil {
		t.Fatalf("send to sales through a follower: %v", err)
	}

	if err := nodes[leader].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	delete(nodes, leader)
	next := waitLeader(t, nodes)
	if st, body := nsCallAt(t, nodes[next].HTTPAddr(), http.MethodGet, "/$namespaces/sales", DefaultKeyName, DefaultKey, ""); st != http.StatusOK {
		t.Fatalf("the new leader does not know sales: %d %s", st, body)
	}
	r, err := salesClient(nodes[next]).NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "replicated" {
		t.Fatalf("sales' message on the new leader: %v, %v", msgs, err)
	}
	// The default namespace's queue of the same config holds nothing of it.
	dr, err := func() (*azservicebus.Receiver, error) {
		cl, err := azservicebus.NewClientFromConnectionString(nodes[next].ConnectionString(), nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { cl.Close(context.Background()) })
		return cl.NewReceiverForQueue("orders", nil)
	}()
	if err != nil {
		t.Fatal(err)
	}
	if peeked, err := dr.PeekMessages(ctx, 10, nil); err != nil || len(peeked) != 0 {
		t.Errorf("the default namespace holds %d messages (%v), want none", len(peeked), err)
	}
}
