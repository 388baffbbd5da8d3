package core_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// txnEnv is a broker with queues "in" and "out" and topic "t" with
// subscription "s".
func txnEnv(t *testing.T) *coretest.Env {
	t.Helper()
	env := coretest.New(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "in"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "out"})
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Name: "s", Topic: "t"})
	return env
}

// The exactly-once step: a complete and a send commit together; before
// the commit the sent message is not there and the completed one stays
// locked.
func TestTxnCommitCompleteAndSend(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("work"))
	m := env.MustReceive(t, "in", core.PeekLock, 1)[0]

	tx := env.Broker.BeginTxn()
	if err := tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Send("in", "", []*core.Message{coretest.Text("result")}); err != nil {
		t.Fatal(err)
	}
	if c := env.MustCounts(t, "in"); c.Active != 1 {
		t.Fatalf("before commit: counts %+v, want the locked message alone", c)
	}
	if got := env.MustReceive(t, "in", core.PeekLock, 10); len(got) != 0 {
		t.Fatalf("before commit a receiver got %v", coretest.Bodies(got))
	}
	mustCheck(t, env, t.Name())
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got := env.MustReceive(t, "in", core.PeekLock, 10)
	if b := coretest.Bodies(got); len(b) != 1 || b[0] != "result" {
		t.Fatalf("after commit: %v, want [result]", b)
	}
	mustCheck(t, env, t.Name())
}

// A rollback leaves everything as it was: nothing sent, and the settled
// message still locked by its receiver, who may settle it again.
func TestTxnRollback(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("a"), coretest.Text("b"))
	ms := env.MustReceive(t, "in", core.PeekLock, 2)
	tx := env.Broker.BeginTxn()
	must(t, tx.Settle("in", ms[0].LockToken, core.Outcome{Kind: core.Complete}))
	must(t, tx.Settle("in", ms[1].LockToken, core.Outcome{Kind: core.Abandon}))
	must(t, tx.Send("in", "", []*core.Message{coretest.Text("c")}))
	tx.Rollback()
	if err := tx.Commit(); err == nil {
		t.Fatal("commit after rollback succeeded")
	}
	if got := env.MustReceive(t, "in", core.PeekLock, 10); len(got) != 0 {
		t.Fatalf("after rollback a receiver got %v: the locks must still hold", coretest.Bodies(got))
	}
	env.MustSettle(t, "in", ms[0].LockToken, core.Outcome{Kind: core.Complete})
	env.MustSettle(t, "in", ms[1].LockToken, core.Outcome{Kind: core.Abandon})
	if got := env.MustReceive(t, "in", core.PeekLock, 10); len(got) != 1 || string(got[0].Body) != "b" {
		t.Fatalf("after settling outside the transaction: %v, want [b]", coretest.Bodies(got))
	}
	mustCheck(t, env, t.Name())
}

// Every outcome inside one transaction, applied at once.
func TestTxnOutcomes(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("complete"), coretest.Text("abandon"), coretest.Text("defer"), coretest.Text("dead"))
	ms := env.MustReceive(t, "in", core.PeekLock, 4)
	tx := env.Broker.BeginTxn()
	for i, o := range []core.Outcome{
		{Kind: core.Complete},
		{Kind: core.Abandon, Properties: map[string]any{"k": "v"}},
		{Kind: core.Defer},
		{Kind: core.DeadLetter, DeadLetterReason: "r", DeadLetterDescription: "d"},
	} {
		must(t, tx.Settle("in", ms[i].LockToken, o))
	}
	if c := env.MustCounts(t, "in"); c.Active != 4 || c.DeadLetter != 0 || c.Deferred != 0 {
		t.Fatalf("before commit: %+v", c)
	}
	must(t, tx.Commit())
	c := env.MustCounts(t, "in")
	if c.Active != 1 || c.Deferred != 1 || c.DeadLetter != 1 {
		t.Fatalf("after commit: %+v, want 1 active, 1 deferred, 1 dead-lettered", c)
	}
	got := env.MustReceive(t, "in", core.PeekLock, 10)
	if len(got) != 1 || string(got[0].Body) != "abandon" || got[0].ApplicationProperties["k"] != "v" || got[0].DeliveryCount != 2 {
		t.Fatalf("abandoned: %+v", got)
	}
	dl := env.MustReceive(t, "in/$DeadLetterQueue", core.PeekLock, 10)
	if len(dl) != 1 || dl[0].ApplicationProperties["DeadLetterReason"] != "r" {
		t.Fatalf("dead-lettered: %+v", dl)
	}
	mustCheck(t, env, t.Name())
}

// A lock lost before the commit fails the commit, and nothing of the
// transaction happens; the other locks it settled are still held.
func TestTxnLockLostFailsCommit(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("a"), coretest.Text("b"))
	ms := env.MustReceive(t, "in", core.PeekLock, 2)
	tx := env.Broker.BeginTxn()
	must(t, tx.Settle("in", ms[0].LockToken, core.Outcome{Kind: core.Complete}))
	must(t, tx.Settle("in", ms[1].LockToken, core.Outcome{Kind: core.Complete}))
	must(t, tx.Send("out", "in", []*core.Message{coretest.Text("c")}))
	// The second lock is settled outside the transaction meanwhile.
	env.MustSettle(t, "in", ms[1].LockToken, core.Outcome{Kind: core.Abandon})
	if err := tx.Commit(); !errors.Is(err, core.ErrLockLost) {
		t.Fatalf("commit with a lost lock: %v, want lock lost", err)
	}
	if c := env.MustCounts(t, "out"); c.Total != 0 {
		t.Fatalf("the send of a failed commit is visible: %+v", c)
	}
	env.MustSettle(t, "in", ms[0].LockToken, core.Outcome{Kind: core.Complete})
	mustCheck(t, env, t.Name())
}

// The locks a transaction settles keep running: one that expires before
// the commit fails it, and its message was available to others meanwhile.
func TestTxnLockExpiresBeforeCommit(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("a"))
	m := env.MustReceive(t, "in", core.PeekLock, 1)[0]
	tx := env.Broker.BeginTxn()
	must(t, tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Complete}))
	env.Clock.Advance(time.Minute + time.Second) // the default lock duration is a minute
	again := env.MustReceive(t, "in", core.PeekLock, 1)
	if len(again) != 1 {
		t.Fatal("the message of an expired lock is not available again")
	}
	if err := tx.Commit(); !errors.Is(err, core.ErrLockLost) {
		t.Fatalf("commit after the lock expired: %v, want lock lost", err)
	}
	env.MustSettle(t, "in", again[0].LockToken, core.Outcome{Kind: core.Complete})
	mustCheck(t, env, t.Name())
}

// A lock renewed inside the transaction keeps it alive to the commit.
func TestTxnRenewLock(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("a"))
	m := env.MustReceive(t, "in", core.PeekLock, 1)[0]
	tx := env.Broker.BeginTxn()
	must(t, tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Complete}))
	env.Clock.Advance(50 * time.Second)
	if _, err := tx.RenewLock(t.Context(), "in", m.LockToken); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(50 * time.Second)
	must(t, tx.Commit())
	if c := env.MustCounts(t, "in"); c.Total != 0 {
		t.Fatalf("after commit: %+v", c)
	}
}

// Operations on a second top-level entity are refused with Service Bus's
// error; the transaction goes on. A subscription's top-level entity is its
// topic, and a send-via counts as its via entity.
func TestTxnOneTopLevelEntity(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("a"))
	env.MustSend(t, "t", coretest.Text("b"))
	m := env.MustReceive(t, "in", core.PeekLock, 1)[0]
	sm := env.MustReceive(t, "t/Subscriptions/s", core.PeekLock, 1)[0]

	tx := env.Broker.BeginTxn()
	must(t, tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Complete}))
	if err := tx.Send("out", "", []*core.Message{coretest.Text("x")}); !errors.Is(err, core.ErrTxnSpansEntities) || core.CodeOf(err) != core.CodeBadRequest {
		t.Fatalf("send to a second entity: %v", err)
	}
	if err := tx.Settle("t/Subscriptions/s", sm.LockToken, core.Outcome{Kind: core.Complete}); !errors.Is(err, core.ErrTxnSpansEntities) {
		t.Fatalf("settle on a second entity: %v", err)
	}
	must(t, tx.Send("out", "in", []*core.Message{coretest.Text("via in")}))
	must(t, tx.Send("in", "", []*core.Message{coretest.Text("back to in")}))
	must(t, tx.Commit())
	if got := env.MustReceive(t, "out", core.PeekLock, 10); len(got) != 1 || string(got[0].Body) != "via in" {
		t.Fatalf("out: %v", coretest.Bodies(got))
	}
	if got := env.MustReceive(t, "in", core.PeekLock, 10); len(got) != 1 || string(got[0].Body) != "back to in" {
		t.Fatalf("in: %v", coretest.Bodies(got))
	}

	// Topic and subscription are one top-level entity.
	tx = env.Broker.BeginTxn()
	must(t, tx.Settle("t/Subscriptions/s", sm.LockToken, core.Outcome{Kind: core.Complete}))
	must(t, tx.Send("t", "", []*core.Message{coretest.Text("republished")}))
	must(t, tx.Commit())
	if got := env.MustReceive(t, "t/Subscriptions/s", core.PeekLock, 10); len(got) != 1 || string(got[0].Body) != "republished" {
		t.Fatalf("subscription: %v", coretest.Bodies(got))
	}
	mustCheck(t, env, t.Name())
}

// Service Bus's quota: 100 messages per transaction.
func TestTxnMessageLimit(t *testing.T) {
	env := txnEnv(t)
	tx := env.Broker.BeginTxn()
	for i := range core.MaxTxnMessages {
		must(t, tx.Send("out", "", []*core.Message{coretest.Text(fmt.Sprint(i))}))
	}
	err := tx.Send("out", "", []*core.Message{coretest.Text("one too many")})
	if core.CodeOf(err) != core.CodeQuotaExceeded || err.Error() != "core: Cannot send more than 100 messages in a single transaction." {
		t.Fatalf("the 101st message: %v", err)
	}
	must(t, tx.Commit())
	if c := env.MustCounts(t, "out"); c.Active != core.MaxTxnMessages {
		t.Fatalf("after commit: %+v", c)
	}
}

// The timeout counts from the first operation; a timed-out transaction
// is rolled back and its later operations and commit fail.
func TestTxnTimeout(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("a"))
	tx := env.Broker.BeginTxn()
	env.Clock.Advance(10 * time.Minute) // declared long ago: no operation yet
	m := env.MustReceive(t, "in", core.PeekLock, 1)[0]
	if !tx.Deadline().IsZero() {
		t.Fatal("deadline before the first operation")
	}
	must(t, tx.Send("out", "in", []*core.Message{coretest.Text("x")}))
	if want := env.Clock.Now().Add(core.DefaultTxnTimeout); !tx.Deadline().Equal(want) {
		t.Fatalf("deadline %v, want %v", tx.Deadline(), want)
	}
	env.Clock.Advance(50 * time.Second)
	must(t, tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Abandon}))
	env.Clock.Advance(core.DefaultTxnTimeout - 51*time.Second)
	must(t, tx.Send("out", "in", []*core.Message{coretest.Text("still in time")}))
	env.Clock.Advance(time.Second)
	if err := tx.Send("out", "in", []*core.Message{coretest.Text("y")}); !errors.Is(err, core.ErrTxnTimeout) {
		t.Fatalf("operation after the timeout: %v", err)
	}
	if err := tx.Commit(); !errors.Is(err, core.ErrTxnTimeout) {
		t.Fatalf("commit after the timeout: %v", err)
	}
	if c := env.MustCounts(t, "out"); c.Total != 0 {
		t.Fatalf("a timed-out transaction stored messages: %+v", c)
	}
}

// A lock settled twice in one transaction fails the second time.
func TestTxnSettleTwice(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("a"))
	m := env.MustReceive(t, "in", core.PeekLock, 1)[0]
	tx := env.Broker.BeginTxn()
	must(t, tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Complete}))
	if err := tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Abandon}); !errors.Is(err, core.ErrLockLost) {
		t.Fatalf("second settlement: %v", err)
	}
	must(t, tx.Commit())
	if c := env.MustCounts(t, "in"); c.Total != 0 {
		t.Fatalf("%+v", c)
	}
}

// A commit the store refuses changes nothing, and the locks stay held.
func TestTxnCommitStorageFailure(t *testing.T) {
	env, fs := coretest.NewFault(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "in"})
	env.MustSend(t, "in", coretest.Text("a"))
	m := env.MustReceive(t, "in", core.PeekLock, 1)[0]
	tx := env.Broker.BeginTxn()
	must(t, tx.Settle("in", m.LockToken, core.Outcome{Kind: core.DeadLetter}))
	must(t, tx.Send("in", "", []*core.Message{coretest.Text("b")}))
	fault := errors.New("disk on fire")
	fs.FailApplies(0, 1, fault)
	if err := tx.Commit(); !errors.Is(err, fault) {
		t.Fatalf("commit on a failing store: %v", err)
	}
	fs.Heal()
	if c := env.MustCounts(t, "in"); c.Active != 1 || c.DeadLetter != 0 {
		t.Fatalf("after a failed commit: %+v", c)
	}
	env.MustSettle(t, "in", m.LockToken, core.Outcome{Kind: core.Complete})
	mustCheck(t, env, t.Name())
}

// One complete and one send commit with one synced store write.
func TestTxnCommitIsOneSyncedWrite(t *testing.T) {
	env, cs := coretest.NewCounting(t)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "in"})
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "out"})
	env.MustSend(t, "in", coretest.Text("a"))
	m := env.MustReceive(t, "in", core.PeekLock, 1)[0]
	tx := env.Broker.BeginTxn()
	must(t, tx.Settle("in", m.LockToken, core.Outcome{Kind: core.Complete}))
	must(t, tx.Send("out", "in", []*core.Message{coretest.Text("b")}))
	applies, syncs := cs.Applies.Load(), cs.Syncs.Load()
	must(t, tx.Commit())
	if a, s := cs.Applies.Load()-applies, cs.Syncs.Load()-syncs; a != 1 || s != 1 {
		t.Fatalf("commit made %d writes, %d synced; want 1 and 1", a, s)
	}
}

// A restart after the commit finds all of it; one before finds none.
func TestTxnDurability(t *testing.T) {
	env := txnEnv(t)
	env.MustSend(t, "in", coretest.Text("a"), coretest.Text("b"))
	ms := env.MustReceive(t, "in", core.PeekLock, 2)

	lost := env.Broker.BeginTxn()
	must(t, lost.Settle("in", ms[0].LockToken, core.Outcome{Kind: core.Complete}))
	must(t, lost.Send("out", "in", []*core.Message{coretest.Text("lost")}))
	kept := env.Broker.BeginTxn()
	must(t, kept.Settle("in", ms[1].LockToken, core.Outcome{Kind: core.Complete}))
	must(t, kept.Send("out", "in", []*core.Message{coretest.Text("kept")}))
	must(t, kept.Commit())
	env.Restart(t) // lost was never committed

	if got := env.MustReceive(t, "out", core.PeekLock, 10); len(got) != 1 || string(got[0].Body) != "kept" {
		t.Fatalf("out after restart: %v, want [kept]", coretest.Bodies(got))
	}
	if got := env.MustReceive(t, "in", core.PeekLock, 10); len(got) != 1 || string(got[0].Body) != "a" {
		t.Fatalf("in after restart: %v, want [a]", coretest.Bodies(got))
	}
	mustCheck(t, env, t.Name())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
