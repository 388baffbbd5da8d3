package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/namespace"
)

// salesKey is the key of namespace sales' own rule in these tests.
const salesKey = "c2FsZXMtb3duLWtleS1mb3ItdGhlLWdyb3Vwcy10ZXN0cw=="

// salesRules are sales' own rules: one rule, known to no other namespace.
const salesRules = `{"AuthorizationRules":[{"KeyName":"salesKey","PrimaryKey":"` + salesKey + `","Rights":["Manage","Send","Listen"]}]}`

// clusterAdminAs is clusterAdmin with key name keyName and key key.
func clusterAdminAs(t *testing.T, c *Cluster, keyName, key string) *admin.Client {
	t.Helper()
	_, port, _ := net.SplitHostPort(c.HTTPAddr().String())
	cs := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=" + keyName + ";SharedAccessKey=" + key
	a, err := admin.NewClientFromConnectionString(cs, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: plainHTTP{}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// clusterClientAs is an SDK client on node c with key name keyName and
// key key.
func clusterClientAs(t *testing.T, c *Cluster, keyName, key string) *azservicebus.Client {
	t.Helper()
	cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true", c.AMQPAddr(), keyName, key)
	sb, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return sb
}

// replicaCount counts the keys under prefix in every copy of group g's
// state (0: the meta group) the nodes hold, summed.
func replicaCount(t *testing.T, nodes map[uint64]*Cluster, g uint64, prefix []byte) int {
	t.Helper()
	n := 0
	for _, c := range nodes {
		gn := c.Node().GroupNode(g)
		if g == 0 {
			gn = c.Node()
		}
		if gn == nil {
			continue
		}
		if err := gn.ScanReplica(prefix, func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestClusterGroupsNamespaces: with three data groups, a namespace
// created through node 1 (with a rule of its own) is known to every
// node; its queues, created through node 2 with its own key, are placed
// over the data groups; its key sends through node 3 and receives
// through node 1; the default namespace holds none of them; one forwards
// to another across groups; one deleted loses its placement. Deleted
// through node 3, it is gone from every node, and so are its placements
// and its data in every group.
func TestClusterGroupsNamespaces(t *testing.T) {
	nodes := startGroupCluster(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if st, body := nsCallAt(t, nodes[1].HTTPAddr(), http.MethodPut, "/$namespaces/sales", DefaultKeyName, DefaultKey, salesRules); st != http.StatusCreated {
		t.Fatalf("create sales through node 1: %d %s", st, body)
	}
	for id, c := range nodes {
		waitForCond(t, fmt.Sprintf("node %d to know sales", id), func() error {
			if st, body := nsCallAt(t, c.HTTPAddr(), http.MethodGet, "/$namespaces/sales", DefaultKeyName, DefaultKey, ""); st != http.StatusOK {
				return fmt.Errorf("%d %s", st, body)
			}
			return nil
		})
	}
	sales, err := nodes[1].routed.namespaces().Get("sales")
	if err != nil {
		t.Fatal(err)
	}
	id := sales.Record().ID

	adm := clusterAdminAs(t, nodes[2], "salesKey", salesKey)
	groups := map[uint64]bool{}
	const queues = 6
	for i := range queues {
		q := fmt.Sprint("q", i)
		if _, err := adm.CreateQueue(ctx, q, nil); err != nil {
			t.Fatalf("create %s in sales through node 2: %v", q, err)
		}
		g, err := nodes[3].routed.groupOf(ctx, qualify(id, q), false)
		if err != nil || g == 0 {
			t.Fatalf("the placement of sales' %s: %d %v", q, g, err)
		}
		groups[g] = true
	}
	if len(groups) < 2 {
		t.Errorf("sales' %d queues are all in group(s) %v", queues, groups)
	}
	if q, err := clusterAdmin(t, nodes[1]).GetQueue(ctx, "q0", nil); err != nil || q != nil {
		t.Errorf("the default namespace has sales' q0: %v %v", q, err)
	}

	// A forget of a queue of sales that exists (a delete's, racing a
	// create) keeps its placement: the check asks sales' broker.
	g1, err := nodes[1].routed.groupOf(ctx, qualify(id, "q1"), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[1].routed.callMeta(ctx, metaRequest{Op: metaForget, Name: qualify(id, "q1"), Group: g1}); err != nil {
		t.Fatal(err)
	}

	sender, receiver := clusterClientAs(t, nodes[3], "salesKey", salesKey), clusterClientAs(t, nodes[1], "salesKey", salesKey)
	for i := range queues {
		q := fmt.Sprint("q", i)
		s, err := sender.NewSender(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("to " + q)}, nil); err != nil {
			t.Fatalf("send to sales' %s through node 3: %v", q, err)
		}
		s.Close(ctx)
		rc, err := receiver.NewReceiverForQueue(q, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := rc.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "to "+q {
			t.Fatalf("receive from sales' %s through node 1: %v %v", q, msgs, err)
		}
		rc.Close(ctx)
	}
	// Leave a message in a queue, so that a group holds data of sales.
	s, err := sender.NewSender("q0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("left")}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	if n := replicaCount(t, nodes, 0, namespacePlacements(id)); n != 3*queues {
		t.Errorf("%d placements of sales' queues in the meta group's copies, want %d", n, 3*queues)
	}

	// Forwarding across groups within sales goes by transfer, as in the
	// default namespace: q0 updated to forward to a queue of another group.
	g0, err := nodes[1].routed.groupOf(ctx, qualify(id, "q0"), false)
	if err != nil {
		t.Fatal(err)
	}
	var dst string
	for i := range queues {
		q := fmt.Sprint("q", i)
		if g, err := nodes[1].routed.groupOf(ctx, qualify(id, q), false); err == nil && g != g0 {
			dst = q
			break
		}
	}
	if dst == "" {
		t.Fatalf("no queue of sales outside q0's group %d", g0)
	}
	props, err := adm.GetQueue(ctx, "q0", nil)
	if err != nil {
		t.Fatal(err)
	}
	props.ForwardTo = &dst
	if _, err := adm.UpdateQueue(ctx, "q0", props.QueueProperties, nil); err != nil {
		t.Fatalf("q0 (group %d) updated to forward to %s: %v", g0, dst, err)
	}
	fs, err := sender.NewSender("q0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.SendMessage(ctx, &azservicebus.Message{Body: []byte("across")}, nil); err != nil {
		t.Fatal(err)
	}
	fs.Close(ctx)
	frc, err := receiver.NewReceiverForQueue(dst, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	if msgs, err := frc.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 || string(msgs[0].Body) != "across" {
		t.Fatalf("receive what sales' q0 forwarded to %s across groups: %v %v", dst, msgs, err)
	}
	frc.Close(ctx)

	// A queue of sales deleted loses its placement, as one of the default
	// namespace does.
	if _, err := adm.DeleteQueue(ctx, "q5", nil); err != nil {
		t.Fatal(err)
	}
	waitPlacement(t, nodes, qualify(id, "q5"), false)

	// A create placed before the deletion that reaches its group after.
	stale, err := nodes[1].routed.routerFor("sales").(*nsRouter).PlaceIn(ctx, "late", 0)
	if err != nil {
		t.Fatal(err)
	}

	if st, body := nsCallAt(t, nodes[3].HTTPAddr(), http.MethodDelete, "/$namespaces/sales", DefaultKeyName, DefaultKey, ""); st != http.StatusOK {
		t.Fatalf("delete sales through node 3: %d %s", st, body)
	}
	waitForCond(t, "sales' placements and data gone from every copy", func() error {
		if n := replicaCount(t, nodes, 0, namespacePlacements(id)); n != 0 {
			return fmt.Errorf("%d placements left", n)
		}
		for g := uint64(1); g <= 3; g++ {
			if n := replicaCount(t, nodes, g, namespace.DataPrefix(id)); n != 0 {
				return fmt.Errorf("%d keys of sales left in the copies of group %d", n, g)
			}
		}
		return nil
	})
	if _, err := stale.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "late"}); err == nil {
		t.Error("a create placed before sales was deleted succeeded after")
	}
	for g := uint64(1); g <= 3; g++ {
		if n := replicaCount(t, nodes, g, namespace.DataPrefix(id)); n != 0 {
			t.Errorf("a create placed before sales was deleted left %d keys in group %d", n, g)
		}
	}
	for id, c := range nodes {
		waitForCond(t, fmt.Sprintf("node %d to forget sales", id), func() error {
			if st, body := nsCallAt(t, c.HTTPAddr(), http.MethodGet, "/$namespaces/sales", DefaultKeyName, DefaultKey, ""); st != http.StatusNotFound {
				return fmt.Errorf("%d %s", st, body)
			}
			return nil
		})
	}
}

// TestClusterGroupsNamespaceNeedsMetaLeader: with the meta group
// leaderless, creating a namespace is refused with 503 (server busy,
// retryable) and creates nothing.
func TestClusterGroupsNamespaceNeedsMetaLeader(t *testing.T) {
	nodes := startGroupCluster(t, nil)
	for _, id := range []uint64{2, 3} {
		if err := nodes[id].Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		delete(nodes, id)
	}
	waitForCond(t, "node 1 to know no meta leader", func() error {
		if l := nodes[1].node.Leader(); l != 0 {
			return fmt.Errorf("leader %d", l)
		}
		return nil
	})
	if st, body := nsCallAt(t, nodes[1].HTTPAddr(), http.MethodPut, "/$namespaces/lonely", DefaultKeyName, DefaultKey, ""); st != http.StatusServiceUnavailable {
		t.Fatalf("create without a meta leader: %d %s, want 503", st, body)
	}
	if _, err := nodes[1].routed.namespaces().Get("lonely"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("after the refusal node 1's registry has lonely: %v", err)
	}
	if n := replicaCount(t, nodes, 0, []byte(nsRecordPrefix)); n != 0 {
		t.Errorf("after the refusal the meta group holds %d namespace records", n)
	}
}

// nsConfig is a config file with a second namespace, with a rule of its
// own and a queue that forwards to another.
const nsConfig = `{
  "UserConfig": {
    "Namespaces": [
      { "Name": "sbemulatorns", "Queues": [{ "Name": "orders", "Properties": {} }] },
      { "Name": "cfgns",
        "AuthorizationRules": [{ "KeyName": "cfgKey", "PrimaryKey": "` + salesKey + `", "Rights": ["Manage", "Send", "Listen"] }],
        "Limits": { "MaxConnections": 100 },
        "Queues": [
          { "Name": "in", "Properties": { "ForwardTo": "out" } },
          { "Name": "other", "Properties": {} },
          { "Name": "out", "Properties": {} }
        ] }
    ],
    "Logging": { "Type": "Console" }
  }
}`

// TestClusterGroupsConfigNamespaces: the config file's namespaces beyond
// the first are created by the meta leader of a cluster with data
// groups, with their rules, limits and entities (forwarding placed
// together), and served by every node.
func TestClusterGroupsConfigNamespaces(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "Config.json")
	if err := os.WriteFile(cfg, []byte(nsConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := startTestClusterOf(t, 3, func(o *Options) { o.ConfigPath = cfg }, func(co *ClusterOptions) { co.Groups = 3 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for id, c := range nodes {
		waitForCond(t, fmt.Sprintf("node %d to serve cfgns' queues", id), func() error {
			if c.routed.namespaces() == nil {
				return errors.New("no registry yet")
			}
			ns, err := c.routed.namespaces().Get("cfgns")
			if err != nil {
				return err
			}
			if got := ns.OwnLimits().MaxConnections; got != 100 {
				return fmt.Errorf("cfgns' MaxConnections %d, want 100", got)
			}
			e, err := ns.Broker().GetEntity("in")
			if err != nil {
				return err
			}
			if e.ForwardTo == "" {
				return errors.New("in does not forward yet")
			}
			return nil
		})
	}
	ns, err := nodes[1].routed.namespaces().Get("cfgns")
	if err != nil {
		t.Fatal(err)
	}
	id := ns.Record().ID
	gi, err := nodes[2].routed.groupOf(ctx, qualify(id, "in"), false)
	if err != nil {
		t.Fatal(err)
	}
	if gout, err := nodes[2].routed.groupOf(ctx, qualify(id, "out"), false); err != nil || gout != gi {
		t.Errorf("cfgns' in is in group %d, its target out in %d (%v)", gi, gout, err)
	}
	s, err := clusterClientAs(t, nodes[3], "cfgKey", salesKey).NewSender("in", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("via config")}, nil); err != nil {
		t.Fatalf("send to cfgns' in through node 3: %v", err)
	}
	rc, err := clusterClientAs(t, nodes[2], "cfgKey", salesKey).NewReceiverForQueue("out",
		&azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	// The Go SDK returns no message and no error when its link was
	// detached and recovered (a group's leadership handed over to its
	// preferred leader just after the cluster formed): receive again.
	var msgs []*azservicebus.ReceivedMessage
	for len(msgs) == 0 {
		if msgs, err = rc.ReceiveMessages(ctx, 1, nil); err != nil {
			t.Fatalf("receive from cfgns' out through node 2: %v", err)
		}
	}
	if len(msgs) != 1 || string(msgs[0].Body) != "via config" {
		t.Fatalf("receive from cfgns' out through node 2: %v", msgs)
	}
}

// TestClusterGroupsNamespaceLimits: a namespace's own limits hold in a
// cluster with data groups: its MaxEntities over all the groups together
// (whichever groups its queues are placed in), its entity size cap in
// the group holding the queue; another namespace, on the defaults, goes
// past both.
func TestClusterGroupsNamespaceLimits(t *testing.T) {
	nodes := startGroupCluster(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, ns := range []struct{ name, body string }{
		{"tight", `{"Limits":{"MaxEntities":2,"MaxEntitySizeInMegabytes":1}}`},
		{"roomy", ""},
	} {
		if st, body := nsCallAt(t, nodes[1].HTTPAddr(), http.MethodPut, "/$namespaces/"+ns.name, DefaultKeyName, DefaultKey, ns.body); st != http.StatusCreated {
			t.Fatalf("create %s: %d %s", ns.name, st, body)
		}
	}
	for id, c := range nodes {
		waitForCond(t, fmt.Sprintf("node %d to know tight's limits", id), func() error {
			ns, err := c.routed.namespaces().Get("tight")
			if err != nil {
				return err
			}
			if got := ns.OwnLimits().MaxEntities; got != 2 {
				return fmt.Errorf("MaxEntities %d", got)
			}
			return nil
		})
	}
	tight := clusterAdminAs(t, nodes[2], DefaultKeyName+"@tight", DefaultKey)
	for _, q := range []string{"a", "b"} {
		if _, err := tight.CreateQueue(ctx, q, nil); err != nil {
			t.Fatalf("tight's queue %s: %v", q, err)
		}
	}
	_, err := tight.CreateQueue(ctx, "c", nil)
	wantQuota(t, "tight's third queue", err, "The maximum entity count of 2 has been reached or exceeded for namespace 'tight'")
	_, err = tight.CreateQueue(ctx, "p", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{EnablePartitioning: to.Ptr(true)}})
	wantQuota(t, "tight's third queue, partitioned (spread over the groups)", err, "The maximum entity count of 2 has been reached or exceeded for namespace 'tight'")
	roomy := clusterAdminAs(t, nodes[2], DefaultKeyName+"@roomy", DefaultKey)
	for _, q := range []string{"a", "b", "c"} {
		if _, err := roomy.CreateQueue(ctx, q, nil); err != nil {
			t.Errorf("roomy's queue %s: %v", q, err)
		}
	}

	s, err := clusterClientAs(t, nodes[3], DefaultKeyName+"@tight", DefaultKey).NewSender("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var sent int
	for ; sent < 2000; sent++ {
		if err = s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 1024)}, nil); err != nil {
			break
		}
	}
	wantQuota(t, "tight's queue at 1 MB", err, "The maximum entity size has been reached or exceeded for Queue: 'a'.")
	if sent > 1000 {
		t.Errorf("tight's queue took %d KiB; want a 1 MB cap", sent)
	}
	rs, err := clusterClientAs(t, nodes[3], DefaultKeyName+"@roomy", DefaultKey).NewSender("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(ctx)
	for i := range 6 {
		if err := rs.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 250<<10)}, nil); err != nil {
			t.Fatalf("roomy's queue refused its message %d of 250 KiB: %v", i+1, err)
		}
	}
}

// TestClusterGroupsNamespaceKnownAtOnce: a namespace created through one
// node is served at once through another whose registry has not taken
// it yet (its sync loop held): the request naming it makes that node
// catch up with the meta leader before refusing it, over HTTP and AMQP.
// A name no node knows is still refused (401).
func TestClusterGroupsNamespaceKnownAtOnce(t *testing.T) {
	nodes := startGroupCluster(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, id := range []uint64{2, 3} {
		nodes[id].routed.holdSync.Store(true)
	}
	for _, name := range []string{"fresh", "fresh2"} {
		if st, body := nsCallAt(t, nodes[1].HTTPAddr(), http.MethodPut, "/$namespaces/"+name, DefaultKeyName, DefaultKey, ""); st != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, st, body)
		}
	}
	if _, err := nodes[2].routed.namespaces().Get("fresh"); err == nil {
		t.Fatal("node 2's registry took the namespace with its sync loop held")
	}
	if _, err := clusterAdminAs(t, nodes[2], DefaultKeyName+"@fresh", DefaultKey).CreateQueue(ctx, "q", nil); err != nil {
		t.Fatalf("fresh's queue through node 2: %v", err)
	}
	if _, err := clusterAdminAs(t, nodes[1], DefaultKeyName+"@fresh2", DefaultKey).CreateQueue(ctx, "q", nil); err != nil {
		t.Fatalf("fresh2's queue through node 1: %v", err)
	}
	s, err := clusterClientAs(t, nodes[3], DefaultKeyName+"@fresh2", DefaultKey).NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		t.Fatalf("a send to fresh2's queue through node 3: %v", err)
	}
	if st, body := nsCallAt(t, nodes[2].HTTPAddr(), http.MethodGet, "/q", DefaultKeyName+"@nosuch", DefaultKey, ""); st != http.StatusUnauthorized {
		t.Fatalf("a key of a namespace no node knows: %d %s, want 401", st, body)
	}
}
