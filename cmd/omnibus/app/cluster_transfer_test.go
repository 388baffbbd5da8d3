package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core"
)

// transferCluster is a 3-node cluster with three data groups, each led
// by its preferred node, and Go SDK clients on it.
type transferCluster struct {
	t     *testing.T
	ctx   context.Context
	nodes map[uint64]*Cluster
	adm   *admin.Client
	sb    *azservicebus.Client
	via   uint64 // the node the clients are connected to
	ns    uint64 // the namespace adm and sb are in (0: the default one)
}

func startTransferCluster(t *testing.T, edit func(*Options)) *transferCluster {
	nodes := startTestClusterOf(t, 3, edit, func(co *ClusterOptions) { co.Groups = 3 })
	waitGroupsServing(t, nodes)
	// The config file's queue, placed by the meta leader: placements
	// (creates) are served.
	waitForCond(t, "the config file's queue", func() error {
		_, err := routedBroker(t, nodes[1]).GetEntity("orders")
		return err
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	tc := &transferCluster{t: t, ctx: ctx, nodes: nodes, adm: clusterAdmin(t, nodes[1]), via: 1}
	sb, err := azservicebus.NewClientFromConnectionString(nodes[1].ConnectionString(),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: 20, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	tc.sb = sb
	return tc
}

// on is tc for (sub)test t.
func (tc *transferCluster) on(t *testing.T) *transferCluster {
	c := *tc
	c.t = t
	return &c
}

// group is the data group name is placed in.
func (tc *transferCluster) group(name string) uint64 {
	tc.t.Helper()
	g, err := tc.nodes[tc.via].routed.groupOf(tc.ctx, qualify(tc.ns, name), false)
	if err != nil || g == 0 {
		tc.t.Fatalf("%s is placed in group %d: %v", name, g, err)
	}
	return g
}

// queueOutside creates queues named prefix0, prefix1, ... until one
// lands in a group other than of's, and returns it.
func (tc *transferCluster) queueOutside(prefix, of string, props *admin.QueueProperties) string {
	tc.t.Helper()
	for i := range 6 {
		name := fmt.Sprint(prefix, i)
		if _, err := tc.adm.CreateQueue(tc.ctx, name, &admin.CreateQueueOptions{Properties: props}); err != nil {
			tc.t.Fatal(err)
		}
		if tc.group(name) != tc.group(of) {
			return name
		}
	}
	tc.t.Fatalf("no queue outside %s's group after 6", of)
	return ""
}

// forwardTo updates queue name to forward (ForwardTo, or its dead
// letters) to target.
func (tc *transferCluster) forwardTo(name, target string, deadLetters bool) {
	tc.t.Helper()
	got, err := tc.adm.GetQueue(tc.ctx, name, nil)
	if err != nil {
		tc.t.Fatal(err)
	}
	if deadLetters {
		got.ForwardDeadLetteredMessagesTo = &target
	} else {
		got.ForwardTo = &target
	}
	if _, err := tc.adm.UpdateQueue(tc.ctx, name, got.QueueProperties, nil); err != nil {
		tc.t.Fatalf("update %s to forward to %s (another group): %v", name, target, err)
	}
}

func (tc *transferCluster) send(to string, bodies ...string) {
	tc.t.Helper()
	s, err := tc.sb.NewSender(to, nil)
	if err != nil {
		tc.t.Fatal(err)
	}
	defer s.Close(tc.ctx)
	for _, b := range bodies {
		if err := s.SendMessage(tc.ctx, &azservicebus.Message{Body: []byte(b), MessageID: &b}, nil); err != nil {
			tc.t.Fatalf("send %s to %s: %v", b, to, err)
		}
	}
}

// receiveAll receives from path (receive-and-delete) until it has n
// messages, then checks that nothing more comes.
func (tc *transferCluster) receiveAll(path string, n int) []*azservicebus.ReceivedMessage {
	tc.t.Helper()
	var rc *azservicebus.Receiver
	var err error
	opts := &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}
	if a := core.ParseAddress(path); a.DeadLetter {
		opts.SubQueue = azservicebus.SubQueueDeadLetter
		rc, err = tc.sb.NewReceiverForQueue(a.Entity, opts)
	} else {
		rc, err = tc.sb.NewReceiverForQueue(path, opts)
	}
	if err != nil {
		tc.t.Fatal(err)
	}
	defer rc.Close(tc.ctx)
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		ctx, cancel := context.WithTimeout(tc.ctx, 20*time.Second)
		msgs, err := rc.ReceiveMessages(ctx, n-len(got), nil)
		cancel()
		if err != nil || len(msgs) == 0 {
			tc.t.Fatalf("receive from %s: %d of %d, then %v", path, len(got), n, err)
		}
		got = append(got, msgs...)
	}
	ctx, cancel := context.WithTimeout(tc.ctx, 300*time.Millisecond)
	more, _ := rc.ReceiveMessages(ctx, 10, nil)
	cancel()
	if len(more) > 0 {
		tc.t.Errorf("%s: %d messages more than the %d sent (first %q)", path, len(more), n, more[0].Body)
	}
	return got
}

// inOrder checks that got's bodies are want, in order, each once.
func inOrder(t *testing.T, what string, got []*azservicebus.ReceivedMessage, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
	}
	for i, m := range got {
		if string(m.Body) != want[i] {
			t.Fatalf("%s: message %d is %q, want %q", what, i, m.Body, want[i])
		}
	}
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// TestClusterTransfers: with three data groups, forwarding from an
// entity of one group to an entity of another (set by an update or on a
// subscription created at run time) goes by transfer: every message
// arrives once, in order; dead letters forwarded across groups arrive
// with their reason; a disabled target's messages are dead-lettered in
// the source, as Service Bus does.
func TestClusterTransfers(t *testing.T) {
	tc := startTransferCluster(t, nil)

	t.Run("QueueForwardTo", func(t *testing.T) {
		tc := tc.on(t)
		if _, err := tc.adm.CreateQueue(tc.ctx, "xb", nil); err != nil {
			t.Fatal(err)
		}
		xa := tc.queueOutside("xa", "xb", nil)
		tc.forwardTo(xa, "xb", false)
		want := bodies("q", 40)
		tc.send(xa, want[:20]...)
		// A batch too: one write, twenty transfers.
		s, err := tc.sb.NewSender(xa, nil)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := s.NewMessageBatch(tc.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range want[20:] {
			if err := batch.AddMessage(&azservicebus.Message{Body: []byte(b)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(tc.ctx, batch, nil); err != nil {
			t.Fatalf("send a batch to %s: %v", xa, err)
		}
		s.Close(tc.ctx)
		inOrder(t, "xb", tc.receiveAll("xb", len(want)), want)
		tc.noneLeft(xa)
	})

	t.Run("SubscriptionForwardTo", func(t *testing.T) {
		tc := tc.on(t)
		if _, err := tc.adm.CreateQueue(tc.ctx, "sink", nil); err != nil {
			t.Fatal(err)
		}
		var topic string
		for i := range 6 {
			name := fmt.Sprint("news", i)
			if _, err := tc.adm.CreateTopic(tc.ctx, name, nil); err != nil {
				t.Fatal(err)
			}
			if tc.group(name) != tc.group("sink") {
				topic = name
				break
			}
		}
		if topic == "" {
			t.Fatal("no topic outside sink's group")
		}
		to := "sink"
		if _, err := tc.adm.CreateSubscription(tc.ctx, topic, "fwd", &admin.CreateSubscriptionOptions{
			Properties: &admin.SubscriptionProperties{ForwardTo: &to}}); err != nil {
			t.Fatalf("create a subscription of %s (group %d) forwarding to sink (group %d): %v", topic, tc.group(topic), tc.group("sink"), err)
		}
		want := bodies("s", 10)
		tc.send(topic, want...)
		inOrder(t, "sink", tc.receiveAll("sink", len(want)), want)
	})

	t.Run("ForwardDeadLetteredMessagesTo", func(t *testing.T) {
		tc := tc.on(t)
		if _, err := tc.adm.CreateQueue(tc.ctx, "dl-sink", nil); err != nil {
			t.Fatal(err)
		}
		src := tc.queueOutside("dl-src", "dl-sink", nil)
		tc.forwardTo(src, "dl-sink", true)
		want := bodies("d", 3)
		tc.send(src, want...)
		rc, err := tc.sb.NewReceiverForQueue(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close(tc.ctx)
		for n := 0; n < len(want); {
			msgs, err := rc.ReceiveMessages(tc.ctx, len(want)-n, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				reason := "bad"
				if err := rc.DeadLetterMessage(tc.ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason}); err != nil {
					t.Fatalf("dead-letter: %v", err)
				}
			}
			n += len(msgs)
		}
		got := tc.receiveAll("dl-sink", len(want))
		inOrder(t, "dl-sink", got, want)
		if r := got[0].DeadLetterReason; r == nil || *r != "bad" {
			t.Errorf("the forwarded dead letter's reason is %v, want bad", r)
		}
		if s := got[0].DeadLetterSource; s == nil || *s != src {
			t.Errorf("the forwarded dead letter's source is %v, want %s", s, src)
		}
		tc.noneLeft(src)
	})

	t.Run("DisabledTargetDeadLetters", func(t *testing.T) {
		tc := tc.on(t)
		if _, err := tc.adm.CreateQueue(tc.ctx, "off", nil); err != nil {
			t.Fatal(err)
		}
		src := tc.queueOutside("to-off", "off", nil)
		tc.forwardTo(src, "off", false)
		got, err := tc.adm.GetQueue(tc.ctx, "off", nil)
		if err != nil {
			t.Fatal(err)
		}
		disabled := admin.EntityStatusDisabled
		got.Status = &disabled
		if _, err := tc.adm.UpdateQueue(tc.ctx, "off", got.QueueProperties, nil); err != nil {
			t.Fatal(err)
		}
		tc.send(src, "refused")
		dl := tc.receiveAll(src+"/$deadletterqueue", 1)
		if string(dl[0].Body) != "refused" {
			t.Fatalf("dead letter %q", dl[0].Body)
		}
		if r := dl[0].DeadLetterReason; r == nil || *r != core.ReasonForwardDisabled {
			t.Errorf("the dead letter's reason is %v, want %s", r, core.ReasonForwardDisabled)
		}
	})

	t.Run("Namespace", func(t *testing.T) {
		tc := tc.on(t)
		if st, body := nsCallAt(t, tc.nodes[1].HTTPAddr(), http.MethodPut, "/$namespaces/sales", DefaultKeyName, DefaultKey, salesRules); st != http.StatusCreated {
			t.Fatalf("create sales: %d %s", st, body)
		}
		for id, c := range tc.nodes {
			waitForCond(t, fmt.Sprintf("node %d to know sales", id), func() error {
				if st, body := nsCallAt(t, c.HTTPAddr(), http.MethodGet, "/$namespaces/sales", DefaultKeyName, DefaultKey, ""); st != http.StatusOK {
					return fmt.Errorf("%d %s", st, body)
				}
				return nil
			})
		}
		sales, err := tc.nodes[1].routed.registry.Get("sales")
		if err != nil {
			t.Fatal(err)
		}
		tc.ns = sales.Record().ID
		tc.adm = clusterAdminAs(t, tc.nodes[1], "salesKey", salesKey)
		tc.sb = clusterClientAs(t, tc.nodes[1], "salesKey", salesKey)
		if _, err := tc.adm.CreateQueue(tc.ctx, "xb", nil); err != nil {
			t.Fatal(err)
		}
		xa := tc.queueOutside("xa", "xb", nil)
		tc.forwardTo(xa, "xb", false)
		want := bodies("n", 10)
		tc.send(xa, want...)
		inOrder(t, "sales' xb", tc.receiveAll("xb", len(want)), want)
	})
}

// noneLeft checks that the forwarding queue name keeps nothing: no
// message, no dead letter, and its group's outbox is empty.
func (tc *transferCluster) noneLeft(name string) {
	tc.t.Helper()
	if tc.ns != 0 {
		return // the routed broker at hand is the default namespace's
	}
	c, err := routedBroker(tc.t, tc.nodes[tc.via]).Counts(name)
	if err != nil || c.Active != 0 || c.DeadLetter != 0 {
		tc.t.Errorf("%s keeps %+v (%v)", name, c, err)
	}
}

// TestClusterTransferLeaderStopped: the leader of the source group is
// stopped while messages stream through a queue forwarding to another
// group, after the target applied transfers whose answers it never
// heard (loseTransferAnswers): its outbox still holds them. The new
// leader resumes that outbox and sends them again; the target knows
// their ids and drops them. Every message arrives once, in order (the
// source's duplicate detection drops the client's own retries).
func TestClusterTransferLeaderStopped(t *testing.T) {
	tc := startTransferCluster(t, nil)
	if _, err := tc.adm.CreateQueue(tc.ctx, "dst", nil); err != nil {
		t.Fatal(err)
	}
	dup, window := true, "PT10M"
	src := tc.queueOutside("src", "dst", &admin.QueueProperties{RequiresDuplicateDetection: &dup, DuplicateDetectionHistoryTimeWindow: &window})
	tc.forwardTo(src, "dst", false)
	victim := groupLeaders(tc.nodes)[tc.group(src)]
	keep := groupLeaders(tc.nodes)[tc.group("dst")]
	if victim == keep {
		t.Fatalf("src's and dst's groups are led by one node (%d)", victim)
	}
	// The clients go through a node that stays: the target's leader.
	tc.via = keep
	sb, err := azservicebus.NewClientFromConnectionString(tc.nodes[keep].ConnectionString(),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: 60, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	tc.sb = sb
	s, err := sb.NewSender(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	send := func(bs []string) {
		t.Helper()
		for _, b := range bs {
			var err error
			for try := 0; try < 40; try++ {
				if err = s.SendMessage(tc.ctx, &azservicebus.Message{Body: []byte(b), MessageID: &b}, nil); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("send %s: %v", b, err)
			}
		}
	}
	want := bodies("m", 60)
	send(want[:30])
	tc.nodes[victim].routed.loseTransferAnswers.Store(true)
	send(want[30:40])
	home := routedBroker(t, tc.nodes[keep])
	waitForCond(t, "dst to hold the forty messages sent so far", func() error {
		c, err := home.Counts("dst")
		if err != nil || c.Active < 40 {
			return fmt.Errorf("%+v %v", c, err)
		}
		return nil
	})
	if err := tc.nodes[victim].Shutdown(tc.ctx); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, victim)
	send(want[40:])
	inOrder(t, "dst", tc.receiveAll("dst", len(want)), want)
	tc.noneLeft(src)
}

// TestClusterTransferOutboxBound: a send that would take a group's
// outbox past --max-outbox is refused as server busy and stores nothing;
// one within it goes through. A transfer its target has no room for
// (--max-entity-size) is dead-lettered in the source, as Service Bus
// does when an auto-forwarding target exceeds its quota.
func TestClusterTransferOutboxBound(t *testing.T) {
	tc := startTransferCluster(t, func(o *Options) { o.MaxOutbox = 4; o.Limits.MaxEntityBytes = 1 << 20 })
	if _, err := tc.adm.CreateQueue(tc.ctx, "far", nil); err != nil {
		t.Fatal(err)
	}
	src := tc.queueOutside("near", "far", nil)
	tc.forwardTo(src, "far", false)
	sb, err := azservicebus.NewClientFromConnectionString(tc.nodes[1].ConnectionString(),
		&azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	s, err := sb.NewSender(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	sendBatch := func(bs []string) error {
		batch, err := s.NewMessageBatch(tc.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if err := batch.AddMessage(&azservicebus.Message{Body: []byte(b)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		return s.SendMessageBatch(tc.ctx, batch, nil)
	}
	err = sendBatch(bodies("over", 5))
	if err == nil || !strings.Contains(err.Error(), "server-busy") || !strings.Contains(err.Error(), "its bound (4)") {
		t.Fatalf("a batch of 5 through an outbox bounded at 4: %v, want server-busy naming the bound", err)
	}
	t.Logf("refused: %v", err)
	want := bodies("in", 4)
	if err := sendBatch(want); err != nil {
		t.Fatalf("a batch of 4 through an outbox bounded at 4: %v", err)
	}
	inOrder(t, "far", tc.receiveAll("far", len(want)), want)

	t.Run("FullTargetDeadLetters", func(t *testing.T) {
		tc := tc.on(t)
		if _, err := tc.adm.CreateQueue(tc.ctx, "small", nil); err != nil {
			t.Fatal(err)
		}
		src := tc.queueOutside("to-small", "small", nil)
		tc.forwardTo(src, "small", false)
		s, err := tc.sb.NewSender(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(tc.ctx)
		body := make([]byte, 200<<10)
		for i := range 6 { // the sixth does not fit in 1 MiB (the cap)
			body[0] = byte('0' + i)
			if err := s.SendMessage(tc.ctx, &azservicebus.Message{Body: body}, nil); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
		dl := tc.receiveAll(src+"/$deadletterqueue", 1)
		if dl[0].Body[0] != '5' {
			t.Errorf("the dead letter is message %c, want 5", dl[0].Body[0])
		}
		if r := dl[0].DeadLetterReason; r == nil || *r != core.ReasonForwardQuota {
			t.Errorf("the dead letter's reason is %v, want %s", r, core.ReasonForwardQuota)
		}
		if got := tc.receiveAll("small", 5); got[4].Body[0] != '4' {
			t.Errorf("small's last message is %c, want 4", got[4].Body[0])
		}
	})
}
