package amqpserver

import (
	"testing"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// Bad input on a coordinator and in transactional states gets a clear
// rejection, and the connection, its other links and the transaction
// named correctly go on.
func TestTxnBadInput(t *testing.T) {
	ts, p, in, txn := declaredOnInput(t)

	rejected := func(what string, st frames.DeliveryState, cond encoding.Symbol) {
		t.Helper()
		r, ok := st.(*frames.Rejected)
		if !ok || r.Error == nil || r.Error.Condition != cond || r.Error.Description == "" {
			t.Fatalf("%s: answered %T %+v, want rejected with %s and a description", what, st, st, cond)
		}
	}
	for _, c := range []struct {
		what string
		msg  *frames.Message
		cond encoding.Symbol
	}{
		{"a data body", &frames.Message{Data: [][]byte{[]byte("declare")}}, frames.CondDecodeError},
		{"a string value", &frames.Message{Value: "declare"}, frames.CondDecodeError},
		{"an unknown descriptor", &frames.Message{Value: encoding.Described{Descriptor: uint64(0x99), Value: []any{}}}, frames.CondDecodeError},
		{"a declare with a global-id", &frames.Message{Value: encoding.Described{Descriptor: uint64(0x31), Value: []any{[]byte("xa")}}}, frames.CondNotImplemented},
		{"a discharge without fields", &frames.Message{Value: encoding.Described{Descriptor: uint64(0x32), Value: []any{}}}, condTxnUnknownID},
		{"a discharge whose txn-id is a string", &frames.Message{Value: encoding.Described{Descriptor: uint64(0x32), Value: []any{string(txn), false}}}, condTxnUnknownID},
	} {
		rejected(c.what, p.answer(p.transfer(0, 0, nil, c.msg)).State, c.cond)
	}
	// Transactional states naming no transaction.
	rejected("a send in an unknown transaction", p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: []byte("nope")}, text("x"))).State, frames.CondNotAllowed)
	d := p.settleInTxn(0, *in.DeliveryID, []byte("nope"), &frames.Accepted{})
	rejected("a complete in an unknown transaction", d.State, frames.CondNotAllowed)

	// The real transaction is untouched: it completes the input and commits.
	if d := p.settleInTxn(0, *in.DeliveryID, txn, &frames.Accepted{}); !txnAccepted(d.State, txn) {
		t.Fatalf("complete: %+v", d.State)
	}
	if _, ok := p.discharge(0, 0, txn, false).(*frames.Accepted); !ok {
		t.Fatal("commit refused")
	}
	if c := ts.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("after the commit: %+v", c)
	}
	if got := ts.MustReceive(t, "q", core.PeekLock, 1); len(got) != 0 {
		t.Fatalf("received %v", coretest.Bodies(got))
	}
}
