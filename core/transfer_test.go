package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// groupBroker is a broker that is data group g of a cluster whose other
// entities place says: name → group.
type groupBroker struct {
	b     *core.Broker
	store storage.Store
	clk   *clock.Fake
	cfg   core.TransferConfig
}

func newGroupBroker(t *testing.T, g uint64, place map[string]uint64, tc core.TransferConfig) *groupBroker {
	t.Helper()
	tc.Group = g
	tc.Locate = func(_ context.Context, name string) (uint64, error) { return place[strings.ToLower(name)], nil }
	gb := &groupBroker{store: memstore.New(), clk: clock.NewFake(coretest.Epoch), cfg: tc}
	gb.open(t)
	return gb
}

// open starts (or restarts) the broker on gb's store.
func (gb *groupBroker) open(t *testing.T) {
	t.Helper()
	if gb.b != nil {
		gb.b.Close()
	}
	b, err := core.New(core.Config{Store: gb.store, Clock: gb.clk, Transfers: gb.cfg})
	if err != nil {
		t.Fatal(err)
	}
	gb.b = b
	t.Cleanup(func() { b.Close() })
}

func bodiesOf(ts []*core.Transfer) string {
	var out []string
	for _, t := range ts {
		out = append(out, string(t.Message.Body))
	}
	return strings.Join(out, ",")
}

// TestTransferOutboxKeepsOrderAcrossRestarts: a queue forwarding to a
// queue of another group writes transfers to its outbox, in order; a
// restarted broker (a new leader) finds them, and numbers new ones
// after them.
func TestTransferOutboxKeepsOrderAcrossRestarts(t *testing.T) {
	place := map[string]uint64{"near": 1, "far": 2}
	src := newGroupBroker(t, 1, place, core.TransferConfig{})
	ctx := t.Context()
	if _, err := src.b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "near", ForwardTo: "far"}); err != nil {
		t.Fatalf("create near forwarding to far, in another group: %v", err)
	}
	for i := range 3 {
		if _, err := src.b.Send(ctx, "near", coretest.Text(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := src.b.PendingTransfers(2, 100, 1<<20)
	if err != nil || bodiesOf(ts) != "m0,m1,m2" {
		t.Fatalf("outbox: %q %v", bodiesOf(ts), err)
	}
	if c, _ := src.b.Counts("near"); c.Active != 0 {
		t.Errorf("near keeps %d messages", c.Active)
	}
	src.open(t)
	if _, err := src.b.Send(ctx, "near", coretest.Text("m3")); err != nil {
		t.Fatal(err)
	}
	ts, err = src.b.PendingTransfers(2, 100, 1<<20)
	if err != nil || bodiesOf(ts) != "m0,m1,m2,m3" {
		t.Fatalf("outbox after a restart and a send: %q %v", bodiesOf(ts), err)
	}
	if err := src.b.Transferred(ts[:2]); err != nil {
		t.Fatal(err)
	}
	src.open(t)
	ts, err = src.b.PendingTransfers(2, 100, 1<<20)
	if err != nil || bodiesOf(ts) != "m2,m3" {
		t.Fatalf("outbox after two were transferred and a restart: %q %v", bodiesOf(ts), err)
	}
}

// TestTransferAppliedOnce: transfers applied again (a re-send whose
// answer was lost, from the same or a new source leader, before or after
// the target restarted) enqueue nothing more; the ids are kept for the
// count bound only, the oldest forgotten first.
func TestTransferAppliedOnce(t *testing.T) {
	place := map[string]uint64{"near": 1, "far": 2}
	src := newGroupBroker(t, 1, place, core.TransferConfig{})
	dst := newGroupBroker(t, 2, place, core.TransferConfig{DedupCount: 4})
	ctx := t.Context()
	if _, err := dst.b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "far"}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "near", ForwardTo: "far"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := src.b.Send(ctx, "near", coretest.Text(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	pending := func() []*core.Transfer {
		ts, err := src.b.PendingTransfers(2, 100, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	apply := func(ts []*core.Transfer) {
		t.Helper()
		if n, err := dst.b.ApplyTransfers(ctx, ts); n != len(ts) || err != nil {
			t.Fatalf("apply %d transfers: %d, %v", len(ts), n, err)
		}
	}
	apply(pending()[:1])
	dst.clk.Advance(time.Second)
	apply(pending()[:2]) // the first again, and the second
	dst.clk.Advance(time.Second)
	apply(pending()) // the first two again, and the third
	if c, _ := dst.b.Counts("far"); c.Active != 3 {
		t.Fatalf("far holds %d messages after three transfers, two of them sent twice", c.Active)
	}
	dst.open(t) // the ids are durable
	apply(pending())
	if c, _ := dst.b.Counts("far"); c.Active != 3 {
		t.Fatalf("far holds %d messages after the three were sent again to a restarted target", c.Active)
	}
	// The bound: two more push the first out of the four ids kept.
	for i := 3; i < 5; i++ {
		if _, err := src.b.Send(ctx, "near", coretest.Text(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	all := pending()
	dst.clk.Advance(time.Second)
	apply(all[3:])
	apply(all[:1])
	if c, _ := dst.b.Counts("far"); c.Active != 6 {
		t.Fatalf("far holds %d messages, want 6: an id past the count bound is forgotten (documented)", c.Active)
	}
}

// TestTransferRefusedDeadLetters: a transfer its target refuses for good
// (the target is gone) is dead-lettered in its source with the reason,
// and leaves the outbox in that write.
func TestTransferRefusedDeadLetters(t *testing.T) {
	place := map[string]uint64{"near": 1, "far": 2}
	src := newGroupBroker(t, 1, place, core.TransferConfig{})
	dst := newGroupBroker(t, 2, place, core.TransferConfig{})
	ctx := t.Context()
	if _, err := src.b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "near", ForwardTo: "far"}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.b.Send(ctx, "near", coretest.Text("lost")); err != nil {
		t.Fatal(err)
	}
	ts, _ := src.b.PendingTransfers(2, 100, 1<<20)
	n, err := dst.b.ApplyTransfers(ctx, ts) // far was never created there
	if n != 0 || core.CodeOf(err) != core.CodeNotFound || core.TransferRetryable(err) {
		t.Fatalf("apply to a missing target: %d, %v", n, err)
	}
	if err := src.b.TransferRefused(ts[0], err); err != nil {
		t.Fatal(err)
	}
	if ts, _ := src.b.PendingTransfers(2, 100, 1<<20); len(ts) != 0 {
		t.Errorf("the outbox keeps %d transfers after the refusal", len(ts))
	}
	got, err := src.b.Receive(ctx, "near/$deadletterqueue", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 1})
	if err != nil || len(got) != 1 || string(got[0].Body) != "lost" {
		t.Fatalf("near's dead letters: %v %v", got, err)
	}
	if r := got[0].ApplicationProperties["DeadLetterReason"]; r != core.ReasonForwardNotFound {
		t.Errorf("reason %v, want %s", r, core.ReasonForwardNotFound)
	}
}

// TestTransferOutboxBound: past MaxOutbox, a send that would add to the
// outbox is refused as server busy and stores nothing; a dead-letter
// move is not refused.
func TestTransferOutboxBound(t *testing.T) {
	place := map[string]uint64{"near": 1, "far": 2}
	src := newGroupBroker(t, 1, place, core.TransferConfig{MaxOutbox: 2})
	ctx := t.Context()
	if _, err := src.b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "near", ForwardTo: "far"}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.b.CreateEntity(ctx, core.Entity{Kind: core.KindQueue, Name: "dl", ForwardDeadLetteredMessagesTo: "far", LockDuration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.b.Send(ctx, "near", coretest.Text("a"), coretest.Text("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := src.b.Send(ctx, "near", coretest.Text("c")); core.CodeOf(err) != core.CodeServerBusy {
		t.Fatalf("a send past the outbox's bound: %v, want server busy", err)
	}
	if _, err := src.b.Send(ctx, "dl", coretest.Text("d")); err != nil {
		t.Fatal(err)
	}
	got, err := src.b.Receive(ctx, "dl", core.ReceiveOptions{Mode: core.PeekLock, Max: 1})
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if err := src.b.Settle(ctx, "dl", got[0].LockToken, core.Outcome{Kind: core.DeadLetter}); err != nil {
		t.Fatalf("dead-letter with the outbox full: %v", err)
	}
	ts, _ := src.b.PendingTransfers(2, 100, 1<<20)
	if bodiesOf(ts) != "a,b,d" {
		t.Errorf("outbox %q, want a,b,d", bodiesOf(ts))
	}
}
