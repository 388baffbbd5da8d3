package conformance

import (
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/conformance/txnwire"
)

// Transactions (seed: "Overview of transaction processing" and the AMQP
// protocol guide's "Transaction capability"), driven frame by frame as
// the .NET SDK drives them (package txnwire): neither the Go nor the JS
// SDK has transactions. What the scenarios observe goes through the Go
// SDK: peeking shows every stored message, locked or not, so "nothing
// is visible before the commit" is checked without waiting on a clock.

// txnDial connects a txnwire client as AMQPSession connects go-amqp
// (AMQPS for an ordinary connection string, plain AMQP for the
// emulator's); it closes when the scenario ends.
func (t *T) txnDial() *txnwire.Conn {
	t.live()
	tg := t.target
	host, _, _ := strings.Cut(tg.cs.Host, ":")
	o := txnwire.Options{Addr: tg.AMQPHost(), Host: host, User: tg.cs.SharedAccessKeyName, Password: tg.cs.SharedAccessKey}
	if !tg.cs.UseDevelopmentEmulator {
		addr, h := t.amqpsEndpoint()
		o.Addr, o.Host, o.TLS = addr, h, tg.tlsConfig(h)
	}
	c, err := txnwire.Dial(t.ctx, o)
	t.must(err, "connecting for transactions")
	if dl, ok := t.ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	t.Cleanup(c.Close)
	return c
}

// begin begins a session.
func (t *T) begin(c *txnwire.Conn) *txnwire.Session {
	s, err := c.Begin()
	t.must(err, "beginning a session")
	return s
}

// controller declares a transaction on a controller of its own session.
func (t *T) controller(c *txnwire.Conn) (*txnwire.Link, []byte) {
	ctl, err := t.begin(c).AttachController()
	t.must(err, "attaching a transaction controller")
	txn, err := ctl.Declare()
	t.must(err, "declaring a transaction")
	return ctl, txn
}

// txnStep is the exactly-once step's setup: the input received
// (peek-lock) on one session, a sender on a second and a controller on a
// third, each on its own session as the .NET SDK opens them, and a
// declared transaction.
type txnStep struct {
	rs     *txnwire.Session // the receiver's session
	in     uint32           // the input's delivery id
	sender *txnwire.Link
	ctl    *txnwire.Link
	txn    []byte
}

// startTxnStep sends body to in, receives it, attaches a sender to
// sendTo (storing into via, if set: send-via) and declares a
// transaction.
func (t *T) startTxnStep(in, sendTo, via, body string) *txnStep {
	t.Send(in, Text(body))
	return t.openTxnStep(in, sendTo, via, body)
}

// openTxnStep is startTxnStep for an input already in the queue, body
// first.
func (t *T) openTxnStep(in, sendTo, via, body string) *txnStep {
	c := t.txnDial()
	s := &txnStep{rs: t.begin(c)}
	r, err := s.rs.AttachReceiver(in, 1)
	t.must(err, "attaching a receiver to %s", in)
	d, err := r.Receive()
	t.must(err, "receiving the input")
	if string(d.Body) != body {
		t.Fatalf("received %q, want %q", d.Body, body)
	}
	s.in = d.ID
	s.sender, err = t.begin(c).AttachSender(sendTo, via)
	t.must(err, "attaching a sender to %s", sendTo)
	s.ctl, s.txn = t.controller(c)
	return s
}

// complete completes the input inside the transaction.
func (s *txnStep) complete(t *T) {
	st, err := s.rs.Complete(s.in, s.txn)
	t.must(err, "completing the input in the transaction")
	if !st.Accepted {
		t.Fatalf("completing the input in the transaction: %s", st)
	}
}

// send sends body inside the transaction and returns the answer.
func (s *txnStep) send(t *T, body string) txnwire.State {
	st, err := s.sender.Send(s.txn, []byte(body))
	t.must(err, "sending %s in the transaction", body)
	return st
}

// discharge commits or rolls back.
func (s *txnStep) discharge(t *T, fail bool) txnwire.State {
	st, err := s.ctl.Discharge(s.txn, fail)
	t.must(err, "discharging the transaction")
	return st
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
		Scenario{Name: "txn-commit-all-visible", Seed: "Overview of transaction processing: a complete and sends in one transaction take effect together at the commit", Protocol: AMQP,
			Detects: []Detection{{FaultTxnAtOnce, "invisible before the commit"}}, Run: func(t *T) {
				q := t.Queue("cf-txn-in")
				s := t.startTxnStep(q, q, "", "input")
				t.Check("operations")
				s.complete(t)
				for _, b := range []string{"output-1", "output-2"} {
					if st := s.send(t, b); !st.Accepted {
						t.Fatalf("sending %s in the transaction: %s", b, st)
					}
				}
				t.Check("invisible before the commit")
				t.expectPeek(q, "input") // the input still stored (locked), the outputs not yet
				t.Check("commit")
				if st := s.discharge(t, false); !st.Accepted {
					t.Fatalf("commit answered %s", st)
				}
				t.Check("visible after the commit")
				t.expectPeek(q, "output-1", "output-2")
				t.expectBodies(t.ReceiveN(t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 2, 15*time.Second),
					"output-1", "output-2")
			}},
		Scenario{Name: "txn-rollback-changes-nothing", Seed: "Overview of transaction processing: a transaction that is rolled back leaves no trace; the settled message stays locked by its receiver", Protocol: AMQP,
			Detects: []Detection{{FaultTxnAtOnce, "nothing happened"}, {FaultIgnoreComplete, "completed after the rollback"}}, Run: func(t *T) {
				q := t.Queue("cf-txn-in")
				s := t.startTxnStep(q, q, "", "input")
				s.complete(t)
				if st := s.send(t, "never"); !st.Accepted {
					t.Fatalf("sending in the transaction: %s", st)
				}
				t.Check("rollback")
				if st := s.discharge(t, true); !st.Accepted {
					t.Fatalf("rollback answered %s", st)
				}
				t.Check("nothing happened")
				t.expectPeek(q, "input")
				// The receiver still holds the input's lock: a plain complete works.
				t.Check("completed after the rollback")
				st, err := s.rs.Complete(s.in, nil)
				t.must(err, "completing the input after the rollback")
				if !st.Accepted {
					t.Fatalf("completing the input after the rollback: %s", st)
				}
				t.expectPeek(q)
			}},
		Scenario{Name: "txn-send-via-crosses-entities", Seed: "Overview of transaction processing, Transfers and send via: a sender attached to the input entity with transfer-destination-address stores into another at the commit", Protocol: AMQP,
			Detects: []Detection{{FaultTxnAtOnce, "invisible before the commit"}}, Run: func(t *T) {
				in, out := t.Queue("cf-txn-in"), t.Queue("cf-txn-out")
				s := t.startTxnStep(in, in, out, "input")
				s.complete(t)
				if st := s.send(t, "forwarded"); !st.Accepted {
					t.Fatalf("sending via %s to %s in the transaction: %s", in, out, st)
				}
				t.Check("invisible before the commit")
				t.expectPeek(out)
				t.Check("commit")
				if st := s.discharge(t, false); !st.Accepted {
					t.Fatalf("commit answered %s", st)
				}
				t.Check("visible after the commit")
				// Received, not peeked at once: Service Bus forwards from
				// the via entity's transfer queue after the commit, and so
				// does a cluster whose out is in another data group than
				// in (the pump hands it over once the commit is durable).
				t.expectBodies(t.ReceiveN(t.Receiver(out, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 1, 15*time.Second),
					"forwarded")
				t.expectPeek(out)
				t.expectPeek(in)
			}},
		Scenario{Name: "txn-second-entity-refused", Seed: "Overview of transaction processing: operations of one transaction on a second top-level entity fail (cannot span multiple top-level entities)", Protocol: AMQP,
			Detects: []Detection{{FaultTxnAtOnce, "completion rolled back"}}, Run: func(t *T) {
				in, out := t.Queue("cf-txn-in"), t.Queue("cf-txn-out")
				s := t.startTxnStep(in, out, "", "input")
				s.complete(t)
				t.Check("refused")
				if st := s.send(t, "elsewhere"); !st.Rejected || !strings.Contains(strings.ToLower(st.Description), "cannot span multiple top-level entities") {
					t.Fatalf("a send to a second entity in the transaction answered %s, want rejected: cannot span multiple top-level entities", st)
				}
				t.Check("nothing sent")
				s.discharge(t, true) // whatever its answer: Service Bus may have ended the transaction already
				t.expectPeek(out)
				t.Check("completion rolled back")
				t.expectPeek(in, "input")
			}},
		Scenario{Name: "txn-message-limit", Seed: "Service Bus quotas: 100 messages per transaction; the next is refused (Cannot send more than 100 messages in a single transaction)", Protocol: AMQP,
			Detects: []Detection{{FaultTxnAtOnce, "nothing stored after the rollback"}}, Run: func(t *T) {
				q := t.Queue("cf-txn-out")
				c := t.txnDial()
				ss := t.begin(c)
				snd, err := ss.AttachSender(q, "")
				t.must(err, "attaching a sender")
				ctl, txn := t.controller(c)
				ids := make([]uint32, 0, 100)
				for i := range 100 {
					id, err := snd.Transfer(txn, []byte(fmt.Sprint("m", i)))
					t.must(err, "sending message %d", i+1)
					ids = append(ids, id)
				}
				for i, id := range ids {
					st, err := ss.Outcome(id)
					t.must(err, "the answer to message %d", i+1)
					if !st.Accepted {
						t.Fatalf("message %d of 100: %s", i+1, st)
					}
				}
				t.Check("the 101st refused")
				st, err := snd.Send(txn, []byte("one too many"))
				t.must(err, "sending the 101st message")
				if !st.Rejected || !strings.Contains(st.Description, "100 messages in a single transaction") {
					t.Fatalf("the 101st message answered %s", st)
				}
				_, err = ctl.Discharge(txn, true)
				t.must(err, "rolling back")
				t.Check("nothing stored after the rollback")
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
				snd, err := t.begin(c).AttachSender(q, "")
				t.must(err, "attaching a sender")
				ctl, txn := t.controller(c)
				st, err := snd.Send(txn, []byte("too slow"))
				t.must(err, "sending in the transaction")
				if !st.Accepted {
					t.Fatalf("sending in the transaction: %s", st)
				}
				t.Check("refused after the timeout")
				// The transaction's clock started with that send: once its
				// timeout passed, the next operation is refused.
				select {
				case <-time.After(timeout):
				case <-t.ctx.Done():
					t.Abortf("the scenario's budget ended before the transaction timeout")
				}
				for {
					st, err := snd.Send(txn, []byte("later"))
					t.must(err, "sending after the timeout")
					if st.Rejected {
						break
					}
					select {
					case <-time.After(500 * time.Millisecond):
					case <-t.ctx.Done():
						t.Fatalf("operations still accepted long after the %s timeout", timeout)
					}
				}
				t.Check("commit refused")
				st, err = ctl.Discharge(txn, false)
				t.must(err, "committing")
				if !st.Rejected || !strings.HasPrefix(st.Condition, "amqp:transaction:") {
					t.Fatalf("committing a timed-out transaction answered %s, want rejected with amqp:transaction:*", st)
				}
				t.Check("nothing stored")
				t.expectPeek(q)
			}},
	)
}
