package app

import (
	"testing"

	"github.com/omnibusmq/omnibus/core"
)

// TestClusterTransferTxnSendVia: with three data groups, a transaction
// that completes a message of queue A and sends via A to queue B of
// another group (Service Bus's send-via) commits both: the completion,
// and B gets the message once, by transfer after the commit. A rolled
// back one does neither. The transaction is a routed broker's on a node
// that does not lead A's group (so it runs through the cluster's calls);
// the messages are read back with the Go SDK.
func TestClusterTransferTxnSendVia(t *testing.T) {
	tc := startTransferCluster(t, nil)
	if _, err := tc.adm.CreateQueue(tc.ctx, "tvb", nil); err != nil {
		t.Fatal(err)
	}
	a := tc.queueOutside("tva", "tvb", nil)
	ga := tc.group(a)
	node := ga%3 + 1 // a node that does not lead a's group
	b := routedBroker(t, tc.nodes[node])

	tc.send(a, "in-1", "in-2")
	lock := func() *core.Message {
		t.Helper()
		got, err := b.Receive(tc.ctx, a, core.ReceiveOptions{Mode: core.PeekLock, Max: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("peek-lock from %s: %d messages, %v", a, len(got), err)
		}
		return got[0]
	}
	out := func(body string) []*core.Message {
		return []*core.Message{{MessageID: body, Body: []byte(body)}}
	}

	// Rolled back: nothing sent, the completion undone (the message is
	// delivered again once abandoned).
	m := lock()
	tx := b.BeginTxn()
	if err := tx.Settle(a, m.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Send("tvb", a, out("rolled-back")); err != nil {
		t.Fatalf("send via %s (group %d) to tvb (group %d) in a transaction: %v", a, ga, tc.group("tvb"), err)
	}
	tx.Rollback()
	if err := b.Settle(tc.ctx, a, m.LockToken, core.Outcome{Kind: core.Abandon}); err != nil {
		t.Fatalf("abandon after the rollback: %v", err)
	}

	// Committed: both.
	m = lock()
	tx = b.BeginTxn()
	if err := tx.Settle(a, m.LockToken, core.Outcome{Kind: core.Complete}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Send("tvb", a, out("committed")); err != nil {
		t.Fatalf("send via %s to tvb in a transaction: %v", a, err)
	}
	if c, err := b.Counts("tvb"); err != nil || c.Total != 0 {
		t.Fatalf("tvb before the commit: %+v, %v; want nothing", c, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}

	inOrder(t, "tvb", tc.receiveAll("tvb", 1), []string{"committed"})
	// Of a's two messages one was completed by the commit; the rolled
	// back completion left the other.
	left := tc.receiveAll(a, 1)
	if body := string(left[0].Body); body != "in-1" && body != "in-2" {
		t.Fatalf("%s holds %q", a, body)
	}
	tc.noneLeft(a)
}
