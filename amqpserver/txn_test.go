package amqpserver

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
)

// Frame-level replays of what the .NET SDK (Azure.Messaging.ServiceBus
// over Microsoft.Azure.Amqp) sends for transactions, read from their
// source: each link on its own session; the transaction controller is a
// sender link named by a GUID, source {address: the same GUID,
// distribution-mode: move}, target coordinator with no capabilities,
// delivery tags an 8-byte little-endian counter; declare and discharge
// are amqp-value bodies; sends carry transactional-state{txn-id} on the
// transfer, settlements transactional-state{txn-id, outcome} on an
// unsettled disposition, and each waits for the server's disposition.
// With EnableCrossEntityTransactions every link shares one session whose
// first link is a controller (and a second controller follows).

// dotnetPeer is a raw client speaking as the .NET SDK does.
type dotnetPeer struct {
	*rawPeer
	tag uint64 // the controller's delivery-tag counter
	// next delivery id per channel
	nextID map[uint16]uint32
}

func (ts *testServer) dotnetDial(t *testing.T) *dotnetPeer {
	p := &dotnetPeer{rawPeer: ts.rawDial(t), nextID: map[uint16]uint32{}}
	p.nc.SetDeadline(time.Now().Add(30 * time.Second))
	p.open()
	return p
}

// begin begins a session on ch.
func (p *dotnetPeer) begin(ch uint16) {
	p.t.Helper()
	p.writeFrame(ch, &frames.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 255})
	p.until(func(b frames.Body) bool { _, ok := b.(*frames.Begin); return ok })
}

// until reads frames until f accepts one, and returns it.
func (p *dotnetPeer) until(f func(frames.Body) bool) frames.Body {
	p.t.Helper()
	for {
		if b := p.readFrame(); f(b) {
			return b
		}
	}
}

// attachController attaches a controller as Microsoft.Azure.Amqp's
// Controller does, and returns the server's attach.
func (p *dotnetPeer) attachController(ch uint16, h uint32) *frames.Attach {
	p.t.Helper()
	name := strings.ReplaceAll(fmt.Sprintf("%032x", time.Now().UnixNano()+int64(h)), " ", "0")
	p.writeFrame(ch, &frames.Attach{Name: name, Handle: h, Role: frames.RoleSender,
		Source:      &frames.Source{Address: name, DistributionMode: "move"},
		Coordinator: &frames.Coordinator{}, InitialDeliveryCount: u32(0)})
	return p.attached(ch, h)
}

// attached reads the server's attach for handle h and the credit that
// follows for a sender.
func (p *dotnetPeer) attached(ch uint16, h uint32) *frames.Attach {
	p.t.Helper()
	a := p.until(func(b frames.Body) bool { a, ok := b.(*frames.Attach); return ok && a.Handle == h }).(*frames.Attach)
	if a.Role == frames.RoleReceiver && a.Target == nil && a.Coordinator == nil {
		d := p.until(func(b frames.Body) bool { _, ok := b.(*frames.Detach); return ok }).(*frames.Detach)
		p.t.Fatalf("attach of handle %d refused: %v", h, d.Error)
	}
	return a
}

func u32(v uint32) *uint32 { return &v }

// transfer sends one single-frame delivery on handle h and returns its id.
func (p *dotnetPeer) transfer(ch uint16, h uint32, state frames.DeliveryState, m *frames.Message) uint32 {
	p.t.Helper()
	var b buffer.Buffer
	if err := m.MarshalAMQP(&b); err != nil {
		p.t.Fatal(err)
	}
	id := p.nextID[ch]
	p.nextID[ch]++
	p.tag++
	p.writeFrame(ch, &frames.Transfer{Handle: h, DeliveryID: &id, DeliveryTag: binary.LittleEndian.AppendUint64(nil, p.tag),
		MessageFormat: u32(0), State: state, Payload: b.Bytes()})
	return id
}

// answer reads the server's disposition of our delivery id.
func (p *dotnetPeer) answer(id uint32) *frames.Disposition {
	p.t.Helper()
	return p.until(func(b frames.Body) bool {
		d, ok := b.(*frames.Disposition)
		if !ok || d.Role != frames.RoleReceiver {
			return false
		}
		last := d.First
		if d.Last != nil {
			last = *d.Last
		}
		return d.First <= id && id <= last
	}).(*frames.Disposition)
}

// declare declares a transaction on the controller at (ch, h).
func (p *dotnetPeer) declare(ch uint16, h uint32) []byte {
	p.t.Helper()
	id := p.transfer(ch, h, nil, &frames.Message{Value: encoding.Described{Descriptor: uint64(0x31), Value: []any{}}})
	d := p.answer(id)
	dec, ok := d.State.(*frames.Declared)
	if !ok || !d.Settled || len(dec.TxnID) == 0 {
		p.t.Fatalf("declare answered with %+v (state %T %+v)", d, d.State, d.State)
	}
	return dec.TxnID
}

// discharge discharges txn and returns the server's outcome.
func (p *dotnetPeer) discharge(ch uint16, h uint32, txn []byte, fail bool) frames.DeliveryState {
	p.t.Helper()
	id := p.transfer(ch, h, nil, &frames.Message{Value: encoding.Described{Descriptor: uint64(0x32), Value: []any{txn, fail}}})
	return p.answer(id).State
}

// attachSender attaches a sender to entity as the SDK does (address with
// a leading slash, source a GUID).
func (p *dotnetPeer) attachSender(ch uint16, h uint32, entity string, props encoding.Map) *frames.Attach {
	p.t.Helper()
	p.writeFrame(ch, &frames.Attach{Name: fmt.Sprintf("sender-%d", h), Handle: h, Role: frames.RoleSender,
		Source: &frames.Source{Address: fmt.Sprintf("src-%d", h)}, Target: &frames.Target{Address: "/" + entity},
		InitialDeliveryCount: u32(0), Properties: props})
	return p.attached(ch, h)
}

// attachReceiver attaches a peek-lock receiver and grants credit.
func (p *dotnetPeer) attachReceiver(ch uint16, h uint32, entity string, credit uint32) {
	p.t.Helper()
	p.writeFrame(ch, &frames.Attach{Name: fmt.Sprintf("receiver-%d", h), Handle: h, Role: frames.RoleReceiver,
		RcvSettleMode: ptrRcv(frames.ReceiverSettleModeSecond),
		Source:        &frames.Source{Address: "/" + entity}, Target: &frames.Target{Address: fmt.Sprintf("tgt-%d", h)}})
	p.attached(ch, h)
	p.writeFrame(ch, creditFlow(h, 0, credit))
}

func ptrRcv(m frames.ReceiverSettleMode) *frames.ReceiverSettleMode { return &m }

// received reads the next message transfer on handle h.
func (p *dotnetPeer) received(h uint32) *frames.Transfer {
	p.t.Helper()
	return p.until(func(b frames.Body) bool { tr, ok := b.(*frames.Transfer); return ok && tr.Handle == h }).(*frames.Transfer)
}

// settleInTxn settles delivery id with outcome inside txn, unsettled, and
// returns the server's answer.
func (p *dotnetPeer) settleInTxn(ch uint16, id uint32, txn []byte, outcome frames.DeliveryState) *frames.Disposition {
	p.t.Helper()
	return p.settle(ch, id, &frames.TransactionalState{TxnID: txn, Outcome: outcome})
}

// settle sends an unsettled disposition of received delivery id with
// state and returns the server's answer to it.
func (p *dotnetPeer) settle(ch uint16, id uint32, state frames.DeliveryState) *frames.Disposition {
	p.t.Helper()
	p.writeFrame(ch, &frames.Disposition{Role: frames.RoleReceiver, First: id, State: state})
	return p.until(func(b frames.Body) bool {
		d, ok := b.(*frames.Disposition)
		return ok && d.Role == frames.RoleSender && d.First == id
	}).(*frames.Disposition)
}

func text(s string) *frames.Message { return &frames.Message{Data: [][]byte{[]byte(s)}} }

// txnAccepted reports whether st is transactional-state{txn, accepted}.
func txnAccepted(st frames.DeliveryState, txn []byte) bool {
	ts, ok := st.(*frames.TransactionalState)
	if !ok || string(ts.TxnID) != string(txn) {
		return false
	}
	_, ok = ts.Outcome.(*frames.Accepted)
	return ok
}

// The exactly-once step as .NET does it: complete the input and send the
// output in one transaction, each link on its own session. Nothing shows
// before the discharge; everything after.
func TestTxnDotnetCompleteAndSend(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			ts := newTestServer(t, nil)
			ts.MustSend(t, "q", coretest.Text("input"))
			p := ts.dotnetDial(t)
			p.begin(0)
			p.attachSender(0, 0, "q", nil)
			p.begin(1)
			p.attachReceiver(1, 0, "q", 1)
			in := p.received(0)
			p.begin(2)
			if a := p.attachController(2, 0); a.Coordinator == nil || len(a.Coordinator.Capabilities) == 0 || a.Coordinator.Capabilities[0] != "amqp:local-transactions" {
				t.Fatalf("the coordinator's attach: %+v", a)
			}
			txn := p.declare(2, 0)
			if !strings.HasPrefix(string(txn), "txn:") {
				t.Errorf("txn-id %q is not written as Service Bus writes its own", txn)
			}

			if d := p.settleInTxn(1, *in.DeliveryID, txn, &frames.Accepted{}); !d.Settled || !txnAccepted(d.State, txn) {
				t.Fatalf("transactional complete answered with %+v %+v", d, d.State)
			}
			id := p.transfer(0, 0, &frames.TransactionalState{TxnID: txn}, text("output"))
			if d := p.answer(id); !txnAccepted(d.State, txn) {
				t.Fatalf("transactional send answered with %+v %+v", d, d.State)
			}
			if got := ts.MustReceive(t, "q", core.PeekLock, 10); len(got) != 0 {
				t.Fatalf("before the discharge a receiver got %v", coretest.Bodies(got))
			}
			st := p.discharge(2, 0, txn, !commit)
			if _, ok := st.(*frames.Accepted); !ok {
				t.Fatalf("discharge answered with %T %+v", st, st)
			}
			got := coretest.Bodies(ts.MustReceive(t, "q", core.PeekLock, 10))
			switch {
			case commit && (len(got) != 1 || got[0] != "output"):
				t.Fatalf("after the commit: %v, want [output]", got)
			case !commit && len(got) != 0:
				t.Fatalf("after the rollback: %v, want nothing (the input stays locked)", got)
			}
			if err := ts.Broker.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Without EnableCrossEntityTransactions a transaction that completes on
// one queue and sends to another is refused as Service Bus refuses it;
// with it (one session, a controller first), the send goes through the
// first entity and commits with the rest.
func TestTxnDotnetCrossEntity(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "out"})
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "other"})
	ts.MustSend(t, "q", coretest.Text("a"), coretest.Text("b"))

	// Separate sessions: refused.
	p := ts.dotnetDial(t)
	p.begin(0)
	p.attachReceiver(0, 0, "q", 1)
	in := p.received(0)
	p.begin(1)
	p.attachSender(1, 0, "out", nil)
	p.begin(2)
	p.attachController(2, 0)
	txn := p.declare(2, 0)
	if d := p.settleInTxn(0, *in.DeliveryID, txn, &frames.Accepted{}); !txnAccepted(d.State, txn) {
		t.Fatalf("complete: %+v", d.State)
	}
	id := p.transfer(1, 0, &frames.TransactionalState{TxnID: txn}, text("x"))
	rej, ok := p.answer(id).State.(*frames.Rejected)
	if !ok || rej.Error == nil || rej.Error.Condition != frames.CondNotAllowed ||
		rej.Error.Description != "Local transactions cannot span multiple top-level entities such as queue or topic." {
		t.Fatalf("send to a second entity: %+v", rej)
	}
	if _, ok := p.discharge(2, 0, txn, true).(*frames.Accepted); !ok {
		t.Fatal("rollback refused")
	}

	// One session, a controller first, then a second one, as the SDK does.
	p = ts.dotnetDial(t)
	p.begin(0)
	p.attachController(0, 0)
	p.attachController(0, 1)
	p.attachReceiver(0, 2, "q", 1)
	in = p.received(2)
	p.attachSender(0, 3, "out", nil)
	// A receiver on another entity cannot join the session.
	p.writeFrame(0, &frames.Attach{Name: "r-other", Handle: 4, Role: frames.RoleReceiver,
		Source: &frames.Source{Address: "/other"}, Target: &frames.Target{Address: "t"}})
	d := p.until(func(b frames.Body) bool { d, ok := b.(*frames.Detach); return ok && d.Handle == 4 }).(*frames.Detach)
	if d.Error == nil || d.Error.Condition != frames.CondNotAllowed {
		t.Fatalf("receiver on another entity: %+v", d.Error)
	}
	txn = p.declare(0, 1)
	if d := p.settleInTxn(0, *in.DeliveryID, txn, &frames.Accepted{}); !txnAccepted(d.State, txn) {
		t.Fatalf("complete: %+v", d.State)
	}
	id = p.transfer(0, 3, &frames.TransactionalState{TxnID: txn}, text("to out"))
	if d := p.answer(id); !txnAccepted(d.State, txn) {
		t.Fatalf("send through the session's entity: %+v", d.State)
	}
	if c := ts.MustCounts(t, "out"); c.Total != 0 {
		t.Fatalf("before the commit: %+v", c)
	}
	if _, ok := p.discharge(0, 1, txn, false).(*frames.Accepted); !ok {
		t.Fatal("commit refused")
	}
	if got := coretest.Bodies(ts.MustReceive(t, "out", core.PeekLock, 10)); len(got) != 1 || got[0] != "to out" {
		t.Fatalf("out after the commit: %v", got)
	}
	if c := ts.MustCounts(t, "q"); c.Total != 1 {
		t.Fatalf("q after the commit: %+v, want the one message not received", c)
	}
}

// Send-via: a sender attached to one entity with
// com.microsoft:transfer-destination-address stores into the other, in
// and out of transactions; the property is echoed.
func TestTxnSendVia(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "dest"})
	ts.MustSend(t, "q", coretest.Text("input"))
	p := ts.dotnetDial(t)
	p.begin(0)
	p.attachReceiver(0, 0, "q", 1)
	in := p.received(0)
	a := p.attachSender(0, 1, "q", encoding.Map{{Key: propTransferDestination, Value: "dest"}})
	if v, _ := mapField(a.Properties, string(propTransferDestination)); v != "dest" {
		t.Fatalf("the send-via property is not echoed: %+v", a.Properties)
	}
	p.attachController(0, 2)
	txn := p.declare(0, 2)
	p.settleInTxn(0, *in.DeliveryID, txn, &frames.Accepted{})
	p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: txn}, text("in txn")))
	p.answer(p.transfer(0, 1, nil, text("plain")))
	if got := coretest.Bodies(ts.MustReceive(t, "dest", core.PeekLock, 10)); len(got) != 1 || got[0] != "plain" {
		t.Fatalf("dest before the commit: %v, want [plain]", got)
	}
	if _, ok := p.discharge(0, 2, txn, false).(*frames.Accepted); !ok {
		t.Fatal("commit refused")
	}
	if got := coretest.Bodies(ts.MustReceive(t, "dest", core.PeekLock, 10)); len(got) != 1 || got[0] != "in txn" {
		t.Fatalf("dest after the commit: %v, want [in txn]", got)
	}
	if c := ts.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("q: %+v", c)
	}

	// A destination that does not exist is refused at attach.
	p.writeFrame(0, &frames.Attach{Name: "bad-via", Handle: 5, Role: frames.RoleSender, Source: &frames.Source{},
		Target: &frames.Target{Address: "q"}, Properties: encoding.Map{{Key: propTransferDestination, Value: "nowhere"}}})
	d := p.until(func(b frames.Body) bool { d, ok := b.(*frames.Detach); return ok && d.Handle == 5 }).(*frames.Detach)
	if d.Error == nil || d.Error.Condition != frames.CondNotFound {
		t.Fatalf("send-via to a missing entity: %+v", d.Error)
	}
}

// Discharge errors: an unknown id, a commit whose lock was lost meanwhile,
// a transaction that timed out.
func TestTxnDischargeErrors(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {})
	ts.MustSend(t, "q", coretest.Text("a"))
	p := ts.dotnetDial(t)
	p.begin(0)
	p.attachController(0, 0)
	st := p.discharge(0, 0, []byte("txn:unknown"), false)
	if r, ok := st.(*frames.Rejected); !ok || r.Error == nil || r.Error.Condition != condTxnUnknownID {
		t.Fatalf("unknown txn-id: %+v", st)
	}

	p.attachReceiver(0, 1, "q", 1)
	in := p.received(1)
	txn := p.declare(0, 0)
	p.settleInTxn(0, *in.DeliveryID, txn, &frames.Accepted{})
	// The lock is settled outside the transaction before the commit.
	p.writeFrame(0, &frames.Disposition{Role: frames.RoleReceiver, First: *in.DeliveryID, Settled: true, State: &frames.Released{}})
	waitFor(t, "the released message", 10*time.Second, func() bool { return len(ts.MustReceive(t, "q", core.PeekLock, 1)) == 1 })
	st = p.discharge(0, 0, txn, false)
	r, ok := st.(*frames.Rejected)
	if !ok || r.Error == nil || r.Error.Condition != condTxnRollback || !strings.Contains(r.Error.Description, "lock") {
		t.Fatalf("commit with a lost lock: %+v %+v", st, r)
	}
	// The discharged id is gone.
	if r, ok := p.discharge(0, 0, txn, false).(*frames.Rejected); !ok || r.Error.Condition != condTxnUnknownID {
		t.Fatalf("second discharge: %+v", r)
	}
}

// A transaction whose timeout passed is rolled back: its discharge is
// answered amqp:transaction:timeout and nothing of it is stored.
func TestTxnTimeoutDischarge(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.dotnetDial(t)
	p.begin(0)
	p.attachController(0, 0)
	p.attachSender(0, 1, "q", nil)
	txn := p.declare(0, 0)
	p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: txn}, text("late")))
	ts.Clock.Advance(core.DefaultTxnTimeout)
	id := p.transfer(0, 1, &frames.TransactionalState{TxnID: txn}, text("too late"))
	if r, ok := p.answer(id).State.(*frames.Rejected); !ok || r.Error == nil || r.Error.Condition != frames.CondNotAllowed ||
		!strings.Contains(r.Error.Description, "The server Transaction timeout is: 00:02:00.") {
		t.Fatalf("a send after the timeout: %+v", r)
	}
	st := p.discharge(0, 0, txn, false)
	if r, ok := st.(*frames.Rejected); !ok || r.Error == nil || r.Error.Condition != condTxnTimeout {
		t.Fatalf("commit after the timeout: %+v", st)
	}
	if c := ts.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("a timed-out transaction stored messages: %+v", c)
	}
}

// The bounds: Service Bus's 100 messages per transaction, transactions
// per connection, bytes held by a connection's transactions.
func TestTxnLimits(t *testing.T) {
	ts := newTestServer(t, func(c *Config) {
		c.Limits.MaxTransactionsPerConnection = 2
		c.Limits.MaxTransactionBytes = 40 << 10
		c.MaxMessageSize = 32 << 10
	})
	p := ts.dotnetDial(t)
	p.begin(0)
	p.attachController(0, 0)
	p.attachSender(0, 1, "q", nil)
	txn := p.declare(0, 0)
	for i := range core.MaxTxnMessages {
		if d := p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: txn}, text(fmt.Sprint(i)))); !txnAccepted(d.State, txn) {
			t.Fatalf("send %d: %+v", i, d.State)
		}
	}
	r, ok := p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: txn}, text("101"))).State.(*frames.Rejected)
	if !ok || r.Error == nil || r.Error.Condition != frames.CondResourceLimitExceeded ||
		r.Error.Description != "Cannot send more than 100 messages in a single transaction." {
		t.Fatalf("the 101st message: %+v", r)
	}
	second := p.declare(0, 0)
	id := p.transfer(0, 0, nil, &frames.Message{Value: encoding.Described{Descriptor: encoding.Symbol("amqp:declare:list"), Value: []any{nil}}})
	if r, ok := p.answer(id).State.(*frames.Rejected); !ok || r.Error == nil || r.Error.Condition != frames.CondResourceLimitExceeded {
		t.Fatalf("a third transaction: %+v", r)
	}
	big := &frames.Message{Data: [][]byte{make([]byte, 30<<10)}}
	p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: second}, big))
	r, ok = p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: second}, big)).State.(*frames.Rejected)
	if !ok || r.Error == nil || r.Error.Condition != frames.CondResourceLimitExceeded {
		t.Fatalf("beyond the transaction bytes: %+v", r)
	}
	// Rolling the second back releases its bytes: a new one may send again.
	if _, ok := p.discharge(0, 0, second, true).(*frames.Accepted); !ok {
		t.Fatal("rollback refused")
	}
	third := p.declare(0, 0)
	if d := p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: third}, big)); !txnAccepted(d.State, third) {
		t.Fatalf("after the rollback: %+v", d.State)
	}
	// The refused 101st message doomed the first transaction (see
	// txnOpError): its commit fails and stores none of the 100.
	st := p.discharge(0, 0, txn, false)
	if r, ok := st.(*frames.Rejected); !ok || r.Error == nil || r.Error.Condition != condTxnRollback ||
		!strings.Contains(r.Error.Description, "Cannot send more than 100 messages") {
		t.Fatalf("commit after a refused send: %+v, want amqp:transaction:rollback naming the refusal", st)
	}
	if c := ts.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("after the failed commit: %+v", c)
	}
}

// declaredOnInput sets up what several transaction tests start from: a
// queue q holding one message, a .NET-style connection with a coordinator
// (handle 0), a sender (1) and a receiver (2) on one session, the message
// received and a transaction declared.
func declaredOnInput(t *testing.T) (*testServer, *dotnetPeer, *frames.Transfer, []byte) {
	t.Helper()
	ts := newTestServer(t, nil)
	ts.MustSend(t, "q", coretest.Text("input"))
	p := ts.dotnetDial(t)
	p.begin(0)
	p.attachController(0, 0)
	p.attachSender(0, 1, "q", nil)
	p.attachReceiver(0, 2, "q", 1)
	in := p.received(2)
	return ts, p, in, p.declare(0, 0)
}

// Detaching the coordinator, or closing the connection, rolls back what
// it declared: the connection holds nothing of it afterwards.
func TestTxnCoordinatorGoneRollsBack(t *testing.T) {
	ts, p, in, txn := declaredOnInput(t)
	p.settleInTxn(0, *in.DeliveryID, txn, &frames.Accepted{})
	p.answer(p.transfer(0, 1, &frames.TransactionalState{TxnID: txn}, text("x")))
	ts.waitFor(t, "the transaction", func(c *conn) bool { return len(c.txns) == 1 && c.txnBytes > 0 })
	p.writeFrame(0, &frames.Detach{Handle: 0, Closed: true})
	p.until(func(b frames.Body) bool { d, ok := b.(*frames.Detach); return ok && d.Handle == 0 })
	ts.waitFor(t, "the rollback", func(c *conn) bool { return len(c.txns) == 0 && c.txnBytes == 0 })
	// The message stays locked by the receiver, which may settle it again.
	p.writeFrame(0, &frames.Disposition{Role: frames.RoleReceiver, First: *in.DeliveryID, Settled: true, State: &frames.Accepted{}})
	waitFor(t, "the plain complete", 10*time.Second, func() bool { return ts.MustCounts(t, "q").Total == 0 })
}

// update-disposition and renew-lock on $management run inside the
// transaction the request's transfer names.
func TestTxnManagement(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustSend(t, "q", coretest.Text("deferred"))
	m := ts.MustReceive(t, "q", core.PeekLock, 1)[0]
	ts.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.Defer})
	got, err := ts.Broker.ReceiveDeferred(t.Context(), "q", core.PeekLock, []int64{m.SequenceNumber})
	if err != nil {
		t.Fatal(err)
	}
	tok := got[0].LockToken

	p := ts.dotnetDial(t)
	p.attachTxnManagement("q")
	txn := p.declare(0, 0)
	call := func(op string, body encoding.Map, txnID []byte) *frames.Message {
		t.Helper()
		p.mgmtRequest(op, body, txnID)
		return p.reply(p.received(2))
	}
	toks := lockTokens(tok)
	if r := call(opRenewLock, encoding.Map{{Key: "lock-tokens", Value: toks}}, txn); status(r) != int32(200) {
		t.Fatalf("renew-lock in the transaction: %+v", r.ApplicationProperties)
	}
	if r := call(opUpdateDisposition, encoding.Map{{Key: "lock-tokens", Value: toks}, {Key: "disposition-status", Value: "completed"}}, txn); status(r) != int32(200) {
		t.Fatalf("update-disposition in the transaction: %+v", r.ApplicationProperties)
	}
	if c := ts.MustCounts(t, "q"); c.Deferred != 1 {
		t.Fatalf("before the commit: %+v", c)
	}
	if r := call(opUpdateDisposition, encoding.Map{{Key: "lock-tokens", Value: toks}, {Key: "disposition-status", Value: "completed"}}, []byte("txn:nope")); status(r) != int32(400) {
		t.Fatalf("update-disposition in an unknown transaction: %+v", r.ApplicationProperties)
	}
	if _, ok := p.discharge(0, 0, txn, false).(*frames.Accepted); !ok {
		t.Fatal("commit refused")
	}
	if c := ts.MustCounts(t, "q"); c.Total != 0 {
		t.Fatalf("after the commit: %+v", c)
	}
}

// attachTxnManagement begins session 0 with a controller (handle 0), a
// request link to entity's $management (1) and its reply link (2).
func (p *dotnetPeer) attachTxnManagement(entity string) {
	p.t.Helper()
	p.begin(0)
	p.attachController(0, 0)
	p.writeFrame(0, &frames.Attach{Name: "mgmt-req", Handle: 1, Role: frames.RoleSender, Source: &frames.Source{Address: "c"},
		Target: &frames.Target{Address: entity + "/$management"}, InitialDeliveryCount: u32(0)})
	p.attached(0, 1)
	p.writeFrame(0, &frames.Attach{Name: "mgmt-reply", Handle: 2, Role: frames.RoleReceiver,
		Source: &frames.Source{Address: entity + "/$management"}, Target: &frames.Target{Address: "reply-to"}})
	p.attached(0, 2)
	p.writeFrame(0, creditFlow(2, 0, 1000))
}

// mgmtRequest sends a $management request on handle 1 (inside txnID
// unless nil), without waiting for its reply.
func (p *dotnetPeer) mgmtRequest(op string, body encoding.Map, txnID []byte) uint32 {
	p.t.Helper()
	var state frames.DeliveryState
	if txnID != nil {
		state = &frames.TransactionalState{TxnID: txnID}
	}
	return p.transfer(0, 1, state, &frames.Message{
		Properties:            &frames.MessageProperties{MessageID: "r", ReplyTo: "reply-to"},
		ApplicationProperties: encoding.Map{{Key: "operation", Value: op}},
		Value:                 body})
}

// reply decodes a $management reply.
func (p *dotnetPeer) reply(tr *frames.Transfer) *frames.Message {
	p.t.Helper()
	m, err := frames.UnmarshalMessage(tr.Payload)
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

func status(m *frames.Message) any { v, _ := m.ApplicationProperties.GetString("statusCode"); return v }

func lockTokens(toks ...core.LockToken) encoding.Array {
	a := encoding.Array{Type: encoding.TypeCodeUUID}
	for _, tok := range toks {
		a.Elems = append(a.Elems, encoding.UUID(tok))
	}
	return a
}

// A client that pipelines transactional $management operations and the
// discharge that commits them (writing all three before reading any
// answer) gets a commit that holds them: the discharge follows every
// request the connection received before it. Repeated, because which
// helper goroutine wins a race is chance.
func TestTxnDischargeFollowsPipelinedManagement(t *testing.T) {
	ts := newTestServer(t, nil)
	p := ts.dotnetDial(t)
	p.attachTxnManagement("q")
	for i := range 30 {
		ts.MustSend(t, "q", coretest.Text(fmt.Sprint("m", i)))
		m := ts.MustReceive(t, "q", core.PeekLock, 1)[0]
		ts.MustSettle(t, "q", m.LockToken, core.Outcome{Kind: core.Defer})
		got, err := ts.Broker.ReceiveDeferred(t.Context(), "q", core.PeekLock, []int64{m.SequenceNumber})
		if err != nil {
			t.Fatal(err)
		}
		toks := lockTokens(got[0].LockToken)
		txn := p.declare(0, 0)
		p.mgmtRequest(opRenewLock, encoding.Map{{Key: "lock-tokens", Value: toks}}, txn)
		p.mgmtRequest(opUpdateDisposition, encoding.Map{{Key: "lock-tokens", Value: toks}, {Key: "disposition-status", Value: "completed"}}, txn)
		discharge := p.transfer(0, 0, nil, &frames.Message{Value: encoding.Described{Descriptor: uint64(0x32), Value: []any{txn, false}}})
		var replies []*frames.Message
		var outcome frames.DeliveryState
		for len(replies) < 2 || outcome == nil {
			switch b := p.readFrame().(type) {
			case *frames.Transfer:
				if b.Handle == 2 {
					replies = append(replies, p.reply(b))
				}
			case *frames.Disposition:
				if b.Role == frames.RoleReceiver && b.First == discharge {
					outcome = b.State
				}
			}
		}
		for _, r := range replies {
			if status(r) != int32(200) {
				t.Fatalf("round %d: a $management operation pipelined before the commit: %+v", i, r.ApplicationProperties)
			}
		}
		if _, ok := outcome.(*frames.Accepted); !ok {
			t.Fatalf("round %d: the commit answered %T %+v", i, outcome, outcome)
		}
		if c := ts.MustCounts(t, "q"); c.Total != 0 {
			t.Fatalf("round %d: after the commit the queue holds %+v; want the message completed", i, c)
		}
	}
}
