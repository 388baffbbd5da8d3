package amqpserver

import (
	"errors"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/membudget"
)

// Transactional work (coordinator.go declares and discharges).
//
//   - A transfer whose state is transactional-state{txn-id} is a send
//     inside that transaction: the transaction keeps its messages, which
//     are stored when it commits. It is answered with
//     transactional-state{txn-id, accepted}, as Service Bus does, or
//     rejected with the reason.
//   - A disposition whose state is transactional-state{txn-id, outcome}
//     settles a peek-locked delivery inside the transaction; the message
//     stays locked, its lock running, until the transaction commits. It
//     is answered with a settled disposition transactional-state{txn-id,
//     outcome}, or rejected. A delivery settled in a transaction that is
//     rolled back may be settled again.
//   - A $management request whose transfer carries transactional-state
//     runs update-disposition and renew-lock inside the transaction.
//
// Every operation of a transaction goes through one top-level entity
// (core.Txn). Two ways let a transaction reach others, as in Service Bus:
// a sender attached to entity A with the link property
// com.microsoft:transfer-destination-address = B stores into B, through
// A (send-via); and on a session whose first link is a coordinator
// (the .NET SDK's EnableCrossEntityTransactions), the first entity link
// fixes the session's entity: senders to other entities send through it,
// and receivers on other entities are refused.

// propTransferDestination is the send-via link property.
const propTransferDestination = encoding.Symbol("com.microsoft:transfer-destination-address")

// txnOf returns the open transaction id names, or the error an operation
// naming it gets (Service Bus's wording and condition).
func (c *conn) txnOf(id []byte) (*connTxn, *frames.Error) {
	ct := c.txns[string(id)]
	if ct == nil || ct.timedOut || ct.aborted != nil {
		return nil, errorf(frames.CondNotAllowed,
			"No active Transaction was found for ID '%s'. The Transaction may have timed out or attempted to span multiple top-level entities such as Queue or Topic. The server Transaction timeout is: %s.",
			id, txnTimeoutText(c.broker().TxnTimeout()))
	}
	return ct, nil
}

// txnOpError is the error of an operation of ct that failed with err. An
// operation after the timeout finds the transaction rolled back, and gets
// what an operation naming no transaction gets.
//
// Any other refusal dooms the transaction: it is rolled back at once and
// its commit fails (amqp:transaction:rollback, the refusal as its cause),
// later operations get what an operation naming no transaction gets. That
// is Service Bus's answer to an operation on a second top-level entity
// ("No active Transaction was found … attempted to span multiple
// top-level entities"), and it keeps a client that does not read the
// outcome of a transactional send from committing without it: the Java
// SDK's ReactorSender hands the disposition of a send made with a
// delivery state to the caller as success whatever it says, and
// ServiceBusSenderAsyncClient never looks at it.
func (c *conn) txnOpError(ct *connTxn, err error) *frames.Error {
	if !errors.Is(err, core.ErrTxnTimeout) {
		e := amqpError(err)
		c.txnAborted(ct, e)
		return e
	}
	c.txnTimedOut(ct)
	_, e := c.txnOf(ct.id)
	return e
}

// armTxnTimer starts the timer that rolls ct back at its timeout, once an
// operation started the timeout.
func (c *conn) armTxnTimer(ct *connTxn) {
	if ct.timer != nil {
		return
	}
	dl := ct.t.Deadline()
	if dl.IsZero() {
		return
	}
	ct.timer = time.AfterFunc(time.Duration(dl.UnixNano()-c.broker().Now()), func() {
		c.post(func() { c.txnTimedOut(ct) })
	})
}

// txnAborted rolls back a transaction one of whose operations was
// refused with e (see txnOpError). It stays known until it is discharged
// or its coordinator goes, so that its commit is answered with e.
func (c *conn) txnAborted(ct *connTxn, e *frames.Error) {
	if c.txns[string(ct.id)] != ct || ct.timedOut || ct.aborted != nil {
		return
	}
	ct.t.Rollback()
	ct.aborted = e
	c.releaseTxnHeld(ct)
}

// txnTimedOut rolls back a transaction whose timeout passed. It stays
// known until it is discharged or its coordinator goes, so that its
// discharge is answered amqp:transaction:timeout.
func (c *conn) txnTimedOut(ct *connTxn) {
	if c.txns[string(ct.id)] != ct || ct.timedOut || ct.aborted != nil {
		return
	}
	ct.t.Rollback()
	ct.timedOut = true
	c.releaseTxnHeld(ct)
}

// releaseTxnHeld gives back the bytes ct holds to send: to the
// connection's count and to the memory budget.
func (c *conn) releaseTxnHeld(ct *connTxn) {
	c.txnBytes -= ct.held
	c.holdMem(-ct.held)
	ct.held = 0
}

// sendInTxn takes a delivery sent inside a transaction.
func (l *link) sendInTxn(p *partial, ts *frames.TransactionalState) {
	c := l.s.c
	n := len(p.buf)
	// The incoming buffer lets go of it: the transaction holds it from
	// here on (taken from the memory budget below), or it is dropped.
	c.received(n)
	ct, e := c.txnOf(ts.TxnID)
	if e != nil {
		l.settleIncoming(p, &frames.Rejected{Error: e})
		return
	}
	if max := max(c.srv.cfg.Limits.MaxTransactionBytes, int(min(c.srv.cfg.MaxMessageSize, 1<<40))); c.txnBytes+n > max {
		l.settleIncoming(p, &frames.Rejected{Error: errorf(frames.CondResourceLimitExceeded,
			"The connection's open transactions hold %d bytes of messages, the most they may hold (%d). Discharge transactions before sending more in them.", c.txnBytes, max)})
		return
	}
	msgs, err := decodeMessage(p.buf, p.format)
	if err != nil {
		l.settleIncoming(p, &frames.Rejected{Error: &frames.Error{Condition: frames.CondDecodeError, Description: err.Error()}})
		return
	}
	if !c.tryHoldMem(membudget.AMQPTransaction, n) {
		l.settleIncoming(p, &frames.Rejected{Error: errServerMemory()})
		return
	}
	if err := ct.t.Send(l.sendPath(), l.txnVia(), msgs); err != nil {
		c.holdMem(-n)
		l.settleIncoming(p, &frames.Rejected{Error: c.txnOpError(ct, err)})
		return
	}
	ct.held += n
	c.txnBytes += n
	c.armTxnTimer(ct)
	if p.settled || !l.s.live() {
		return
	}
	c.write(l.s.ch, &frames.Disposition{Role: frames.RoleReceiver, First: p.id,
		Settled: l.rcv == frames.ReceiverSettleModeFirst,
		State:   &frames.TransactionalState{TxnID: ct.id, Outcome: &frames.Accepted{}}})
}

// sendPath is the entity a sender link's messages are stored in: its
// transfer destination for a send-via, else its own entity.
func (l *link) sendPath() string {
	if l.sendTo != "" {
		return l.sendTo
	}
	return l.entity
}

// txnVia is the entity a sender link's transactional sends go through.
func (l *link) txnVia() string {
	if l.via != "" {
		return l.via
	}
	return l.entity
}

// settleInTxn applies the client's settlement of delivery id inside the
// transaction its state names.
func (s *session) settleInTxn(id uint32, od *outDelivery, d *frames.Disposition, ts *frames.TransactionalState) {
	outcome, ok := outcomeOf(ts.Outcome)
	if !ok {
		return // transactional acquisition without an outcome: not supported, ignored like received{}
	}
	c := s.c
	ct, e := c.txnOf(ts.TxnID)
	if e == nil {
		if err := c.sessionLockErr(od, ct.t.Settle(od.entity, od.token, outcome)); err != nil {
			e = c.txnOpError(ct, err)
		}
	}
	if e == nil {
		ct.settled = append(ct.settled, txnDelivery{s: s, id: id, od: od})
		c.armTxnTimer(ct)
	}
	if d.Settled {
		s.forgetUnsettled(id, od) // the client will not settle it again
		return
	}
	var final frames.DeliveryState = &frames.Rejected{Error: e}
	if e == nil {
		o := ts.Outcome
		if outcome.Kind == core.DeadLetter {
			o = &frames.Rejected{} // see answerSettle
		}
		final = &frames.TransactionalState{TxnID: ct.id, Outcome: o}
	}
	c.write(s.ch, &frames.Disposition{Role: frames.RoleSender, First: id, Settled: true, State: final})
}

// mgmtTxn returns the transaction a $management request's transfer names,
// nil when it names none, or the failure reply it gets.
func (c *conn) mgmtTxn(p *partial, req *frames.Message) (*connTxn, *frames.Message) {
	ts, ok := p.state.(*frames.TransactionalState)
	if !ok {
		return nil, nil
	}
	ct, e := c.txnOf(ts.TxnID)
	if e != nil {
		return nil, mgmtFailure(req, 400, e.Condition, e.Description)
	}
	return ct, nil
}

// attachSendVia reads a sender's send-via property: the link stores into
// the destination, through its own entity. The destination must exist
// and the connection must be allowed to send there.
func (l *link) attachSendVia(a *frames.Attach) (encoding.Map, *frames.Error) {
	v, ok := mapField(a.Properties, string(propTransferDestination))
	if !ok {
		return nil, nil
	}
	dest, _ := v.(string)
	if sym, ok := v.(encoding.Symbol); ok {
		dest = string(sym)
	}
	dest = strings.Trim(linkPath(dest), "/")
	if dest == "" {
		return nil, errorf(frames.CondInvalidField, "The link property %s must name an entity.", propTransferDestination)
	}
	c := l.s.c
	if !c.auth.allows(dest, l.need) {
		return nil, errorf(frames.CondUnauthorizedAccess,
			"Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: '%s'.", l.need, dest)
	}
	if e := c.checkEntity(dest); e != nil {
		return nil, e
	}
	if e := c.checkDirection(dest, true); e != nil {
		return nil, e
	}
	l.sendTo = dest
	return encoding.Map{{Key: propTransferDestination, Value: v}}, nil
}

// joinTxnGroup applies the rule of a session whose first link is a
// coordinator to an entity link attaching on it: the first one fixes the
// session's top-level entity; senders to other entities send through
// it; receivers on other entities are refused.
func (l *link) joinTxnGroup() *frames.Error {
	s := l.s
	top := topLevel(l.entity)
	switch {
	case s.viaEntity == "":
		s.viaEntity = top
	case !s.txnGroup || strings.EqualFold(s.viaEntity, top):
	case l.in != nil:
		l.via = s.viaEntity
	default:
		return errorf(frames.CondNotAllowed, "%s", core.ErrTxnSpansEntities.Msg)
	}
	return nil
}

// topLevel returns the queue or topic of an entity path.
func topLevel(path string) string { return core.ParseAddress(path).Entity }
