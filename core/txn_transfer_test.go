package core_test

import (
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestTxnSendViaOtherGroup: a transaction's send via a queue of this
// group to a queue of another group goes into the outbox with the
// commit, and not at all on a rollback or a commit the outbox's bound
// refuses; what the destination refuses is dead-lettered in the via
// queue. A topic as via, or a destination placed nowhere, is refused at
// the send, each with its own error.
func TestTxnSendViaOtherGroup(t *testing.T) {
	place := map[string]uint64{"near": 1, "tp": 1, "far": 2}
	src := newGroupBroker(t, 1, place, core.TransferConfig{MaxOutbox: 2})
	dst := newGroupBroker(t, 2, place, core.TransferConfig{})
	ctx := t.Context()
	for _, e := range []core.Entity{{Kind: core.KindQueue, Name: "near"}, {Kind: core.KindTopic, Name: "tp"}} {
		if _, err := src.b.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	outbox := func() string {
		t.Helper()
		ts, err := src.b.PendingTransfers(2, 100, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return bodiesOf(ts)
	}

	tx := src.b.BeginTxn()
	if err := tx.Send("far", "near", []*core.Message{coretest.Text("rolled")}); err != nil {
		t.Fatalf("send via near to far (group 2): %v", err)
	}
	tx.Rollback()
	if got := outbox(); got != "" {
		t.Fatalf("outbox after a rollback: %q", got)
	}

	tx = src.b.BeginTxn()
	if err := tx.Send("far", "near", []*core.Message{coretest.Text("a"), coretest.Text("b"), coretest.Text("c")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); core.CodeOf(err) != core.CodeServerBusy {
		t.Fatalf("a commit past the outbox's bound (2): %v, want server busy", err)
	}
	if got := outbox(); got != "" {
		t.Fatalf("outbox after a refused commit: %q", got)
	}

	tx = src.b.BeginTxn()
	if err := tx.Send("far", "near", []*core.Message{coretest.Text("x")}); err != nil {
		t.Fatal(err)
	}
	if got := outbox(); got != "" {
		t.Fatalf("outbox before the commit: %q", got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	ts, _ := src.b.PendingTransfers(2, 100, 1<<20)
	if bodiesOf(ts) != "x" || ts[0].Target != "far" {
		t.Fatalf("outbox after the commit: %q", bodiesOf(ts))
	}
	n, err := dst.b.ApplyTransfers(ctx, ts) // far was never created there
	if n != 0 || core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("apply to a missing far: %d, %v", n, err)
	}
	if err := src.b.TransferRefused(ts[0], err); err != nil {
		t.Fatal(err)
	}
	got, err := src.b.Receive(ctx, "near/$deadletterqueue", core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 1})
	if err != nil || len(got) != 1 || string(got[0].Body) != "x" {
		t.Fatalf("near's dead letters: %v %v", got, err)
	}

	tx = src.b.BeginTxn()
	err = tx.Send("far", "tp", []*core.Message{coretest.Text("t")})
	if core.CodeOf(err) != core.CodeBadRequest || !strings.Contains(err.Error(), "another data group (2)") {
		t.Fatalf("send via topic tp to far: %v, want a bad request naming the other group", err)
	}
	tx = src.b.BeginTxn()
	if err := tx.Send("nowhere", "near", []*core.Message{coretest.Text("n")}); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("send via near to an entity placed nowhere: %v, want not found", err)
	}
}
