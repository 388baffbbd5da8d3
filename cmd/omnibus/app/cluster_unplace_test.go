package app

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/storage"
)

// startGroupCluster starts three nodes with three data groups, on clock
// clk (nil: real time), and waits until each node serves one group.
func startGroupCluster(t *testing.T, clk clock.Clock) map[uint64]*Cluster {
	t.Helper()
	nodes := startTestClusterOf(t, 3, func(o *Options) {
		if clk != nil {
			o.Clock = clk
		}
	}, func(co *ClusterOptions) { co.Groups = 3 })
	waitForCond(t, "each node to serve its data group", func() error {
		l := groupLeaders(nodes)
		for g := uint64(1); g <= 3; g++ {
			if l[g] != g {
				return fmt.Errorf("leaders %v", l)
			}
		}
		return nil
	})
	return nodes
}

// waitPlacement waits until every node's copy of the meta group says
// name is placed in a group (want true) or nowhere (want false).
func waitPlacement(t *testing.T, nodes map[uint64]*Cluster, name string, want bool) {
	t.Helper()
	waitForCond(t, fmt.Sprintf("%s's placement on every node to be there: %v", name, want), func() error {
		for id, c := range nodes {
			_, err := c.Node().ReadReplica(placementKey(name))
			switch {
			case err == nil && !want:
				return fmt.Errorf("node %d still holds the placement", id)
			case errors.Is(err, storage.ErrNotFound) && want:
				return fmt.Errorf("node %d holds no placement", id)
			case err != nil && !errors.Is(err, storage.ErrNotFound):
				return err
			}
		}
		return nil
	})
}

// TestClusterGroupsPlacementFollowsDeletion: a queue deleted (through
// the Go admin client, or by AutoDeleteOnIdle) loses its placement in
// the meta group on every node, so a queue created again under its name
// is placed afresh: one forwarding to a queue of another group goes to
// that group, where before it was refused as forwarding across groups.
func TestClusterGroupsPlacementFollowsDeletion(t *testing.T) {
	clk := clock.NewOffset(clock.Real{}, 0)
	nodes := startGroupCluster(t, clk)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := nodes[3].routed
	groupOf := func(name string) uint64 {
		t.Helper()
		g, err := r.groupOf(ctx, name, false)
		if err != nil {
			t.Fatalf("the placement of %s: %v", name, err)
		}
		return g
	}
	adm := clusterAdmin(t, nodes[1])

	t.Run("DeletedThenForwarding", func(t *testing.T) {
		if _, err := adm.CreateQueue(ctx, "again", nil); err != nil {
			t.Fatal(err)
		}
		first := groupOf("again")
		var target string
		for i := 0; target == ""; i++ {
			if i == 6 {
				t.Fatalf("no queue outside group %d after %d tries", first, i)
			}
			q := fmt.Sprint("target", i)
			if _, err := adm.CreateQueue(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
			if groupOf(q) != first {
				target = q
			}
		}
		if _, err := adm.DeleteQueue(ctx, "again", nil); err != nil {
			t.Fatal(err)
		}
		waitPlacement(t, nodes, "again", false)
		if _, err := adm.CreateQueue(ctx, "again", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{ForwardTo: &target}}); err != nil {
			t.Fatalf("create again forwarding to %s (group %d; it was in %d): %v", target, groupOf(target), first, err)
		}
		if g, tg := groupOf("again"), groupOf(target); g != tg {
			t.Errorf("again is in group %d, its target %s in %d", g, target, tg)
		}
		sb, err := azservicebus.NewClientFromConnectionString(nodes[2].ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close(context.Background())
		s, err := sb.NewSender("again", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("forwarded")}, nil); err != nil {
			t.Fatal(err)
		}
		rc, err := sb.NewReceiverForQueue(target, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close(ctx)
		if msgs, err := rc.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 || string(msgs[0].Body) != "forwarded" {
			t.Fatalf("receive from %s: %v %v", target, msgs, err)
		}
	})

	t.Run("AutoDeleteOnIdle", func(t *testing.T) {
		if _, err := adm.CreateQueue(ctx, "idle", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
			AutoDeleteOnIdle: to.Ptr("PT5M")}}); err != nil {
			t.Fatal(err)
		}
		waitPlacement(t, nodes, "idle", true)
		if err := clk.Advance(6 * time.Minute); err != nil {
			t.Fatal(err)
		}
		waitPlacement(t, nodes, "idle", false)
		if q, err := adm.GetQueue(ctx, "idle", nil); err != nil || q != nil {
			t.Errorf("the idle queue after its deletion: %v, %v", q, err)
		}
	})
}
