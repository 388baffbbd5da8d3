package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.uber.org/zap/zaptest"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/storage/raftstore"
	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// TestClusterGroupsReplicasMoveToAJoiningNode: three nodes hold four data
// groups, a queue in each; a fourth node joins as an operator adds one
// (--join and the cluster's --groups, a join token, `cluster add`).
// Replicas move onto it until each node holds three, it is given one
// group to lead, and its broker serves that group: a client on node 1
// receives every message sent before the join, whichever node now leads
// its queue's group, and sends and receives again.
func TestClusterGroupsReplicasMoveToAJoiningNode(t *testing.T) {
	nodes := startTestClusterOf(t, 3, nil, func(co *ClusterOptions) { co.Groups = 4 })
	waitForCond(t, "every data group served", func() error {
		if l := groupLeaders(nodes); len(l) != 4 {
			return fmt.Errorf("leaders %v", l)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b1 := routedBroker(t, nodes[1])
	queueOf := map[uint64]string{} // a queue of each group
	for i := 0; len(queueOf) < 4; i++ {
		q := fmt.Sprint("q", i)
		// The meta group may still be electing its first leader: server
		// busy, retried as the SDKs do. A create refused while it was
		// being committed may have been made all the same (its outcome
		// unknown, as Service Bus's own after a timeout): the retry then
		// finds the queue there, which is the create done.
		asked := false
		waitForCond(t, "create "+q, func() error {
			_, err := b1.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: q})
			if asked && errors.Is(err, core.ErrEntityExists) {
				return nil
			}
			asked = true
			return err
		})
		g, err := nodes[1].routed.groupOf(ctx, q, false)
		if err != nil || g == 0 {
			t.Fatalf("%s is placed in group %d: %v", q, g, err)
		}
		if _, ok := queueOf[g]; !ok {
			queueOf[g] = q
		}
		if i > 20 {
			t.Fatalf("no queue in every group: %v", queueOf)
		}
	}
	sb := sbClient(t, nodes[1])
	send := func(q string, bodies ...string) {
		t.Helper()
		s, err := sb.NewSender(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		for _, b := range bodies {
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(b)}, nil); err != nil {
				t.Fatalf("send to %s: %v", q, err)
			}
		}
	}
	for _, q := range queueOf {
		send(q, q+"-before")
	}

	// Node 4 joins.
	peers := map[uint64]string{}
	for id, c := range nodes {
		peers[id] = c.Node().PeerAddr()
	}
	peers[4] = freeAddr(t)
	creds, err := peertls.Load(PeerTLSDir(filepath.Join(nodes[1].opts.DataDir, "cluster")))
	if err != nil {
		t.Fatal(err)
	}
	adm := raftstore.NewClient(creds, AdminToken(DefaultKeyName, DefaultKey))
	t.Cleanup(adm.CloseIdleConnections)
	tok, err := adm.JoinToken(ctx, peers[1], 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{DataDir: filepath.Join(t.TempDir(), "4"), AMQPAddr: "127.0.0.1:0", AMQPSAddr: "-", HTTPAddr: "127.0.0.1:0",
		HTTPSAddr: "-", Logger: zaptest.NewLogger(t).Named("n4")}
	n4, err := StartCluster(o, ClusterOptions{NodeID: 4, Peers: maps.Clone(peers), Join: true, Groups: 4, JoinToken: tok,
		TickInterval: 50 * time.Millisecond, ElectionTicks: 30})
	if err != nil {
		t.Fatalf("StartCluster 4: %v", err)
	}
	nodes[4] = n4 // the cleanup of startTestClusterOf shuts it down
	if err := adm.ChangeMembers(ctx, peers[1], raftstore.MemberChange{Op: "add", ID: 4, Addr: peers[4]}); err != nil {
		t.Fatalf("adding node 4: %v", err)
	}
	waitForCond(t, "each node to hold three data groups and to serve one", func() error {
		l := groupLeaders(nodes)
		led := map[uint64]int{}
		for _, id := range l {
			led[id]++
		}
		for id, c := range nodes {
			if held := len(c.Node().Groups()) - 1; held != 3 || led[id] != 1 {
				return fmt.Errorf("node %d holds %d data groups and serves %d; leaders %v", id, held, led[id], l)
			}
		}
		return nil
	})
	for g, q := range queueOf {
		r, err := sb.NewReceiverForQueue(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(msgs) != 1 || string(msgs[0].Body) != q+"-before" {
			t.Fatalf("group %d, %s: received %v, %v; want %s-before", g, q, msgs, err, q)
		}
		if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
			t.Fatalf("complete on %s: %v", q, err)
		}
		send(q, q+"-after")
		if msgs, err = r.ReceiveMessages(ctx, 1, nil); err != nil || len(msgs) != 1 || string(msgs[0].Body) != q+"-after" {
			t.Fatalf("group %d, %s after the moves: received %v, %v", g, q, msgs, err)
		}
		if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
			t.Fatalf("complete on %s: %v", q, err)
		}
		r.Close(ctx)
	}
}
