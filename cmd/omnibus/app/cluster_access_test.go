package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// TestClusterEntityRulesFromAnyNode: a queue's own SAS rule (an
// entity-level connection string, as the portal hands out) works through
// a node that does not lead the queue's data group, over AMQP ($cbs) and
// REST; it reaches only its queue.
func TestClusterEntityRulesFromAnyNode(t *testing.T) {
	nodes := startTestClusterOf(t, 3, nil, func(co *ClusterOptions) { co.Groups = 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// Led by its preferred node (node 1) first: until then the balancer
	// may hand the group over under the test's requests, which meet
	// server busy.
	var leader uint64
	waitForCond(t, "the data group led by its preferred node", func() error {
		if leader = groupLeaders(nodes)[1]; leader != 1 {
			return fmt.Errorf("led by node %d", leader)
		}
		return nil
	})
	waitMetaServing(t, nodes)
	via := nodes[leader%3+1] // not the group's leader
	key := core.NewAccessKey()
	b := routedBroker(t, via)
	// A create meets server busy while the data group's leadership moves
	// to its preferred node (a new cluster's first second): asked again.
	create := func(e core.Entity) {
		t.Helper()
		for asked := false; ; asked = true {
			_, err := b.CreateEntity(ctx, e)
			// A refused create may have been committed all the same (its
			// outcome unknown): asked again, it finds the entity there.
			if err == nil || asked && errors.Is(err, core.ErrEntityExists) {
				return
			}
			if core.CodeOf(err) != core.CodeServerBusy || ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	create(core.Entity{Kind: core.KindQueue, Name: "guarded",
		AuthorizationRules: []core.AuthorizationRule{{KeyName: "q-sender", PrimaryKey: key, Rights: sas.Send}}})
	create(core.Entity{Kind: core.KindQueue, Name: "other"})

	// AMQP: the Go SDK with the queue's connection string.
	port := via.AMQPAddr().String()[strings.LastIndex(via.AMQPAddr().String(), ":")+1:]
	cs := fmt.Sprintf("Endpoint=sb://localhost:%s;SharedAccessKeyName=q-sender;SharedAccessKey=%s;EntityPath=guarded;UseDevelopmentEmulator=true;", port, key)
	cl, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	s, err := cl.NewSender("guarded", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("by entity rule")}, nil); err != nil {
		t.Fatalf("send with the queue's own rule through node %d (group leader %d): %v", leader%3+1, leader, err)
	}
	if c, err := b.Counts("guarded"); err != nil || c.Active != 1 {
		t.Errorf("guarded holds %+v, %v; want 1 active", c, err)
	}

	// REST: the rule's token sends to its queue, and not to the queue
	// beside it.
	post := func(q string) int {
		url := "http://" + via.HTTPAddr().String() + "/" + q + "/messages"
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("rest"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", sas.Sign("https://localhost/"+q, "q-sender", key, time.Now().Add(time.Hour)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("guarded"); code != http.StatusCreated {
		t.Errorf("REST send with the queue's rule: %d, want 201", code)
	}
	if code := post("other"); code != http.StatusUnauthorized {
		t.Errorf("REST send to another queue with guarded's rule: %d, want 401", code)
	}
}
