package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// Partitioned entities (partition.go): each message goes to the partition
// its key picks, order holds per key, and every operation of a receiver
// reaches every partition.

func checkPartitioned(t *testing.T, env *coretest.Env) {
	t.Helper()
	if err := env.Broker.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
}

func keyed(body, key string) *core.Message {
	return &core.Message{Body: []byte(body), PartitionKey: key}
}

// drain receives everything available now from path, completing each.
func drainAll(t *testing.T, env *coretest.Env, path string) []*core.Message {
	t.Helper()
	var all []*core.Message
	for {
		msgs := env.MustReceive(t, path, core.PeekLock, 7)
		if len(msgs) == 0 {
			return all
		}
		for _, m := range msgs {
			env.MustSettle(t, path, m.LockToken, core.Outcome{Kind: core.Complete})
		}
		all = append(all, msgs...)
	}
}

func TestPartitionedQueueKeepsOrderPerKey(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	const keys, per = 20, 5
	partOf := map[string]int{}
	for i := range per {
		for k := range keys {
			key := fmt.Sprint("k", k)
			seqs := env.MustSend(t, "pq", keyed(fmt.Sprintf("%s-%d", key, i), key))
			p := core.PartitionOfSequence(seqs[0])
			if old, ok := partOf[key]; ok && old != p {
				t.Fatalf("key %s went to partition %d, then %d", key, old, p)
			}
			partOf[key] = p
		}
	}
	used := map[int]bool{}
	for _, p := range partOf {
		used[p] = true
	}
	if len(used) < 4 {
		t.Errorf("%d keys used only %d of 16 partitions: %v", keys, len(used), partOf)
	}
	if c := env.MustCounts(t, "pq"); c.Active != keys*per {
		t.Fatalf("active = %d, want %d", c.Active, keys*per)
	}
	checkPartitioned(t, env)

	got := drainAll(t, env, "pq")
	if len(got) != keys*per {
		t.Fatalf("received %d messages, want %d", len(got), keys*per)
	}
	next := map[string]int{}
	for _, m := range got {
		key, n, _ := strings.Cut(string(m.Body), "-")
		if want := fmt.Sprint(next[key]); n != want {
			t.Fatalf("key %s: got message %s, want %s: order lost", key, n, want)
		}
		next[key]++
		if m.PartitionKey != key {
			t.Errorf("message %s has PartitionKey %q", m.Body, m.PartitionKey)
		}
	}
	if c := env.MustCounts(t, "pq"); c.Total != 0 {
		t.Fatalf("after completing everything: %+v", c)
	}
	checkPartitioned(t, env)
}

func TestPartitionedQueueSpreadsMessagesWithoutKey(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	used := map[int]bool{}
	for i := range 32 {
		seqs := env.MustSend(t, "pq", coretest.Text(fmt.Sprint(i)))
		used[core.PartitionOfSequence(seqs[0])] = true
	}
	if len(used) != 16 {
		t.Errorf("32 messages without a key used %d partitions, want all 16", len(used))
	}
	// A batch without keys goes to one partition, as Service Bus's does.
	seqs := env.MustSend(t, "pq", coretest.Text("a"), coretest.Text("b"), coretest.Text("c"))
	if p := core.PartitionOfSequence(seqs[0]); core.PartitionOfSequence(seqs[2]) != p || seqs[1] != seqs[0]+1 {
		t.Errorf("a batch went to several partitions: %v", seqs)
	}
	if got := drainAll(t, env, "pq"); len(got) != 35 {
		t.Fatalf("received %d, want 35", len(got))
	}
}

func TestPartitionedQueueRefusesBadKeys(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	long := strings.Repeat("k", 129)
	for _, m := range []*core.Message{
		keyed("too long", long),
		{Body: []byte("disagree"), PartitionKey: "a", SessionID: "b"},
		{Body: []byte("long session"), SessionID: long},
	} {
		_, err := env.Broker.Send(t.Context(), "pq", m)
		if !errors.Is(err, core.ErrBadRequest) {
			t.Errorf("send %s: err = %v, want bad request", m.Body, err)
		}
	}
	// A bad message refuses its whole batch, good ones included.
	_, err := env.Broker.Send(t.Context(), "pq", keyed("good", "a"), keyed("bad", long))
	if !errors.Is(err, core.ErrBadRequest) {
		t.Errorf("batch with a bad key: err = %v", err)
	}
	if c := env.MustCounts(t, "pq"); c.Total != 0 {
		t.Fatalf("refused sends stored something: %+v", c)
	}
	// 128 characters are allowed.
	env.MustSend(t, "pq", keyed("max", long[:128]))
	checkPartitioned(t, env)
}

func TestPartitionedQueueDuplicateDetection(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true,
		RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: time.Minute})
	for i := range 10 {
		for range 3 {
			env.MustSend(t, "pq", &core.Message{Body: []byte("x"), MessageID: fmt.Sprint("id", i)})
		}
	}
	if c := env.MustCounts(t, "pq"); c.Active != 10 {
		t.Fatalf("active = %d, want 10 (one per MessageId)", c.Active)
	}
	env.Restart(t)
	env.MustSend(t, "pq", &core.Message{Body: []byte("x"), MessageID: "id3"})
	if c := env.MustCounts(t, "pq"); c.Active != 10 {
		t.Fatalf("after a restart a duplicate was stored: active = %d", c.Active)
	}
	checkPartitioned(t, env)
}

func TestPartitionedQueueSurvivesRestart(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	var before []int64
	for k := range 8 {
		before = append(before, env.MustSend(t, "pq", keyed("a", fmt.Sprint(k)))...)
	}
	env.Restart(t)
	for k := range 8 {
		seq := env.MustSend(t, "pq", keyed("b", fmt.Sprint(k)))[0]
		if core.PartitionOfSequence(seq) != core.PartitionOfSequence(before[k]) || seq <= before[k] {
			t.Errorf("key %d: %d before the restart, %d after", k, before[k], seq)
		}
	}
	if got := drainAll(t, env, "pq"); len(got) != 16 {
		t.Fatalf("received %d, want 16", len(got))
	}
	checkPartitioned(t, env)
}

func TestPartitionedQueueWaitingReceiverGetsAnyPartition(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	for k := range 16 {
		got := make(chan []*core.Message, 1)
		// The deadline only keeps a broken receive from hanging the test.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		go func() {
			msgs, err := env.Broker.Receive(ctx, "pq", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 5})
			if err != nil {
				t.Errorf("receive: %v", err)
			}
			got <- msgs
		}()
		env.MustSend(t, "pq", keyed(fmt.Sprint(k), fmt.Sprint("key", k)))
		msgs := <-got
		cancel()
		if len(msgs) != 1 || string(msgs[0].Body) != fmt.Sprint(k) {
			t.Fatalf("waiting receiver got %v, want [%d]", coretest.Bodies(msgs), k)
		}
	}
	// A receive that ends first leaves no waiter behind, and a message
	// sent after it stays for the next receiver.
	if msgs := env.MustReceive(t, "pq", core.PeekLock, 1); len(msgs) != 0 {
		t.Fatalf("left over: %v", coretest.Bodies(msgs))
	}
	env.MustSend(t, "pq", keyed("later", "x"))
	if msgs := env.MustReceive(t, "pq", core.PeekLock, 1); len(msgs) != 1 {
		t.Fatalf("a message sent after a receive ended was not received")
	}
	checkPartitioned(t, env)
}

func TestPartitionedQueueSettlesEveryOutcome(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true, LockDuration: 30 * time.Second})
	for k := range 8 {
		env.MustSend(t, "pq", keyed(fmt.Sprint(k), fmt.Sprint("key", k)))
	}
	msgs := env.MustReceive(t, "pq", core.PeekLock, 8)
	if len(msgs) != 8 {
		t.Fatalf("received %d of 8 in one receive", len(msgs))
	}
	parts := map[int]bool{}
	for _, m := range msgs {
		parts[core.PartitionOfSequence(m.SequenceNumber)] = true
	}
	if len(parts) < 2 {
		t.Fatalf("test needs messages in several partitions: %v", parts)
	}
	b := env.Broker
	ctx := t.Context()
	if _, err := b.RenewLock(ctx, "pq", msgs[0].LockToken); err != nil {
		t.Fatalf("renew: %v", err)
	}
	env.MustSettle(t, "pq", msgs[0].LockToken, core.Outcome{Kind: core.Complete})
	env.MustSettle(t, "pq", msgs[1].LockToken, core.Outcome{Kind: core.Abandon})
	env.MustSettle(t, "pq", msgs[2].LockToken, core.Outcome{Kind: core.DeadLetter, DeadLetterReason: "why"})
	env.MustSettle(t, "pq", msgs[3].LockToken, core.Outcome{Kind: core.Defer})
	env.MustSettle(t, "pq", msgs[4].LockToken, core.Outcome{Kind: core.Defer})
	errs := b.CompleteMany("pq", []core.LockToken{msgs[5].LockToken, msgs[6].LockToken, msgs[7].LockToken, msgs[0].LockToken}, true)
	for i, err := range errs[:3] {
		if err != nil {
			t.Errorf("complete many [%d]: %v", i, err)
		}
	}
	if !errors.Is(errs[3], core.ErrLockLost) {
		t.Errorf("completing a completed message: %v, want lock lost", errs[3])
	}
	if err := b.Settle(ctx, "pq", msgs[0].LockToken, core.Outcome{Kind: core.Complete}); !errors.Is(err, core.ErrLockLost) {
		t.Errorf("settling twice: %v, want lock lost", err)
	}
	c := env.MustCounts(t, "pq")
	if c.Active != 1 || c.Deferred != 2 || c.DeadLetter != 1 {
		t.Fatalf("counts %+v, want 1 active, 2 deferred, 1 dead-lettered", c)
	}
	// Deferred messages of two partitions, by sequence number.
	seqs := []int64{msgs[3].SequenceNumber, msgs[4].SequenceNumber}
	def, err := b.ReceiveDeferred(ctx, "pq", core.PeekLock, seqs)
	if err != nil || len(def) != 2 {
		t.Fatalf("receive deferred %v: %d messages, %v", seqs, len(def), err)
	}
	for _, m := range def {
		env.MustSettle(t, "pq", m.LockToken, core.Outcome{Kind: core.Complete})
	}
	if _, err := b.ReceiveDeferred(ctx, "pq", core.PeekLock, []int64{seqs[0], 99 << 48}); !errors.Is(err, core.ErrMessageNotFound) {
		t.Errorf("deferred receive of a number no partition has: %v", err)
	}
	dl := env.MustReceive(t, "pq/$DeadLetterQueue", core.ReceiveAndDelete, 10)
	if len(dl) != 1 || string(dl[0].Body) != string(msgs[2].Body) {
		t.Fatalf("dead-letter subqueue: %v", coretest.Bodies(dl))
	}
	if got := drainAll(t, env, "pq"); len(got) != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("the abandoned message: %v", got)
	}
	checkPartitioned(t, env)
}

func TestPartitionedQueuePeekPagesThroughEveryPartition(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	var sent []int64
	for k := range 30 {
		sent = append(sent, env.MustSend(t, "pq", keyed(fmt.Sprint(k), fmt.Sprint("key", k)))...)
	}
	slices.Sort(sent)
	var seen []int64
	from := int64(0)
	for range 100 {
		msgs, err := env.Broker.Peek(t.Context(), "pq", core.PeekOptions{From: from, Max: 4})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			seen = append(seen, m.SequenceNumber)
		}
		from = msgs[len(msgs)-1].SequenceNumber + 1
	}
	if !slices.Equal(seen, sent) {
		t.Fatalf("peek pages saw %v\nwant %v", seen, sent)
	}
	// The messages are still there, unlocked.
	if got := drainAll(t, env, "pq"); len(got) != 30 {
		t.Fatalf("received %d, want 30", len(got))
	}
}

func TestPartitionedSessions(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "ps", EnablePartitioning: true, RequiresSession: true, LockDuration: 30 * time.Second})
	b := env.Broker
	ctx := t.Context()
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i := range 3 {
		for _, id := range ids {
			env.MustSend(t, "ps", &core.Message{Body: []byte(fmt.Sprint(id, i)), SessionID: id})
		}
	}
	list, err := b.ListSessions(ctx, "ps", time.Time{})
	if err != nil || !slices.Equal(list, ids) {
		t.Fatalf("sessions %v, %v; want %v", list, err, ids)
	}
	// A session id and a partition key that agree are fine.
	env.MustSend(t, "ps", &core.Message{Body: []byte("a3"), SessionID: "a", PartitionKey: "a"})
	seen := map[string]bool{}
	for range ids {
		sl, err := b.AcceptSession(coretest.Now(t), "ps", "")
		if err != nil {
			t.Fatalf("accept next session: %v", err)
		}
		if seen[sl.SessionID] {
			t.Fatalf("session %s accepted twice", sl.SessionID)
		}
		seen[sl.SessionID] = true
		msgs, err := b.Receive(coretest.Now(t), "ps", core.ReceiveOptions{Max: 10, Session: sl})
		if err != nil {
			t.Fatalf("receive in session %s: %v", sl.SessionID, err)
		}
		want := []string{sl.SessionID + "0", sl.SessionID + "1", sl.SessionID + "2"}
		if sl.SessionID == "a" {
			want = append(want, "a3")
		}
		if got := coretest.Bodies(msgs); !slices.Equal(got, want) {
			t.Fatalf("session %s: got %v, want %v", sl.SessionID, got, want)
		}
		for _, m := range msgs {
			env.MustSettle(t, "ps", m.LockToken, core.Outcome{Kind: core.Complete})
		}
		if err := b.SetSessionState(ctx, "ps", sl, []byte("state-"+sl.SessionID)); err != nil {
			t.Fatalf("set state: %v", err)
		}
		if _, err := b.RenewSessionLock(ctx, "ps", sl); err != nil {
			t.Fatalf("renew session lock: %v", err)
		}
		if err := b.CloseSession("ps", sl); err != nil {
			t.Fatalf("close session: %v", err)
		}
	}
	if _, err := b.AcceptSession(coretest.Now(t), "ps", ""); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("accept with nothing left: %v, want timeout", err)
	}
	env.Restart(t)
	b = env.Broker
	sl, err := b.AcceptSession(ctx, "ps", "e")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := b.GetSessionState(ctx, "ps", sl); err != nil || string(st) != "state-e" {
		t.Fatalf("state of e after a restart: %q, %v", st, err)
	}
	// A waiting accept gets a session that arrives in any partition.
	got := make(chan string, 1)
	go func() {
		sl, err := b.AcceptSession(ctx, "ps", "")
		if err != nil {
			t.Errorf("waiting accept: %v", err)
			got <- ""
			return
		}
		got <- sl.SessionID
	}()
	env.MustSend(t, "ps", &core.Message{Body: []byte("z"), SessionID: "zz"})
	if id := <-got; id != "zz" {
		t.Fatalf("waiting accept got %q", id)
	}
	checkPartitioned(t, env)
}

func TestPartitionedTopic(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "pt", EnablePartitioning: true})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "pt", Name: "all"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "pt", Name: "red",
		Rules: []core.Rule{{Name: "red", Filter: core.Filter{Kind: core.FilterSQL, SQL: "color = 'red'"}}}})
	sub, err := env.Broker.GetEntity("pt/Subscriptions/all")
	if err != nil || !sub.EnablePartitioning {
		t.Fatalf("a subscription of a partitioned topic is partitioned too: %+v, %v", sub, err)
	}
	for k := range 20 {
		color := "blue"
		if k%2 == 0 {
			color = "red"
		}
		m := keyed(fmt.Sprint(k), fmt.Sprint("key", k))
		m.ApplicationProperties = map[string]any{"color": color}
		env.MustSend(t, "pt", m)
	}
	if n := len(drainAll(t, env, "pt/Subscriptions/all")); n != 20 {
		t.Errorf("all: %d messages, want 20", n)
	}
	env.Restart(t)
	if err := env.Broker.AddRule(t.Context(), "pt/Subscriptions/red", core.Rule{Name: "k1", Filter: core.Filter{Kind: core.FilterSQL, SQL: "sys.PartitionKey = 'key1'"}}); err != nil {
		t.Fatal(err)
	}
	m := keyed("one", "key1")
	m.ApplicationProperties = map[string]any{"color": "blue"}
	env.MustSend(t, "pt", m)
	if n := len(drainAll(t, env, "pt/Subscriptions/red")); n != 11 {
		t.Errorf("red: %d messages, want 11", n)
	}
	checkPartitioned(t, env)
	if err := env.Broker.DeleteEntity(t.Context(), "pt/Subscriptions/all"); err != nil {
		t.Fatal(err)
	}
	checkPartitioned(t, env)
	if err := env.Broker.DeleteEntity(t.Context(), "pt"); err != nil {
		t.Fatal(err)
	}
	checkPartitioned(t, env)
}

func TestPartitionedEntityManagement(t *testing.T) {
	env := coretest.New(t)
	b := env.Broker
	ctx := t.Context()
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "plain"})
	d, err := b.GetEntity("pq")
	if err != nil || !d.EnablePartitioning {
		t.Fatalf("get: %+v, %v", d, err)
	}
	d.EnablePartitioning = false
	if _, err := b.UpdateEntity(ctx, *d); !errors.Is(err, core.ErrBadRequest) {
		t.Errorf("turning partitioning off: %v, want bad request", err)
	}
	d.EnablePartitioning = true
	d.LockDuration = 42 * time.Second
	if _, err := b.UpdateEntity(ctx, *d); err != nil {
		t.Fatal(err)
	}
	// Every partition takes the update.
	for k := range 16 {
		env.MustSend(t, "pq", keyed("x", fmt.Sprint(k)))
	}
	for _, m := range env.MustReceive(t, "pq", core.PeekLock, 16) {
		if got := m.LockedUntil.Sub(env.Clock.Now()); got != 42*time.Second {
			t.Fatalf("message %d locked for %v, want 42s", m.SequenceNumber, got)
		}
	}
	list, err := b.ListEntities(core.KindQueue, "")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %d entities, %v; partitions must not show", len(list), err)
	}
	// Scheduled messages cancel in whichever partition holds them.
	at := env.Clock.Now().Add(time.Hour)
	var seqs []int64
	for k := range 6 {
		m := keyed("later", fmt.Sprint("s", k))
		m.ScheduledEnqueueTime = at
		seqs = append(seqs, env.MustSend(t, "pq", m)...)
	}
	if err := b.CancelScheduled(ctx, "pq", seqs); err != nil {
		t.Fatal(err)
	}
	if c := env.MustCounts(t, "pq"); c.Scheduled != 0 {
		t.Fatalf("after cancelling: %+v", c)
	}
	n, err := b.DeleteMessages(ctx, "pq", core.DeleteOptions{Max: 100, Before: env.Clock.Now().Add(time.Hour)})
	if err != nil || n != 0 {
		// All 16 are locked: none may be deleted.
		t.Fatalf("delete locked messages: %d, %v", n, err)
	}
	checkPartitioned(t, env)
	if err := b.DeleteEntity(ctx, "pq"); err != nil {
		t.Fatal(err)
	}
	checkPartitioned(t, env)
}

func TestPartitionedTransactionNeedsOneKey(t *testing.T) {
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true})
	txn := env.Broker.BeginTxn()
	if err := txn.Send("pq", "", []*core.Message{keyed("a", "k1")}); err != nil {
		t.Fatal(err)
	}
	if err := txn.Send("pq", "", []*core.Message{keyed("b", "k2")}); !errors.Is(err, core.ErrBadRequest) {
		t.Fatalf("second key in one transaction: %v, want bad request", err)
	}
	if err := txn.Send("pq", "", []*core.Message{keyed("c", "k1"), {Body: []byte("d"), SessionID: "k1"}}); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	got := env.MustReceive(t, "pq", core.ReceiveAndDelete, 10)
	if !slices.Equal(coretest.Bodies(got), []string{"a", "c", "d"}) {
		t.Fatalf("received %v", coretest.Bodies(got))
	}
	checkPartitioned(t, env)
}
