package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core"
)

// TestClusterGroupsRemoteSessionLockDetachesItsLink: a session receiver
// on a node that does not lead its session's group is detached with
// com.microsoft:session-lock-lost when the lock expires on the leader, as
// one on the leader is, before it asks for anything: the link holds no
// credit, so no receive or settlement could have found the lock gone.
func TestClusterGroupsRemoteSessionLockDetachesItsLink(t *testing.T) {
	nodes := startTestClusterOf(t, 3, nil, func(co *ClusterOptions) { co.Groups = 3 })
	waitGroupsServing(t, nodes)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b1 := routedBroker(t, nodes[1])
	if _, err := b1.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "sq", RequiresSession: true, LockDuration: core.MinLockDuration}); err != nil {
		t.Fatal(err)
	}
	if _, err := b1.Send(ctx, "sq", &core.Message{Body: []byte("x"), SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	g, err := nodes[1].routed.groupOf(ctx, "sq", false)
	if err != nil || g == 0 {
		t.Fatalf("sq is placed in group %d: %v", g, err)
	}
	leader := groupLeaders(nodes)[g]
	var via *Cluster
	for id, c := range nodes {
		if id != leader {
			via = c
			break
		}
	}
	conn, err := amqp.Dial(ctx, "amqp://"+via.AMQPAddr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(DefaultKeyName, DefaultKey)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.NewReceiver(ctx, "sq", &amqp.ReceiverOptions{
		Credit:         -1, // none issued: nothing is asked of the leader
		SettlementMode: amqp.ReceiverSettleModeSecond.Ptr(),
		Filters:        []amqp.LinkFilter{amqp.NewLinkFilter("com.microsoft:session-filter", 0x000001370000000C, "s1")},
	})
	if err != nil {
		t.Fatalf("accepting session s1 through node %d (group %d is led by node %d): %v", via.node.ID(), g, leader, err)
	}
	wait, cancelWait := context.WithTimeout(ctx, core.MinLockDuration+20*time.Second)
	defer cancelWait()
	start := time.Now()
	_, err = r.Receive(wait, nil)
	var le *amqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != "com.microsoft:session-lock-lost" {
		t.Fatalf("after %v the receiver got %v; want its link detached with com.microsoft:session-lock-lost once the lock expired", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("detached with session-lock-lost %v after the accept (lock duration %v)", time.Since(start).Round(time.Millisecond), core.MinLockDuration)
}
