package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core"
)

// startSpreadCluster starts three nodes with three data groups, node g
// leading group g.
func startSpreadCluster(t *testing.T) map[uint64]*Cluster {
	t.Helper()
	nodes := startTestClusterOf(t, 3, nil, func(co *ClusterOptions) { co.Groups = 3 })
	waitGroupsServing(t, nodes)
	return nodes
}

// whenNotBusy runs op until it does not fail with server busy (the meta
// group electing a leader, which refuses a placement for now); any other
// error fails the test.
func whenNotBusy(t *testing.T, op func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if msg := err.Error(); time.Now().After(deadline) || !strings.Contains(msg, "503") && !strings.Contains(msg, "server-busy") {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sbClient is a Go SDK client on node c.
func sbClient(t *testing.T, c *Cluster) *azservicebus.Client {
	t.Helper()
	cl, err := azservicebus.NewClientFromConnectionString(c.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(context.Background()) })
	return cl
}

// createSpreadQueue creates partitioned queue name through adm (again
// while the meta group elects) and returns its spread as node c reads it.
func createSpreadQueue(ctx context.Context, t *testing.T, adm *admin.Client, c *Cluster, name string) *core.Spread {
	t.Helper()
	whenNotBusy(t, func() error {
		_, err := adm.CreateQueue(ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{EnablePartitioning: to.Ptr(true)}})
		return err
	})
	return mustSpread(ctx, t, c, name)
}

// mustSpread returns name's spread, which must cover all three groups.
func mustSpread(ctx context.Context, t *testing.T, c *Cluster, name string) *core.Spread {
	t.Helper()
	sp, err := c.routed.Spread(ctx, name)
	if err != nil || sp == nil {
		t.Fatalf("%s is not spread: %v %v", name, sp, err)
	}
	if got := sp.Distinct(); len(sp.Groups) != core.DefaultPartitionCount || len(got) != 3 {
		t.Fatalf("%s: %d partitions in groups %v, want %d over 3", name, len(sp.Groups), got, core.DefaultPartitionCount)
	}
	return sp
}

// groupCounts is what each data group's broker holds of path.
func groupCounts(t *testing.T, nodes map[uint64]*Cluster, path string) map[uint64]core.Counts {
	t.Helper()
	out := map[uint64]core.Counts{}
	for _, c := range nodes {
		c.routed.mu.Lock()
		for g, lg := range c.routed.local {
			cn, err := lg.b.Counts(path)
			if err != nil {
				t.Errorf("group %d's counts of %s: %v", g, path, err)
			}
			out[g] = cn
		}
		c.routed.mu.Unlock()
	}
	return out
}

// keyed is a message of partition key k<key>, numbered i. Keys k0 to k11
// hash to partitions of each of the three groups (k0 to k7 to only two of
// them when partition 0 is in group 3).
func keyed(key, i int) *azservicebus.Message {
	return &azservicebus.Message{Body: []byte(fmt.Sprintf("k%d-%d", key, i)), PartitionKey: to.Ptr(fmt.Sprint("k", key))}
}

// checkOrderPerKey fails unless bodies hold, per key, 0, 1, 2, ... each
// once.
func checkOrderPerKey(t *testing.T, bodies []string, keys, each int) {
	t.Helper()
	next := map[string]int{}
	for _, b := range bodies {
		var k, i int
		if _, err := fmt.Sscanf(b, "k%d-%d", &k, &i); err != nil {
			t.Fatalf("body %q", b)
		}
		key := fmt.Sprint("k", k)
		if i != next[key] {
			t.Fatalf("key %s: got %d, want %d (bodies %v)", key, i, next[key], bodies)
		}
		next[key]++
	}
	for k := range keys {
		if n := next[fmt.Sprint("k", k)]; n != each {
			t.Fatalf("key k%d: %d messages, want %d", k, n, each)
		}
	}
}

// checkStoredOrderPerKey fails unless seqs (body → sequence number)
// holds, per key, 0, 1, 2, ... each, numbered in that order: every
// message once, stored in the order sent. It is what a peek-lock
// receiver can check; the order of its deliveries is not the queue's:
// the Go SDK releases the messages that arrive between two calls of
// ReceiveMessages (its releaser, newReleaserFunc) and keeps those already
// buffered, so a released message comes back after later ones of its
// key (a spread receive's messages arrive group by group, some after
// the SDK's 20 ms past the first). Service Bus orders only sessions.
func checkStoredOrderPerKey(t *testing.T, seqs map[string]int64, keys, each int) {
	t.Helper()
	for k := range keys {
		prev := int64(-1)
		for i := range each {
			b := fmt.Sprintf("k%d-%d", k, i)
			s, ok := seqs[b]
			if !ok {
				t.Fatalf("%s never received (received %d messages)", b, len(seqs))
			}
			if s <= prev {
				t.Fatalf("%s numbered %d, not after its key's previous message (%d)", b, s, prev)
			}
			prev = s
		}
	}
	if len(seqs) != keys*each {
		t.Fatalf("received %d messages, want %d", len(seqs), keys*each)
	}
}

// TestClusterGroupsSpreadPartitionedQueue: with three data groups, a
// partitioned queue's partitions are dealt round the groups, so three
// leaders serve it. Messages of twelve keys sent through one node are
// received through another, each once, numbered in order per key, from
// all three groups; peek pages through them in sequence-number order;
// settling, deferring and cancelling schedules reach each message's
// group; counts add up; listings show the queue once; delete removes it
// from every group.
func TestClusterGroupsSpreadPartitionedQueue(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm := clusterAdmin(t, nodes[1])
	sp := createSpreadQueue(ctx, t, adm, nodes[3], "pq")
	for g, cn := range groupCounts(t, nodes, "pq") {
		if cn.Total != 0 {
			t.Fatalf("group %d: %+v", g, cn)
		}
	}

	const keys, each = 12, 3
	snd, err := sbClient(t, nodes[1]).NewSender("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range each {
		for k := range keys {
			if err := snd.SendMessage(ctx, keyed(k, i), nil); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
	}
	holding := 0
	for g, cn := range groupCounts(t, nodes, "pq") {
		t.Logf("group %d holds %d of pq's messages", g, cn.Total)
		if cn.Total > 0 {
			holding++
		}
	}
	if holding != 3 {
		t.Fatalf("the messages of %d keys are in %d group(s)", keys, holding)
	}
	if rp, err := adm.GetQueueRuntimeProperties(ctx, "pq", nil); err != nil || rp.ActiveMessageCount != keys*each {
		t.Fatalf("runtime properties: %+v %v", rp, err)
	}

	// Peek through node 3: every message once, in sequence-number order.
	rc3, err := sbClient(t, nodes[3]).NewReceiverForQueue("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	var peeked []int64
	for from := int64(0); ; {
		got, err := rc3.PeekMessages(ctx, 7, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		for _, m := range got {
			peeked = append(peeked, *m.SequenceNumber)
		}
		from = *got[len(got)-1].SequenceNumber + 1
	}
	if len(peeked) != keys*each || !slices.IsSorted(peeked) {
		t.Fatalf("peeked %d messages, sorted %v: %v", len(peeked), slices.IsSorted(peeked), peeked)
	}

	// Receive through node 2, deferring the first message of each group.
	rc2, err := sbClient(t, nodes[2]).NewReceiverForQueue("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[string]int64{}
	deferred := map[uint64]int64{}
	for len(seqs) < keys*each {
		// A message lost (or locked away) is reported by
		// checkStoredOrderPerKey once nothing came for 5 s.
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		msgs, err := rc2.ReceiveMessages(rctx, 10, nil)
		rcancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if _, dup := seqs[string(m.Body)]; dup {
				t.Fatalf("%s received twice", m.Body)
			}
			seqs[string(m.Body)] = *m.SequenceNumber
			g := sp.Groups[core.PartitionOfSequence(*m.SequenceNumber)]
			if _, ok := deferred[g]; !ok {
				deferred[g] = *m.SequenceNumber
				if err := rc2.DeferMessage(ctx, m, nil); err != nil {
					t.Fatalf("defer in group %d: %v", g, err)
				}
				continue
			}
			if err := rc2.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete in group %d: %v", g, err)
			}
		}
	}
	checkStoredOrderPerKey(t, seqs, keys, each)
	if len(deferred) != holding {
		t.Fatalf("received from groups %v, %d hold messages", deferred, holding)
	}
	var defSeqs []int64
	for _, s := range deferred {
		defSeqs = append(defSeqs, s)
	}
	got, err := rc3.ReceiveDeferredMessages(ctx, defSeqs, nil)
	if err != nil || len(got) != len(defSeqs) {
		t.Fatalf("deferred %v: got %d, %v", defSeqs, len(got), err)
	}
	for _, m := range got {
		if err := rc3.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatalf("complete deferred %d: %v", *m.SequenceNumber, err)
		}
	}

	// Messages without a key: each send to one group, which puts it in a
	// partition of its own (settled there).
	for i := range 6 {
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprint("nokey-", i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < 6; {
		msgs, err := rc3.ReceiveMessages(ctx, 6, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := rc3.CompleteMessage(ctx, m, nil); err != nil {
				t.Fatalf("complete %s (partition %d): %v", m.Body, core.PartitionOfSequence(*m.SequenceNumber), err)
			}
			n++
		}
	}

	// Scheduled messages of every key, cancelled through another node.
	var sched []*azservicebus.Message
	for k := range keys {
		sched = append(sched, keyed(k, 99))
	}
	var ss []int64
	for _, m := range sched {
		s, err := snd.ScheduleMessages(ctx, []*azservicebus.Message{m}, time.Now().Add(time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s...)
	}
	if rp, err := adm.GetQueueRuntimeProperties(ctx, "pq", nil); err != nil || rp.ScheduledMessageCount != keys || rp.TotalMessageCount != keys {
		t.Fatalf("runtime properties with schedules: %+v %v", rp, err)
	}
	snd3, err := sbClient(t, nodes[3]).NewSender("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd3.CancelScheduledMessages(ctx, ss, nil); err != nil {
		t.Fatal(err)
	}
	if rp, err := adm.GetQueueRuntimeProperties(ctx, "pq", nil); err != nil || rp.TotalMessageCount != 0 {
		t.Fatalf("runtime properties at the end: %+v %v", rp, err)
	}

	// Listed once; deleted from every group.
	list, err := routedBroker(t, nodes[2]).ListEntities(core.KindQueue, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list {
		if e.Name == "pq" {
			n++
			if !e.EnablePartitioning || e.HeldPartitions != nil {
				t.Errorf("listed as %+v", e)
			}
		}
	}
	if n != 1 {
		t.Fatalf("pq listed %d times", n)
	}
	if _, err := adm.DeleteQueue(ctx, "pq", nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range nodes {
		c.routed.mu.Lock()
		for g, lg := range c.routed.local {
			if _, err := lg.b.GetEntity("pq"); core.CodeOf(err) != core.CodeNotFound {
				t.Errorf("group %d still has pq: %v", g, err)
			}
		}
		c.routed.mu.Unlock()
	}
	// Its spread went with it: the name is placed afresh, here whole.
	waitForCond(t, "pq's placement to be forgotten", func() error {
		if sp, err := nodes[1].routed.Spread(ctx, "pq"); err != nil || sp != nil {
			return fmt.Errorf("spread %v, %v", sp, err)
		}
		return nil
	})
	whenNotBusy(t, func() error { _, err := adm.CreateQueue(ctx, "pq", nil); return err })
}

// TestClusterGroupsSpreadSessionsAndTopic: sessions of a partitioned
// queue spread over three groups are each in their partition's group:
// "accept next session" through any node finds them all, their messages
// in order, their state kept. A partitioned topic's subscription is
// spread with the topic: every message reaches it, in order per key.
func TestClusterGroupsSpreadSessionsAndTopic(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm := clusterAdmin(t, nodes[1])
	whenNotBusy(t, func() error {
		_, err := adm.CreateQueue(ctx, "psq", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
			EnablePartitioning: to.Ptr(true), RequiresSession: to.Ptr(true)}})
		return err
	})
	sp := mustSpread(ctx, t, nodes[2], "psq")
	const sessions, each = 12, 3
	snd, err := sbClient(t, nodes[1]).NewSender("psq", nil)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[uint64]bool{}
	for i := range each {
		for s := range sessions {
			id := fmt.Sprint("s", s)
			m := &azservicebus.Message{Body: []byte(fmt.Sprint(i)), SessionID: &id}
			if err := snd.SendMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl2 := sbClient(t, nodes[2])
	seen := map[string]bool{}
	for len(seen) < sessions {
		sr, err := cl2.AcceptNextSessionForQueue(ctx, "psq", nil)
		if err != nil {
			t.Fatalf("accept next session (%d seen): %v", len(seen), err)
		}
		id := sr.SessionID()
		if seen[id] {
			t.Fatalf("session %s accepted twice", id)
		}
		seen[id] = true
		var got []string
		for len(got) < each {
			msgs, err := sr.ReceiveMessages(ctx, each, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				got = append(got, string(m.Body))
				groups[sp.Groups[core.PartitionOfSequence(*m.SequenceNumber)]] = true
				if err := sr.CompleteMessage(ctx, m, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !slices.Equal(got, []string{"0", "1", "2"}) {
			t.Fatalf("session %s: %v", id, got)
		}
		if err := sr.SetSessionState(ctx, []byte("done-"+id), nil); err != nil {
			t.Fatal(err)
		}
		sr.Close(ctx)
	}
	if len(groups) != 3 {
		t.Fatalf("%d sessions' messages came from groups %v", sessions, groups)
	}
	// A named session through a third node: its state is there.
	sr, err := sbClient(t, nodes[3]).AcceptSessionForQueue(ctx, "psq", "s4", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := sr.GetSessionState(ctx, nil); err != nil || string(st) != "done-s4" {
		t.Fatalf("state of s4: %q %v", st, err)
	}
	sr.Close(ctx)

	// A partitioned topic: its subscription spread with it.
	whenNotBusy(t, func() error {
		_, err := adm.CreateTopic(ctx, "pt", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{EnablePartitioning: to.Ptr(true)}})
		return err
	})
	whenNotBusy(t, func() error { _, err := adm.CreateSubscription(ctx, "pt", "all", nil); return err })
	mustSpread(ctx, t, nodes[1], "pt")
	const keys = 12
	tsnd, err := sbClient(t, nodes[3]).NewSender("pt", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range each {
		for k := range keys {
			if err := tsnd.SendMessage(ctx, keyed(k, i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	holding := 0
	for _, cn := range groupCounts(t, nodes, "pt/Subscriptions/all") {
		if cn.Total > 0 {
			holding++
		}
	}
	if holding != 3 {
		t.Fatalf("the subscription's messages are in %d group(s)", holding)
	}
	if rp, err := adm.GetSubscriptionRuntimeProperties(ctx, "pt", "all", nil); err != nil || rp.ActiveMessageCount != keys*each {
		t.Fatalf("subscription runtime properties: %+v %v", rp, err)
	}
	rc, err := sbClient(t, nodes[2]).NewReceiverForSubscription("pt", "all", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for len(bodies) < keys*each {
		msgs, err := rc.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			bodies = append(bodies, string(m.Body))
		}
	}
	checkOrderPerKey(t, bodies, keys, each)
	subs, err := routedBroker(t, nodes[3]).ListEntities(core.KindSubscription, "pt")
	if err != nil || len(subs) != 1 {
		t.Fatalf("subscriptions of pt: %v %v", subs, err)
	}
}

// retryableErr reports whether a client may retry after err: the SDK's
// codes for a lost connection or lock, a timeout, or the broker's
// retryable refusals (server busy, a link detached to be made again).
func retryableErr(err error) bool {
	var sbe *azservicebus.Error
	if errors.As(err, &sbe) {
		switch sbe.Code {
		case azservicebus.CodeConnectionLost, azservicebus.CodeLockLost, azservicebus.CodeTimeout:
			return true
		}
	}
	msg := err.Error()
	for _, s := range []string{"server-busy", "detach-forced", "amqp:link:detach-forced", "ServerBusy", "connection reset", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// TestClusterGroupsSpreadFailover: a partitioned queue spread over three
// groups keeps every message when one group's leader stops: sends and
// receives through the other nodes meet retryable errors only while the
// group elects a new leader, and every message sent is received.
func TestClusterGroupsSpreadFailover(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm := clusterAdmin(t, nodes[1])
	sp := createSpreadQueue(ctx, t, adm, nodes[1], "pq")
	const keys = 12
	snd, err := sbClient(t, nodes[1]).NewSender("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]bool{}
	var failures []error
	send := func(i int) {
		for k := range keys {
			m := keyed(k, i)
			for {
				err := snd.SendMessage(ctx, m, nil)
				if err == nil {
					sent[string(m.Body)] = true
					break
				}
				if !retryableErr(err) || ctx.Err() != nil {
					t.Fatalf("send %s: %v (not retryable)", m.Body, err)
				}
				failures = append(failures, err)
			}
		}
	}
	for i := range 3 {
		send(i)
	}
	// Take some under lock through node 3, stop node 2 (which leads data
	// group 2), then settle them and send more.
	cl3 := sbClient(t, nodes[3])
	rc, err := cl3.NewReceiverForQueue("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	var held []*azservicebus.ReceivedMessage
	for fromTwo := false; !fromTwo; {
		msgs, err := rc.ReceiveMessages(ctx, keys, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			fromTwo = fromTwo || sp.Groups[core.PartitionOfSequence(*m.SequenceNumber)] == 2
		}
		held = append(held, msgs...)
	}
	if err := nodes[2].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	delete(nodes, 2)
	got := map[string]bool{}
	for _, m := range held {
		if err := rc.CompleteMessage(ctx, m, nil); err != nil {
			if !retryableErr(err) {
				t.Fatalf("complete %s: %v (not retryable)", m.Body, err)
			}
			failures = append(failures, err)
			continue // delivered again
		}
		got[string(m.Body)] = true
	}
	for i := 3; i < 6; i++ {
		send(i)
	}
	// Receive until every message came, or nothing came for 10 s (a
	// message lost: reported below).
	for idle := time.Now(); len(got) < len(sent) && time.Since(idle) < 10*time.Second; {
		if rc == nil {
			if rc, err = cl3.NewReceiverForQueue("pq", nil); err != nil {
				t.Fatal(err)
			}
		}
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		msgs, err := rc.ReceiveMessages(rctx, 10, nil)
		rcancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			continue // nothing for now
		}
		if len(msgs) > 0 {
			idle = time.Now()
		}
		if err != nil {
			if !retryableErr(err) || ctx.Err() != nil {
				t.Fatalf("receive (%d of %d): %v (not retryable)", len(got), len(sent), err)
			}
			failures = append(failures, err)
			rc.Close(ctx)
			rc = nil
			continue
		}
		for _, m := range msgs {
			if err := rc.CompleteMessage(ctx, m, nil); err != nil {
				if !retryableErr(err) {
					t.Fatalf("complete %s: %v (not retryable)", m.Body, err)
				}
				failures = append(failures, err)
				continue // delivered again
			}
			got[string(m.Body)] = true
		}
	}
	for b := range sent {
		if !got[b] {
			t.Errorf("sent %s, never received", b)
		}
	}
	t.Logf("%d messages, %d retryable failures", len(sent), len(failures))
	if len(failures) > 0 {
		t.Logf("the first: %v", failures[0])
	}
	if rp, err := clusterAdmin(t, nodes[3]).GetQueueRuntimeProperties(ctx, "pq", nil); err != nil || rp.TotalMessageCount != 0 {
		t.Fatalf("runtime properties at the end: %+v %v", rp, err)
	}
	// The node now leading two of pq's groups reports it once (metrics).
	var two *Cluster
	for g, id := range groupLeaders(nodes) {
		if g != 2 && id == groupLeaders(nodes)[2] {
			two = nodes[id]
		}
	}
	if two == nil {
		t.Fatalf("no node leads group 2 and another: %v", groupLeaders(nodes))
	}
	reports := 0
	routedBroker(t, two).EachEntity(func(s *core.EntitySnapshot) {
		if s.Path == "pq" {
			reports++
		}
	})
	if reports != 1 {
		t.Fatalf("pq reported %d times by a node leading two of its groups", reports)
	}
}

// TestClusterGroupsSpreadBadInputAndTransactions: on a spread queue, what
// Service Bus refuses is refused as on one broker (a partition key over
// 128 characters, one that differs from the SessionId: amqp:not-allowed,
// nothing stored, the sender goes on). A transaction binds to the group
// of its first operation: its sends of one partition key commit together,
// and a send or settlement that belongs to another group is refused (400)
// without ending it.
func TestClusterGroupsSpreadBadInputAndTransactions(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm := clusterAdmin(t, nodes[1])
	sp := createSpreadQueue(ctx, t, adm, nodes[1], "pq")
	b := routedBroker(t, nodes[2])
	total := func() int64 {
		t.Helper()
		c, err := b.Counts("pq")
		if err != nil {
			t.Fatal(err)
		}
		return c.Total
	}

	snd, err := sbClient(t, nodes[3]).NewSender("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("p", 129)
	sid, other := "s1", "s2"
	for _, m := range []*azservicebus.Message{
		{Body: []byte("x"), PartitionKey: &long},
		{Body: []byte("x"), SessionID: &sid, PartitionKey: &other},
	} {
		if err := snd.SendMessage(ctx, m, nil); err == nil || !strings.Contains(err.Error(), "amqp:not-allowed") {
			t.Fatalf("SendMessage: %v, want amqp:not-allowed", err)
		}
		if n := total(); n != 0 {
			t.Fatalf("a refused message was stored: %d", n)
		}
		if err := snd.SendMessage(ctx, keyed(0, 0), nil); err != nil {
			t.Fatalf("the next send on the same sender: %v", err)
		}
		if _, err := b.DeleteMessages(ctx, "pq", core.DeleteOptions{Max: 10}); err != nil {
			t.Fatal(err)
		}
	}

	// Keys of two different groups.
	keyIn := map[uint64]string{}
	for k := 0; len(keyIn) < 2; k++ {
		key := fmt.Sprint("k", k)
		for p, g := range sp.Groups {
			if p == core.PartitionOfKey(key, len(sp.Groups)) && keyIn[g] == "" {
				keyIn[g] = key
			}
		}
	}
	var keys []string
	for _, k := range keyIn {
		keys = append(keys, k)
	}
	msg := func(key, body string) []*core.Message {
		return []*core.Message{{MessageID: body, PartitionKey: key, Body: []byte(body)}}
	}
	tx := b.BeginTxn()
	if err := tx.Send("pq", "", msg(keys[0], "a1")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Send("pq", "", msg(keys[0], "a2")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Send("pq", "", msg(keys[1], "b1")); core.CodeOf(err) != core.CodeBadRequest {
		t.Fatalf("a send of another group in the transaction: %v, want a bad request", err)
	}
	if n := total(); n != 0 {
		t.Fatalf("%d stored before the commit", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := total(); n != 2 {
		t.Fatalf("%d stored after the commit, want 2", n)
	}

	// Settlements: one of each group under lock, completed in a
	// transaction bound to the first's group.
	if _, err := b.Send(ctx, "pq", msg(keys[1], "b2")...); err != nil {
		t.Fatal(err)
	}
	locked := map[uint64]*core.Message{}
	for len(locked) < 2 {
		got, err := b.Receive(ctx, "pq", core.ReceiveOptions{Mode: core.PeekLock, Max: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got {
			if g := sp.Groups[core.PartitionOfSequence(m.SequenceNumber)]; locked[g] == nil {
				locked[g] = m
			}
		}
	}
	tx = b.BeginTxn()
	first := locked[sp.Groups[core.PartitionOfKey(keys[0], len(sp.Groups))]]
	second := locked[sp.Groups[core.PartitionOfKey(keys[1], len(sp.Groups))]]
	if err := tx.Settle("pq", first.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Settle("pq", second.LockToken, core.Outcome{Kind: core.Complete}); core.CodeOf(err) != core.CodeBadRequest {
		t.Fatalf("a settlement of another group in the transaction: %v, want a bad request", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := total(); n != 2 {
		t.Fatalf("%d left after completing one of three, want 2", n)
	}
}

// TestClusterGroupsSpreadInNamespace: a partitioned queue of a namespace
// other than the default one is spread over the groups too (its spread
// qualified by the namespace, apart from the default namespace's queue
// of the same name), serves its keys in order through any node, and its
// spread goes when the namespace is deleted.
func TestClusterGroupsSpreadInNamespace(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	waitForCond(t, "the namespace created", func() error { // retried while the meta group elects
		if st, body := nsCallAt(t, nodes[1].HTTPAddr(), http.MethodPut, "/$namespaces/sales", DefaultKeyName, DefaultKey, ""); st != http.StatusCreated && st != http.StatusConflict {
			return fmt.Errorf("create namespace: %d %s", st, body)
		}
		return nil
	})
	queue := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">` +
		`<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">` +
		`<EnablePartitioning>true</EnablePartitioning></QueueDescription></content></entry>`
	waitForCond(t, "sales on node 2", func() error {
		if st, body := nsCallAt(t, nodes[2].HTTPAddr(), http.MethodPut, "/pq", "sales", DefaultKey, queue); st != http.StatusCreated {
			return fmt.Errorf("create a partitioned queue in sales: %d %s", st, body)
		}
		return nil
	})
	sr, ok := nodes[3].routed.routerFor("sales").(core.SpreadRouter)
	if !ok {
		t.Fatal("a namespace's router does not spread")
	}
	sp, err := sr.Spread(ctx, "pq")
	if err != nil || sp == nil || len(sp.Distinct()) != 3 {
		t.Fatalf("sales' pq: spread %v, %v", sp, err)
	}
	if sp, err := nodes[3].routed.Spread(ctx, "pq"); err != nil || sp != nil {
		t.Fatalf("the default namespace's pq: spread %v, %v", sp, err)
	}
	salesClient := func(c *Cluster) *azservicebus.Client {
		cs := strings.Replace(c.ConnectionString(), "SharedAccessKeyName="+DefaultKeyName, "SharedAccessKeyName=sales", 1)
		cl, err := azservicebus.NewClientFromConnectionString(cs, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close(context.Background()) })
		return cl
	}
	const keys, each = 12, 2
	snd, err := salesClient(nodes[1]).NewSender("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range each {
		for k := range keys {
			if err := snd.SendMessage(ctx, keyed(k, i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	rc, err := salesClient(nodes[3]).NewReceiverForQueue("pq", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for len(bodies) < keys*each {
		msgs, err := rc.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			bodies = append(bodies, string(m.Body))
		}
	}
	checkOrderPerKey(t, bodies, keys, each)

	if st, body := nsCallAt(t, nodes[1].HTTPAddr(), http.MethodDelete, "/$namespaces/sales", DefaultKeyName, DefaultKey, ""); st != http.StatusOK {
		t.Fatalf("delete namespace: %d %s", st, body)
	}
	waitForCond(t, "sales' spreads to go", func() error {
		n := 0
		_ = nodes[2].routed.meta.ScanReplica([]byte(spreadPrefix+"\x00"), func(_, _ []byte) (bool, error) {
			n++
			return true, nil
		})
		if n > 0 {
			return fmt.Errorf("%d spread records of other namespaces", n)
		}
		return nil
	})
}

// TestClusterGroupsSpreadForwards: a spread queue and a spread topic's
// subscription forward to a queue, each of their groups on its own (in
// the same write where the target is in the group, by transfer where it
// is not): every message arrives. Forwarding to a spread queue is refused
// (400): a forwarded message would go to one group, which holds only some
// of its partitions.
func TestClusterGroupsSpreadForwards(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm := clusterAdmin(t, nodes[1])
	whenNotBusy(t, func() error { _, err := adm.CreateQueue(ctx, "sink", nil); return err })
	whenNotBusy(t, func() error {
		_, err := adm.CreateQueue(ctx, "pf", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
			EnablePartitioning: to.Ptr(true), ForwardTo: to.Ptr("sink")}})
		return err
	})
	mustSpread(ctx, t, nodes[2], "pf")
	whenNotBusy(t, func() error {
		_, err := adm.CreateTopic(ctx, "pt", &admin.CreateTopicOptions{Properties: &admin.TopicProperties{EnablePartitioning: to.Ptr(true)}})
		return err
	})
	whenNotBusy(t, func() error {
		_, err := adm.CreateSubscription(ctx, "pt", "fwd", &admin.CreateSubscriptionOptions{Properties: &admin.SubscriptionProperties{ForwardTo: to.Ptr("sink")}})
		return err
	})
	mustSpread(ctx, t, nodes[2], "pt")
	_, err := adm.CreateQueue(ctx, "in", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{ForwardTo: to.Ptr("pf")}})
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
		t.Fatalf("a queue forwarding to a spread queue: %v, want 400", err)
	}

	const keys = 12
	cl := sbClient(t, nodes[3])
	want := map[string]bool{}
	for _, to := range []string{"pf", "pt"} {
		snd, err := cl.NewSender(to, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k := range keys {
			m := keyed(k, 0)
			m.Body = []byte(to + "-" + string(m.Body))
			if err := snd.SendMessage(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
			want[string(m.Body)] = true
		}
	}
	rc, err := sbClient(t, nodes[1]).NewReceiverForQueue("sink", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	for len(want) > 0 {
		msgs, err := rc.ReceiveMessages(ctx, 10, nil)
		if err != nil {
			t.Fatalf("sink, %d not received: %v", len(want), err)
		}
		for _, m := range msgs {
			if !want[string(m.Body)] {
				t.Fatalf("sink: %q unexpected or twice", m.Body)
			}
			delete(want, string(m.Body))
		}
	}
}

// TestClusterGroupsSpreadReceiveFirstCall: a receive (and accepting the
// next session) on a spread entity works when it is the first call a
// node makes to the node leading the group with the messages: the first
// pass's done context cannot open that connection (the stand-in reports
// that as the context's end, so the pass finds nothing there), the wait
// does.
func TestClusterGroupsSpreadReceiveFirstCall(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm := clusterAdmin(t, nodes[1])
	for _, q := range []string{"pq", "psq"} {
		whenNotBusy(t, func() error {
			_, err := adm.CreateQueue(ctx, q, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{
				EnablePartitioning: to.Ptr(true), RequiresSession: to.Ptr(q == "psq")}})
			return err
		})
	}
	sp := mustSpread(ctx, t, nodes[1], "pq")
	// A key of group 2 (node 2's), sent through node 1.
	key := ""
	for k := 0; key == ""; k++ {
		if c := fmt.Sprint("k", k); sp.Groups[core.PartitionOfKey(c, len(sp.Groups))] == 2 {
			key = c
		}
	}
	cl1 := sbClient(t, nodes[1])
	for _, q := range []string{"pq", "psq"} {
		snd, err := cl1.NewSender(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := snd.SendMessage(ctx, &azservicebus.Message{Body: []byte(q), PartitionKey: &key, SessionID: map[bool]*string{true: &key}[q == "psq"]}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Node 3 drops its connection to node 2, if it made one.
	r3 := nodes[3].routed
	r3.mu.Lock()
	if c := r3.clients[2]; c != nil {
		c.Close()
		delete(r3.clients, 2)
	}
	r3.mu.Unlock()
	cl3 := sbClient(t, nodes[3])
	rc, err := cl3.NewReceiverForQueue("pq", nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	msgs, err := rc.ReceiveMessages(rctx, 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive through node 3: %v %v", msgs, err)
	}
	r3.mu.Lock()
	if c := r3.clients[2]; c != nil {
		c.Close()
		delete(r3.clients, 2)
	}
	r3.mu.Unlock()
	sr, err := cl3.AcceptNextSessionForQueue(rctx, "psq", nil)
	if err != nil || sr.SessionID() != key {
		t.Fatalf("accept next session through node 3: %v", err)
	}
}

// TestClusterGroupsSpreadOverHTTP: the REST API serves a spread queue as
// the AMQP front does: messages of keys in every group sent through one
// node are received in peek-lock through another and completed by the
// URL of their lock (the token's partition names the group).
func TestClusterGroupsSpreadOverHTTP(t *testing.T) {
	nodes := startSpreadCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	adm := clusterAdmin(t, nodes[1])
	sp := createSpreadQueue(ctx, t, adm, nodes[1], "pq")
	call := func(c *Cluster, method, url string, header map[string]string, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", rootToken())
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	const keys = 12
	base1 := "http://" + nodes[1].HTTPAddr().String() + "/pq/messages"
	for k := range keys {
		bp := fmt.Sprintf(`{"PartitionKey":"k%d"}`, k)
		if resp := call(nodes[1], http.MethodPost, base1, map[string]string{"BrokerProperties": bp}, "x"); resp.StatusCode != http.StatusCreated {
			t.Fatalf("send k%d: %s", k, resp.Status)
		}
	}
	groups := map[uint64]bool{}
	base2 := "http://" + nodes[2].HTTPAddr().String() + "/pq/messages/head?timeout=5"
	for range keys {
		resp := call(nodes[2], http.MethodPost, base2, nil, "")
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("peek-lock: %s", resp.Status)
		}
		var bp struct{ SequenceNumber int64 }
		if err := json.Unmarshal([]byte(resp.Header.Get("BrokerProperties")), &bp); err != nil {
			t.Fatal(err)
		}
		groups[sp.Groups[core.PartitionOfSequence(bp.SequenceNumber)]] = true
		loc, err := neturl.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		loc.Host = nodes[3].HTTPAddr().String() // completed through a third node
		if done := call(nodes[3], http.MethodDelete, loc.String(), nil, ""); done.StatusCode != http.StatusOK {
			t.Fatalf("complete %s: %s", loc, done.Status)
		}
	}
	if len(groups) != 3 {
		t.Fatalf("received from groups %v", groups)
	}
	if rp, err := adm.GetQueueRuntimeProperties(ctx, "pq", nil); err != nil || rp.TotalMessageCount != 0 {
		t.Fatalf("runtime properties at the end: %+v %v", rp, err)
	}
}
