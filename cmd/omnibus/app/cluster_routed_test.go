package app

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core"
)

// routedBroker is node c's routed broker (its fronts' broker).
func routedBroker(t *testing.T, c *Cluster) *core.Broker {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.serving == nil || !c.serving.always {
		t.Fatal("the node runs no routed App")
	}
	return c.serving.app.Broker
}

// waitFor polls cond for up to a minute.
func waitForCond(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s: %v", what, err)
}

// groupLeaders maps each data group to the node that serves it.
func groupLeaders(nodes map[uint64]*Cluster) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for id, c := range nodes {
		if c.routed == nil {
			continue
		}
		c.routed.mu.Lock()
		for g := range c.routed.local {
			out[g] = id
		}
		c.routed.mu.Unlock()
	}
	return out
}

// TestClusterGroupsServeEveryEntityFromEveryNode: three nodes, three data
// groups, each led by a different node. Queues are placed over the
// groups; a client connected to any node sends to and receives from any
// queue, whichever node leads its group (links served locally or over
// the nodes' own connection). A stopped node's groups move; its queues
// keep their messages and serve again through the other nodes.
func TestClusterGroupsServeEveryEntityFromEveryNode(t *testing.T) {
	nodes := startTestClusterOf(t, 3, nil, func(co *ClusterOptions) { co.Groups = 3 })
	// Node g serves data group g (its preferred leader): until then the
	// balancer may hand a group over under the test's writes.
	waitGroupsServing(t, nodes)
	// The config file's queue, placed by the meta leader.
	waitForCond(t, "the config file's queue", func() error {
		_, err := routedBroker(t, nodes[2]).GetEntity("orders")
		return err
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b1 := routedBroker(t, nodes[1])
	for i := range 6 {
		if _, err := b1.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: fmt.Sprint("q", i)}); err != nil {
			t.Fatalf("create q%d: %v", i, err)
		}
	}
	placed := map[uint64]int{}
	for i := range 6 {
		g, err := nodes[3].routed.groupOf(ctx, fmt.Sprint("q", i), false)
		if err != nil || g == 0 {
			t.Fatalf("q%d is placed in group %d: %v", i, g, err)
		}
		placed[g]++
	}
	if len(placed) != 3 {
		t.Errorf("six queues over three groups: %v", placed)
	}
	client := func(c *Cluster) *azservicebus.Client {
		cl, err := azservicebus.NewClientFromConnectionString(c.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close(context.Background()) })
		return cl
	}
	sendVia, recvVia := client(nodes[1]), client(nodes[2])
	for i := range 6 {
		q := fmt.Sprint("q", i)
		s, err := sendVia.NewSender(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint(q, "-", j))}, nil); err != nil {
				t.Fatalf("send to %s: %v", q, err)
			}
		}
		r, err := recvVia.NewReceiverForQueue(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := r.ReceiveMessages(ctx, 2, nil)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("receive from %s: %v %v", q, msgs, err)
		}
		for _, m := range msgs {
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete on %s: %v", q, err)
			}
		}
		if want := q + "-0"; string(msgs[0].Body) != want {
			t.Errorf("%s: first %q, want %q", q, msgs[0].Body, want)
		}
	}
	// Every queue is listed, whichever group holds it.
	list, err := routedBroker(t, nodes[3]).ListEntities(core.KindQueue, "")
	if err != nil || len(list) != 7 {
		t.Fatalf("list: %d queues, %v", len(list), err)
	}
	// Stop the node leading q0's group: it moves, and q0 keeps what it had.
	g0, _ := nodes[1].routed.groupOf(ctx, "q0", false)
	victim := groupLeaders(nodes)[g0]
	if err := nodes[victim].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	delete(nodes, victim)
	var other *Cluster
	for _, c := range nodes {
		other = c
	}
	waitForCond(t, "q0's group to be served again", func() error {
		_, err := routedBroker(t, other).Counts("q0")
		return err
	})
	c0, err := routedBroker(t, other).Counts("q0")
	if err != nil {
		t.Fatal(err)
	}
	// Two of three were completed; the one received but not completed
	// (if any) is back after the failover.
	if c0.Active < 1 {
		t.Fatalf("q0 after failover: %+v", c0)
	}
	r, err := client(other).NewReceiverForQueue("q0", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.ReceiveMessages(ctx, int(c0.Active), nil)
	if err != nil || len(got) == 0 {
		t.Fatalf("receive q0 after failover: %v %v", got, err)
	}
}

// TestClusterGroupsPlacementNeedsMetaLeader: with the meta group
// leaderless, creating a queue is refused with server-busy (retryable)
// and nothing is created.
func TestClusterGroupsPlacementNeedsMetaLeader(t *testing.T) {
	nodes := startTestClusterOf(t, 3, nil, func(co *ClusterOptions) { co.Groups = 3 })
	waitForCond(t, "a routed App on node 1", func() error {
		nodes[1].mu.Lock()
		defer nodes[1].mu.Unlock()
		if nodes[1].serving == nil {
			return errors.New("not yet")
		}
		return nil
	})
	b := routedBroker(t, nodes[1])
	// Stop the two others: node 1 alone has no meta leader.
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
	_, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "lonely"})
	if !errors.Is(err, core.ErrServerBusy) {
		t.Fatalf("create without a meta leader: %v, want server busy", err)
	}
}
