package amqpserver

import (
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// What the Java SDK does when a transaction reaches a second entity
// without send-via: it completes the input in the transaction, sends to
// the other entity on a link of its own session, and commits. The send
// is refused (not-allowed, "cannot span multiple top-level entities"),
// but the SDK hands that disposition to the caller as success
// (ReactorSender.processDeliveredMessage with a delivery state) and the
// application commits. The refusal dooms the transaction, as in Service
// Bus: later operations find no active transaction, and the commit is
// rejected with amqp:transaction:rollback, so the application learns
// that nothing happened, the input stays locked and nothing is lost.
func TestTxnRefusedOperationDoomsTheCommit(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "out"})
	ts.MustSend(t, "q", coretest.Text("input"))
	p := ts.dotnetDial(t)
	p.begin(0)
	p.attachReceiver(0, 0, "q", 1)
	in := p.received(0)
	p.begin(1)
	p.attachSender(1, 0, "out", nil)
	p.attachSender(1, 1, "q", nil)
	p.begin(2)
	p.attachController(2, 0)
	txn := p.declare(2, 0)
	if d := p.settleInTxn(0, *in.DeliveryID, txn, &frames.Accepted{}); !txnAccepted(d.State, txn) {
		t.Fatalf("complete: %+v", d.State)
	}
	rej, ok := p.answer(p.transfer(1, 0, &frames.TransactionalState{TxnID: txn}, text("output"))).State.(*frames.Rejected)
	if !ok || rej.Error == nil || rej.Error.Condition != frames.CondNotAllowed {
		t.Fatalf("send to a second entity: %+v", rej)
	}
	// A send to the transaction's own entity now finds it gone.
	rej, ok = p.answer(p.transfer(1, 1, &frames.TransactionalState{TxnID: txn}, text("same entity"))).State.(*frames.Rejected)
	if !ok || rej.Error == nil || rej.Error.Condition != frames.CondNotAllowed ||
		!strings.Contains(rej.Error.Description, "No active Transaction was found") {
		t.Fatalf("send after the refusal: %+v, want no active transaction", rej)
	}
	st := p.discharge(2, 0, txn, false)
	r, ok := st.(*frames.Rejected)
	if !ok || r.Error == nil || r.Error.Condition != condTxnRollback ||
		!strings.Contains(r.Error.Description, "cannot span multiple top-level entities") {
		t.Fatalf("commit: %+v, want amqp:transaction:rollback naming the refused send", st)
	}
	if cause, _ := mapField(r.Error.Info, "com.microsoft:cause"); cause != encoding.Symbol(frames.CondNotAllowed) {
		t.Fatalf("com.microsoft:cause = %v, want %s", cause, frames.CondNotAllowed)
	}
	if c := ts.MustCounts(t, "out"); c.Total != 0 {
		t.Fatalf("out: %+v, want nothing stored", c)
	}
	// The input was not completed: still locked by its receiver, which
	// completes it now, unsettled, so that the broker's settled answer
	// says the completion was applied (a presettled one is applied after
	// the connection's pass, on a helper goroutine: no round trip on
	// another session waits for it).
	if c := ts.MustCounts(t, "q"); c.Active != 1 {
		t.Fatalf("q: %+v, want the input still there", c)
	}
	d := p.settle(0, *in.DeliveryID, &frames.Accepted{})
	if _, ok := d.State.(*frames.Accepted); !ok || !d.Settled {
		t.Fatalf("completing the input outside the transaction: %+v, want settled accepted", d)
	}
	if c := ts.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("q after completing the input outside the transaction: %+v", c)
	}
}
