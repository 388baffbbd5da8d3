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

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/storage"
)

// startGroupCluster starts three nodes with three data groups, on clock
// clk (nil: real time), and waits until each node serves one group and
// knows the meta group's leader.
func startGroupCluster(t *testing.T, clk clock.Clock) map[uint64]*Cluster {
	t.Helper()
	nodes := startTestClusterOf(t, 3, func(o *Options) {
		if clk != nil {
			o.Clock = clk
		}
	}, func(co *ClusterOptions) { co.Groups = 3 })
	waitGroupsServing(t, nodes)
	waitConfigApplied(t, nodes)
	return nodes
}

// waitConfigApplied waits until every node serves its config file's
// entities: until then a node answers a namespace it does not know, or a
// config entity not yet made, with server busy rather than its final
// answer (cluster_configready.go), which a test that holds a node's sync
// loop right after the start would otherwise see for good.
func waitConfigApplied(t *testing.T, nodes map[uint64]*Cluster) {
	t.Helper()
	for id, c := range nodes {
		select {
		case <-c.ConfigApplied():
		case <-time.After(30 * time.Second):
			t.Fatalf("node %d has not applied its config file after 30 s", id)
		}
	}
}

// waitGroupsServing waits until node g serves data group g (the
// preferred leaders of a new cluster of three with three groups), every
// node knows it leads g (a node that does not yet refuses what it would
// route there as the group changing leaders), and every node knows the
// meta group's leader, which serves placements: a node that knows none
// refuses what needs the meta leader (a placement, a spread) with server
// busy, which the SDKs retry but a test's direct calls do not.
func waitGroupsServing(t *testing.T, nodes map[uint64]*Cluster) {
	t.Helper()
	waitForCond(t, "each node to serve its data group, known to every node", func() error {
		l := groupLeaders(nodes)
		for g := uint64(1); g <= 3; g++ {
			if l[g] != g {
				return fmt.Errorf("leaders %v", l)
			}
			for id, c := range nodes {
				if c.routed == nil {
					continue
				}
				if got := c.routed.leaderOf(g); got != g {
					return fmt.Errorf("node %d takes %d for group %d's leader", id, got, g)
				}
			}
		}
		return nil
	})
	waitMetaServing(t, nodes)
}

// waitMetaServing waits until every node knows the meta leader and that
// leader serves placements, so a create through any node is placed at
// once rather than refused as server busy (which the tests' direct
// broker calls do not retry).
func waitMetaServing(t *testing.T, nodes map[uint64]*Cluster) {
	t.Helper()
	waitForCond(t, "the meta leader to serve placements", func() error {
		for id, c := range nodes {
			if c.Node().Leader() == 0 {
				return fmt.Errorf("node %d knows no meta leader", id)
			}
		}
		lead := nodes[nodes[1].Node().Leader()]
		if lead == nil || lead.routed == nil {
			return errors.New("the meta leader is not one of the nodes")
		}
		lead.routed.mu.Lock()
		serving := lead.routed.metaSess != nil
		lead.routed.mu.Unlock()
		if !serving {
			return errors.New("the meta leader serves no placements yet")
		}
		return nil
	})
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

// TestClusterGroupsCreateRacingDelete plays, through the meta leader's
// arbitration, the ways a create can race a delete of its name. A forget
// that comes when the name exists in its group again keeps the place.
// A create placed in group g that reaches g only after the delete's
// forget removed the placement: when nothing else took the name, its confirm
// places it in g again (else the queue would exist where no placement
// leads: unreachable); when a create placed it in another group
// meanwhile, the late one lost: what it made in g is deleted again and it
// is told the queue exists.
func TestClusterGroupsCreateRacingDelete(t *testing.T) {
	nodes := startGroupCluster(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := nodes[2].routed
	adm := clusterAdmin(t, nodes[1])
	// A create that got its place, then stalled before reaching its group.
	stalled := func(name string) (core.Backend, uint64) {
		t.Helper()
		be, err := r.Place(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		g, err := r.groupOf(ctx, name, false)
		if err != nil || g == 0 {
			t.Fatalf("%s placed in %d: %v", name, g, err)
		}
		// The delete of an earlier queue of that name forgets the place.
		if _, err := r.callMeta(ctx, metaRequest{Op: metaForget, Name: name, Group: g}); err != nil {
			t.Fatal(err)
		}
		waitPlacement(t, nodes, name, false)
		return be, g
	}

	t.Run("ForgetKeepsAQueueThatExists", func(t *testing.T) {
		// A forget that comes after the name was created again in g
		// (the create landed before forget's check) keeps the place.
		if _, err := adm.CreateQueue(ctx, "kept", nil); err != nil {
			t.Fatal(err)
		}
		g, err := r.groupOf(ctx, "kept", false)
		if err != nil || g == 0 {
			t.Fatalf("kept placed in %d: %v", g, err)
		}
		if _, err := r.callMeta(ctx, metaRequest{Op: metaForget, Name: "kept", Group: g}); err != nil {
			t.Fatal(err)
		}
		waitPlacement(t, nodes, "kept", true)
		if q, err := adm.GetQueue(ctx, "kept", nil); err != nil || q == nil {
			t.Errorf("kept is not reachable after the forget: %v %v", q, err)
		}
	})

	t.Run("PlacedAgain", func(t *testing.T) {
		be, g := stalled("late")
		if _, err := be.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "late"}); err != nil {
			t.Fatalf("the stalled create: %v", err)
		}
		waitPlacement(t, nodes, "late", true)
		if pg, err := r.groupOf(ctx, "late", false); err != nil || pg != g {
			t.Errorf("late is placed in %d (%v), created in %d", pg, err, g)
		}
		if q, err := adm.GetQueue(ctx, "late", nil); err != nil || q == nil {
			t.Errorf("the queue created late is not reachable: %v %v", q, err)
		}
	})

	t.Run("LostToAnotherGroup", func(t *testing.T) {
		be, g := stalled("taken")
		other := g%3 + 1
		winner, err := r.PlaceIn(ctx, "taken", other)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := winner.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "taken"}); err != nil {
			t.Fatalf("the create placed in group %d: %v", other, err)
		}
		_, err = be.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "taken"})
		if !errors.Is(err, core.ErrEntityExists) {
			t.Errorf("the stalled create in group %d after the name went to %d: %v, want exists", g, other, err)
		}
		gbe, err := r.backend(g)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gbe.GetEntity("taken"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("group %d keeps the queue of the create that lost: %v", g, err)
		}
		if pg, err := r.groupOf(ctx, "taken", false); err != nil || pg != other {
			t.Errorf("taken is placed in %d (%v), want %d", pg, err, other)
		}
	})
}
