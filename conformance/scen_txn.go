package conformance

import (
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Transactions (seed: "Overview of transaction processing" and the AMQP
// protocol guide's "Transaction capability"), driven frame by frame as
// the .NET SDK drives them (scen_txn_wire.go): neither the Go nor the JS
// SDK has transactions. What the scenarios observe goes through the Go
// SDK: peeking shows every stored message, locked or not, so "nothing
// is visible before the commit" is checked without waiting on a clock.

// txnStep is the exactly-once step's setup: the input received
// (peek-lock) on one session, a sender on a second and a controller on a
// third, each on its own session as the .NET SDK opens them, and a
// declared transaction.
type txnStep struct {
	c   *txnConn
	rch uint16 // the receiver's session
	in  uint32 // the input's delivery id
	sch uint16 // the sender's session and handle
	sh  uint32
	cch uint16 // the controller's session and handle
	ch  uint32
	txn []byte
}

// startTxnStep sends body to in, receives it, attaches a sender to
// sendTo (with the send-via property naming via, if set) and declares a
// transaction.
func (t *T) startTxnStep(in, sendTo, via, body string) *txnStep {
	t.Send(in, Text(body))
	c := t.txnDial()
	s := &txnStep{c: c}
	rch := c.begin()
	id, got := c.receive(rch, c.attachReceiver(rch, in, 1))
	if got != body {
		t.Fatalf("received %q, want %q", got, body)
	}
	s.rch, s.in = rch, id
	sch := c.begin()
	var props amqpMap
	if via != "" {
		props = amqpMap{{amqpSymbol("com.microsoft:transfer-destination-address"), via}}
	}
	sh, err := c.attachSender(sch, sendTo, props)
	t.must(err, "attaching a sender to %s", sendTo)
	s.sch, s.sh = sch, sh
	s.cch = c.begin()
	s.ch = c.attachController(s.cch)
	s.txn = c.declare(s.cch, s.ch)
	return s
}

// complete completes the input inside the transaction.
func (s *txnStep) complete(t *T) {
	if st := s.c.settle(s.rch, s.in, inTxn(s.txn, accepted)); !isAccepted(st) {
		t.Fatalf("completing the input in the transaction: %s", stateText(st))
	}
}

// send sends body inside the transaction and returns the answer.
func (s *txnStep) send(body string) any {
	return s.c.outcome(s.sch, s.c.transfer(s.sch, s.sh, inTxn(s.txn, nil), dataMessage(body)))
}

// discharge commits or rolls back.
func (s *txnStep) discharge(fail bool) any {
	return s.c.discharge(s.cch, s.ch, s.txn, fail)
}

// peekAll returns the bodies of every message stored in entity, locked
// or not, in sequence order.
func (t *T) peekAll(entity string) []string {
	r := t.Receiver(entity, "", nil)
	msgs, err := r.PeekMessages(t.ctx, 100, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to.Ptr[int64](0)})
	t.must(err, "peeking %s", entity)
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

// expectPeek checks what entity stores.
func (t *T) expectPeek(entity string, want ...string) {
	if got := t.peekAll(entity); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s stores %q, want %q", entity, got, want)
	}
}

func init() {
	register(
		Scenario{Name: "txn-commit-all-visible", Seed: "Overview of transaction processing: a complete and sends in one transaction take effect together at the commit", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-txn-in")
			s := t.startTxnStep(q, q, "", "input")
			t.Check("operations")
			s.complete(t)
			for _, b := range []string{"output-1", "output-2"} {
				if st := s.send(b); !isAccepted(st) {
					t.Fatalf("sending %s in the transaction: %s", b, stateText(st))
				}
			}
			t.Check("invisible before the commit")
			t.expectPeek(q, "input") // the input still stored (locked), the outputs not yet
			t.Check("commit")
			if st := s.discharge(false); !isAccepted(st) {
				t.Fatalf("commit answered %s", stateText(st))
			}
			t.Check("visible after the commit")
			t.expectPeek(q, "output-1", "output-2")
			t.expectBodies(t.ReceiveN(t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 2, 15*time.Second),
				"output-1", "output-2")
		}},
		Scenario{Name: "txn-rollback-changes-nothing", Seed: "Overview of transaction processing: a transaction that is rolled back leaves no trace; the settled message stays locked by its receiver", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-txn-in")
			s := t.startTxnStep(q, q, "", "input")
			s.complete(t)
			if st := s.send("never"); !isAccepted(st) {
				t.Fatalf("sending in the transaction: %s", stateText(st))
			}
			t.Check("rollback")
			if st := s.discharge(true); !isAccepted(st) {
				t.Fatalf("rollback answered %s", stateText(st))
			}
			t.Check("nothing happened")
			t.expectPeek(q, "input")
			// The receiver still holds the input's lock: a plain complete works.
			if st := s.c.settle(s.rch, s.in, accepted); !isAccepted(st) {
				t.Fatalf("completing the input after the rollback: %s", stateText(st))
			}
			t.expectPeek(q)
		}},
		Scenario{Name: "txn-send-via-crosses-entities", Seed: "Overview of transaction processing, Transfers and send via: a sender attached to the input entity with transfer-destination-address stores into another at the commit", Protocol: AMQP, Run: func(t *T) {
			in, out := t.Queue("cf-txn-in"), t.Queue("cf-txn-out")
			s := t.startTxnStep(in, in, out, "input")
			s.complete(t)
			if st := s.send("forwarded"); !isAccepted(st) {
				t.Fatalf("sending via %s to %s in the transaction: %s", in, out, stateText(st))
			}
			t.Check("invisible before the commit")
			t.expectPeek(out)
			t.Check("commit")
			if st := s.discharge(false); !isAccepted(st) {
				t.Fatalf("commit answered %s", stateText(st))
			}
			t.Check("visible after the commit")
			t.expectPeek(out, "forwarded")
			t.expectPeek(in)
		}},
		Scenario{Name: "txn-second-entity-refused", Seed: "Overview of transaction processing: operations of one transaction on a second top-level entity fail (cannot span multiple top-level entities)", Protocol: AMQP, Run: func(t *T) {
			in, out := t.Queue("cf-txn-in"), t.Queue("cf-txn-out")
			s := t.startTxnStep(in, out, "", "input")
			s.complete(t)
			t.Check("refused")
			st := s.send("elsewhere")
			_, desc, ok := rejection(st)
			if !ok || !strings.Contains(strings.ToLower(desc), "cannot span multiple top-level entities") {
				t.Fatalf("a send to a second entity in the transaction answered %s, want rejected: cannot span multiple top-level entities", stateText(st))
			}
			t.Check("nothing sent")
			s.discharge(true) // whatever its answer: Service Bus may have ended the transaction already
			t.expectPeek(out)
			t.expectPeek(in, "input")
		}},
		Scenario{Name: "txn-message-limit", Seed: "Service Bus quotas: 100 messages per transaction; the next is refused (Cannot send more than 100 messages in a single transaction)", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-txn-out")
			c := t.txnDial()
			sch := c.begin()
			sh, err := c.attachSender(sch, q, nil)
			t.must(err, "attaching a sender")
			cch := c.begin()
			ch := c.attachController(cch)
			txn := c.declare(cch, ch)
			ids := make([]uint32, 0, 100)
			for i := range 100 {
				ids = append(ids, c.transfer(sch, sh, inTxn(txn, nil), dataMessage(strings.Repeat("m", i%7+1))))
			}
			for i, id := range ids {
				if st := c.outcome(sch, id); !isAccepted(st) {
					t.Fatalf("message %d of 100: %s", i+1, stateText(st))
				}
			}
			t.Check("the 101st refused")
			st := c.outcome(sch, c.transfer(sch, sh, inTxn(txn, nil), dataMessage("one too many")))
			if _, desc, ok := rejection(st); !ok || !strings.Contains(desc, "100 messages in a single transaction") {
				t.Fatalf("the 101st message answered %s", stateText(st))
			}
			c.discharge(cch, ch, txn, true)
			t.expectPeek(q)
		}},
		Scenario{Name: "txn-timeout-rolls-back", Seed: "Overview of transaction processing: a transaction times out two minutes after its first operation and is rolled back", Protocol: AMQP,
			Budget: 5 * time.Minute, Run: func(t *T) {
				q := t.Queue("cf-txn-out")
				timeout := t.target.txnTimeout()
				if timeout > time.Minute && !t.Slow() {
					t.Skipf("waits for the endpoint's transaction timeout (%s): run with --slow", timeout)
				}
				c := t.txnDial()
				sch := c.begin()
				sh, err := c.attachSender(sch, q, nil)
				t.must(err, "attaching a sender")
				cch := c.begin()
				ch := c.attachController(cch)
				txn := c.declare(cch, ch)
				if st := c.outcome(sch, c.transfer(sch, sh, inTxn(txn, nil), dataMessage("too slow"))); !isAccepted(st) {
					t.Fatalf("sending in the transaction: %s", stateText(st))
				}
				t.Check("refused after the timeout")
				// The transaction's clock started with that send: once its
				// timeout passed, the next operation is refused.
				select {
				case <-time.After(timeout):
				case <-t.ctx.Done():
					t.Fatalf("the scenario's budget ended before the transaction timeout")
				}
				for {
					st := c.outcome(sch, c.transfer(sch, sh, inTxn(txn, nil), dataMessage("later")))
					if _, _, ok := rejection(st); ok {
						break
					}
					if t.ctx.Err() != nil {
						t.Fatalf("operations still accepted %s after the timeout", timeout)
					}
					select {
					case <-time.After(500 * time.Millisecond):
					case <-t.ctx.Done():
					}
				}
				t.Check("commit refused")
				st := c.discharge(cch, ch, txn, false)
				if cond, _, ok := rejection(st); !ok || !strings.HasPrefix(cond, "amqp:transaction:") {
					t.Fatalf("committing a timed-out transaction answered %s, want rejected with amqp:transaction:*", stateText(st))
				}
				t.Check("nothing stored")
				t.expectPeek(q)
			}},
	)
}
