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
)

// TestClusterGroupsLeaderOfAGroupNotHeld: in four nodes with four data
// groups each node holds three; the messages a node sends to, receives
// from and settles in the group it does not hold go to that group's
// leader, which it learns from the other members' status once in a while,
// not once per call (a status call on every member for every message made
// issue 29's five-node cluster spend half its CPU in TLS handshakes).
func TestClusterGroupsLeaderOfAGroupNotHeld(t *testing.T) {
	nodes := startTestClusterOf(t, 4, nil, func(co *ClusterOptions) { co.Groups = 4 })
	waitForCond(t, "each node to serve its data group", func() error {
		l := groupLeaders(nodes)
		for g := uint64(1); g <= 4; g++ {
			if l[g] != g {
				return fmt.Errorf("leaders %v", l)
			}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	whenNotBusy(t, func() error {
		_, err := clusterAdmin(t, nodes[1]).CreateQueue(ctx, "pq", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{EnablePartitioning: to.Ptr(true)}})
		return err
	})
	// Node 1 holds every group but one.
	r := nodes[1].routed
	var missing uint64
	for g := uint64(1); g <= 4; g++ {
		if r.meta.GroupNode(g) == nil {
			missing = g
		}
	}
	if missing == 0 {
		t.Fatal("node 1 holds all four groups")
	}
	var sp *core.Spread
	waitForCond(t, "node 1 to read pq's spread", func() error {
		var err error
		if sp, err = r.Spread(ctx, "pq"); err == nil && sp == nil {
			err = errors.New("pq is not spread")
		}
		return err
	})
	// Keys of the missing group only: every message goes through it.
	var keys []string
	for k := 0; len(keys) < 8; k++ {
		if key := fmt.Sprint("k", k); sp.Groups[core.PartitionOfKey(key, len(sp.Groups))] == missing {
			keys = append(keys, key)
		}
	}

	cl := sbClient(t, nodes[1])
	snd, err := cl.NewSender("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cl.NewReceiverForQueue("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	before := r.peerStatus.Load()
	for i := range n {
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint(i)), PartitionKey: &keys[i%len(keys)]}, nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for got := 0; got < n; {
		msgs, err := rc.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			t.Fatalf("receive after %d: %v", got, err)
		}
		for _, m := range msgs {
			if g := sp.Groups[core.PartitionOfSequence(*m.SequenceNumber)]; g != missing {
				t.Fatalf("message %s from group %d, not %d", m.Body, g, missing)
			}
			if err := rc.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete: %v", err)
			}
		}
		got += len(msgs)
	}
	// Every message was sent to, received from and completed in a group
	// another node leads: the calls node 1 made on it count them.
	rpc := r.calls.Snapshot()
	if sends := rpc["send"] + rpc["send-async"]; sends < n || rpc["receive"] == 0 || rpc["settle"]+rpc["complete-many"] == 0 {
		t.Errorf("node 1's calls on other nodes %v: want %d sends or more, receives and completions", rpc, n)
	}
	calls := r.peerStatus.Load() - before
	t.Logf("node 1 made %d status calls on other members for %d messages sent, received and completed in group %d, which it does not hold", calls, n, missing)
	// Three members are asked at each refresh (every 500 ms while calls
	// go on: about 6 a second); asked per call, each message (sent,
	// received, completed) cost three for each of those, 6n or more.
	if calls > n {
		t.Errorf("node 1 made %d status calls on other members for %d messages: it asks for the group's leader per call", calls, n)
	}
}
