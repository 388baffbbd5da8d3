package app

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// forwardConfig is an emulator Config.json whose forwarding targets come
// after the entities forwarding to them, and whose topic's subscription
// forwards to a queue: placed one by one with the fewest rule, each pair
// lands in two groups.
const forwardConfig = `{
  "UserConfig": {
    "Namespaces": [{
      "Name": "sbemulatorns",
      "Queues": [
        { "Name": "cfg-in", "Properties": { "ForwardTo": "cfg-out" } },
        { "Name": "cfg-other", "Properties": {} },
        { "Name": "cfg-out", "Properties": {} },
        { "Name": "cfg-sink", "Properties": {} }
      ],
      "Topics": [{ "Name": "cfg-news", "Properties": {},
        "Subscriptions": [{ "Name": "fwd", "Properties": { "ForwardTo": "cfg-sink" } }] }]
    }],
    "Logging": { "Type": "Console" }
  }
}`

// TestClusterGroupsForwarding: with three data groups, a queue created
// to forward (ForwardTo, ForwardDeadLetteredMessagesTo) is placed in its
// target's group, so forwarding works as on a single node; so does the
// config file's forwarding, whatever its order. Forwarding that crosses
// groups goes by transfer (TestClusterTransfers).
func TestClusterGroupsForwarding(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(forwardConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := startTestClusterOf(t, 3, func(o *Options) { o.ConfigPath = cfg }, func(co *ClusterOptions) { co.Groups = 3 })
	waitGroupsServing(t, nodes)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := nodes[3].routed
	groupOf := func(name string) uint64 {
		t.Helper()
		g, err := r.groupOf(ctx, name, false)
		if err != nil || g == 0 {
			t.Fatalf("%s is placed in group %d: %v", name, g, err)
		}
		return g
	}
	adm := clusterAdmin(t, nodes[1])
	sb, err := azservicebus.NewClientFromConnectionString(nodes[2].ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	send := func(to, body string) {
		t.Helper()
		s, err := sb.NewSender(to, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
	}
	receive := func(from, want string) {
		t.Helper()
		rc, err := sb.NewReceiverForQueue(from, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close(ctx)
		msgs, err := rc.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 || string(msgs[0].Body) != want {
			t.Fatalf("receive from %s: %v %v, want %q", from, msgs, err, want)
		}
	}

	t.Run("ConfigFile", func(t *testing.T) {
		// Applied by the meta leader once the chains are placed together.
		deadline := time.Now().Add(15 * time.Second)
		for {
			e, err := routedBroker(t, nodes[1]).GetEntity("cfg-news/Subscriptions/fwd")
			if err == nil && e.ForwardTo != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the config file's forwarding is not set after 15 s: %v %v", e, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if gi, go_ := groupOf("cfg-in"), groupOf("cfg-out"); gi != go_ {
			t.Errorf("cfg-in in group %d, its target cfg-out in %d", gi, go_)
		}
		if gt, gs := groupOf("cfg-news"), groupOf("cfg-sink"); gt != gs {
			t.Errorf("cfg-news in group %d, its subscription's target cfg-sink in %d", gt, gs)
		}
		send("cfg-in", "via-config")
		receive("cfg-out", "via-config")
		send("cfg-news", "news")
		receive("cfg-sink", "news")
	})

	t.Run("ForwardTo", func(t *testing.T) {
		if _, err := adm.CreateQueue(ctx, "b", nil); err != nil {
			t.Fatal(err)
		}
		to := "b"
		if _, err := adm.CreateQueue(ctx, "a", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{ForwardTo: &to}}); err != nil {
			t.Fatalf("create a forwarding to b: %v", err)
		}
		if ga, gb := groupOf("a"), groupOf("b"); ga != gb {
			t.Errorf("a in group %d, its target b in %d", ga, gb)
		}
		send("a", "forwarded")
		receive("b", "forwarded")
	})

	t.Run("ForwardDeadLetteredMessagesTo", func(t *testing.T) {
		if _, err := adm.CreateQueue(ctx, "dl-sink", nil); err != nil {
			t.Fatal(err)
		}
		to := "dl-sink"
		if _, err := adm.CreateQueue(ctx, "dl-src", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{ForwardDeadLetteredMessagesTo: &to}}); err != nil {
			t.Fatalf("create dl-src forwarding dead letters to dl-sink: %v", err)
		}
		if gs, gk := groupOf("dl-src"), groupOf("dl-sink"); gs != gk {
			t.Errorf("dl-src in group %d, its dead letters' target dl-sink in %d", gs, gk)
		}
		send("dl-src", "dead")
		rc, err := sb.NewReceiverForQueue("dl-src", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close(ctx)
		msgs, err := rc.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive from dl-src: %v %v", msgs, err)
		}
		if err := rc.DeadLetterMessage(ctx, msgs[0], nil); err != nil {
			t.Fatalf("dead-letter: %v", err)
		}
		receive("dl-sink", "dead")
	})
}

// clusterAdmin is a Go admin client (ATOM over plain HTTP) on node c.
func clusterAdmin(t *testing.T, c *Cluster) *admin.Client {
	t.Helper()
	_, port, _ := net.SplitHostPort(c.HTTPAddr().String())
	cs := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=" + DefaultKeyName + ";SharedAccessKey=" + DefaultKey
	a, err := admin.NewClientFromConnectionString(cs, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: plainHTTP{}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
