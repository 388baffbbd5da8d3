package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core"
)

// spreadReceiveStats adds up the spread receive counts of every node's
// routed broker.
func spreadReceiveStats(nodes map[uint64]*Cluster) core.SpreadReceiveStats {
	var sum core.SpreadReceiveStats
	for _, c := range nodes {
		c.routed.mu.Lock()
		home := c.routed.home
		c.routed.mu.Unlock()
		st := home.SpreadReceiveStats()
		sum.Receives += st.Receives
		sum.GroupReceives += st.GroupReceives
		sum.Delivered += st.Delivered
		sum.Released += st.Released
	}
	return sum
}

// TestClusterGroupsSpreadReceiveWastesNothing: receivers waiting on a
// spread queue through every node, served by rounds of sends whose
// messages land in all three groups at once, get every message once and with delivery
// count 1 (order per key is TestClusterGroupsSpreadPartitionedQueue's:
// the SDK releases what reaches it after a ReceiveMessages call ended,
// which lets a later message of a key overtake), and no group hands out a message the
// receive then gives back: a receive waiting on every group asks each for
// a share of its credit and keeps whatever they all hand out, rather than
// asking each for all of it and releasing the losers' (whose cost grew
// with the number of groups: issue 29's 5-group collapse).
func TestClusterGroupsSpreadReceiveWastesNothing(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	createSpreadQueue(ctx, t, clusterAdmin(t, nodes[1]), nodes[1], "pq")

	const keys, rounds = 12, 20
	const total = keys * rounds
	var mu sync.Mutex
	got := map[string]int{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for id, c := range nodes {
		rc, err := sbClient(t, c).NewReceiverForQueue("pq", nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
				msgs, err := rc.ReceiveMessages(rctx, 10, nil)
				rcancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("receiver on node %d: %v", id, err)
					return
				}
				for _, m := range msgs {
					if strings.HasSuffix(string(m.Body), "--1") {
						t.Errorf("%s, of the refused batch, was stored", m.Body)
					}
					if m.DeliveryCount != 1 {
						t.Errorf("%s delivered with count %d", m.Body, m.DeliveryCount)
					}
					if err := rc.CompleteMessage(ctx, m, nil); err != nil {
						t.Errorf("complete %s: %v", m.Body, err)
						return
					}
					mu.Lock()
					got[string(m.Body)]++
					if len(got) == total {
						close(done)
					}
					mu.Unlock()
				}
			}
		}()
	}

	// Each round is a message of every key (the keys hash to partitions of
	// all three groups), sent together on one link: the node joins the
	// pipelined sends into one broker send, so every group gets its part
	// of it at once and serves the receivers waiting on it together. (Not
	// one batch: Service Bus refuses a batch of distinct partition keys on
	// a partitioned entity, and so does the cluster, storing nothing.)
	snd, err := sbClient(t, nodes[1]).NewSender("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := func(k, i int) *azservicebus.Message {
		return &azservicebus.Message{Body: []byte(fmt.Sprintf("k%d-%d", k, i)), PartitionKey: to.Ptr(fmt.Sprint("k", k))}
	}
	batch, err := snd.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		if err := batch.AddMessage(msg(k, -1), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := snd.SendMessageBatch(ctx, batch, nil); err == nil || !strings.Contains(err.Error(), "amqp:not-allowed") {
		t.Fatalf("a batch of %d partition keys: %v, want amqp:not-allowed", keys, err)
	}
	for i := range rounds {
		var sends sync.WaitGroup
		for k := range keys {
			sends.Go(func() {
				if err := snd.SendMessage(ctx, msg(k, i), nil); err != nil {
					t.Errorf("send round %d key %d: %v", i, k, err)
				}
			})
		}
		sends.Wait()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	wg.Wait()
	mu.Lock()
	if len(got) != total {
		t.Errorf("received %d distinct messages of %d", len(got), total)
	}
	for b, n := range got {
		if n != 1 {
			t.Errorf("%s received %d times", b, n)
		}
	}
	mu.Unlock()

	st := spreadReceiveStats(nodes)
	t.Logf("spread receives %d, group receives %d (%.2f per message delivered), delivered %d, released %d (%d by waits for fewer messages than groups)",
		st.Receives, st.GroupReceives, float64(st.GroupReceives)/float64(max(st.Delivered, 1)), st.Delivered, st.Released, st.ReleasedSmallCredit)
	if st.Delivered < total {
		t.Errorf("the spread receives delivered %d messages, fewer than the %d received", st.Delivered, total)
	}
	if shared := st.Released - st.ReleasedSmallCredit; shared != 0 {
		t.Errorf("the groups handed out %d messages that receives asking each for a share released (%d delivered): "+
			"a receive must take from a group only what it delivers", shared, st.Delivered)
	}
	// A receive whose link has less credit left than there are groups (the
	// SDK tops a batch's credit up as messages arrive) has no share to ask
	// each for, so it asks every group for all of it, and two answering at
	// once leave one to release: seldom (1 of 346 delivered in one CI run).
	// The wait before shares released 1-6 messages a run here, in waits
	// with credit enough to share too, which the check above counts.
	if st.ReleasedSmallCredit*20 > st.Delivered {
		t.Errorf("receives with less credit than groups released %d of %d delivered, over 5 %%",
			st.ReleasedSmallCredit, st.Delivered)
	}
}
