package amqpserver

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
)

// The transaction coordinator (AMQP §4.5, amqp.md §7).
//
// A client attaches a sender link whose target is a coordinator and sends
// declare and discharge messages on it (amqp-value bodies). Each declare
// is answered with a settled disposition declared{txn-id}; a discharge
// with accepted, or rejected with amqp:transaction:unknown-id,
// amqp:transaction:rollback (the commit failed, nothing of the
// transaction happened) or amqp:transaction:timeout. Transactions belong
// to the connection: a txn-id may be used on any of its links and
// sessions (what the .NET SDK does), and each is rolled back when the
// coordinator link that declared it goes away (detach, end, close, or the
// connection's loss). Transactional work on other links is in txn.go.

// Transaction error conditions (§4.5.8).
const (
	condTxnUnknownID encoding.Symbol = "amqp:transaction:unknown-id"
	condTxnRollback  encoding.Symbol = "amqp:transaction:rollback"
	condTxnTimeout   encoding.Symbol = "amqp:transaction:timeout"
)

// Descriptors of the coordinator's messages (§4.5.2, §4.5.3).
const (
	codeDeclare     uint64          = 0x31
	codeDischarge   uint64          = 0x32
	symbolDeclare   encoding.Symbol = "amqp:declare:list"
	symbolDischarge encoding.Symbol = "amqp:discharge:list"
)

// Capabilities the coordinator answers with: local transactions, several
// open at once, each usable on every session of the connection.
var coordinatorCapabilities = []encoding.Symbol{
	"amqp:local-transactions", "amqp:multi-txns-per-ssn", "amqp:multi-ssns-per-txn",
}

// connTxn is one declared transaction of a connection. Owned by run.
type connTxn struct {
	id    []byte
	t     *core.Txn
	coord *link       // the coordinator link that declared it
	timer *time.Timer // rolls it back at its timeout, once an operation started it
	held  int         // bytes of the messages it holds to send, counted in conn.txnBytes
	// timedOut is set once the timeout rolled it back: it stays known, so
	// that its discharge is answered amqp:transaction:timeout.
	timedOut bool
	// aborted is the refusal of one of its operations (see txnOpError):
	// the transaction was rolled back then and stays known, so that its
	// commit is answered amqp:transaction:rollback with that cause.
	aborted *frames.Error
	// settled lists the client's transactional settlements of deliveries
	// on this connection, forgotten from their sessions once it commits.
	settled []txnDelivery
}

// txnDelivery is a delivery settled inside a transaction.
type txnDelivery struct {
	s  *session
	id uint32
	od *outDelivery
}

// authorizeCoordinator lets a connection attach a coordinator before it
// has presented a credential, as Service Bus does: the Java SDK attaches
// its coordinator without putting a token first (core-amqp's
// ReactorSession.getOrCreateTransactionCoordinator creates the link with
// requiresAuthorization false), which makes it the connection's first
// link when cross-entity transactions are on or createTransaction is the
// first call. Transactions need no right of their own: each operation is
// on a link that was authorized for it. Until the connection
// authenticates, the coordinator counts toward PreAuthMaxLinks like any
// link, and so do its transactions (see declare).
func (c *conn) authorizeCoordinator() *frames.Error {
	if !c.authenticated() && c.liveLinks() > c.srv.cfg.PreAuthMaxLinks { // l included
		return errorf(frames.CondResourceLimitExceeded,
			"A connection may hold at most %d links before it puts a valid token on $cbs.", c.srv.cfg.PreAuthMaxLinks)
	}
	return nil
}

// attachCoordinator attaches a coordinator link: a sender link of the
// client whose deliveries are declares and discharges. A coordinator that
// comes before any entity link on its session makes the session group
// the work of its transactions across entities (joinTxnGroup).
func (l *link) attachCoordinator(a *frames.Attach) {
	if l.s.viaEntity == "" {
		l.s.txnGroup = true
	}
	l.kind = nodeCoordinator
	l.in.maxSize = maxCoordinatorMessage
	reply := *a
	reply.Coordinator = &frames.Coordinator{Capabilities: coordinatorCapabilities}
	l.attach(&reply, nil)
}

// maxCoordinatorMessage bounds a declare or discharge message: a txn-id
// and a flag, in any encoding a client may choose.
const maxCoordinatorMessage = 64 << 10

// coordinate handles one declare or discharge.
func (l *link) coordinate(p *partial) {
	c := l.s.c
	c.received(len(p.buf))
	m, err := frames.UnmarshalMessage(p.buf)
	if err != nil {
		l.answerCoordinator(p, &frames.Rejected{Error: errorf(frames.CondDecodeError, "%v", err)})
		return
	}
	d, ok := m.Value.(encoding.Described)
	fields, _ := d.Value.([]any)
	switch {
	case ok && (d.Descriptor == codeDeclare || d.Descriptor == symbolDeclare):
		if len(fields) > 0 && fields[0] != nil {
			l.answerCoordinator(p, &frames.Rejected{Error: errorf(frames.CondNotImplemented,
				"Distributed transactions (declare with a global-id) are not supported.")})
			return
		}
		l.declare(p)
	case ok && (d.Descriptor == codeDischarge || d.Descriptor == symbolDischarge):
		var id []byte
		var fail bool
		if len(fields) > 0 {
			id, _ = fields[0].([]byte)
		}
		if len(fields) > 1 {
			fail, _ = fields[1].(bool)
		}
		l.discharge(p, id, fail)
	default:
		l.answerCoordinator(p, &frames.Rejected{Error: errorf(frames.CondDecodeError,
			"A coordinator takes declare and discharge messages (an amqp-value holding amqp:declare:list or amqp:discharge:list).")})
	}
}

// declare starts a transaction and answers with its id.
func (l *link) declare(p *partial) {
	c := l.s.c
	if max := c.srv.cfg.Limits.MaxTransactionsPerConnection; len(c.txns) >= max {
		l.answerCoordinator(p, &frames.Rejected{Error: errorf(frames.CondResourceLimitExceeded,
			"The connection has %d transactions open, the most it may have (%d). Discharge transactions before declaring others.", len(c.txns), max)})
		return
	}
	if max := c.srv.cfg.PreAuthMaxLinks; !c.authenticated() && len(c.txns) >= max {
		l.answerCoordinator(p, &frames.Rejected{Error: errorf(frames.CondResourceLimitExceeded,
			"A connection may hold at most %d transactions before it puts a valid token on $cbs.", max)})
		return
	}
	id := newTxnID()
	if c.txns == nil {
		c.txns = make(map[string]*connTxn)
	}
	c.txns[string(id)] = &connTxn{id: id, t: c.broker().BeginTxn(), coord: l}
	l.answerCoordinator(p, &frames.Declared{TxnID: id})
}

// newTxnID returns a fresh transaction id: opaque binary, written as
// Service Bus writes its own ("txn:" and 32 hexadecimal digits).
func newTxnID() []byte {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return []byte("txn:" + hex.EncodeToString(b[:]))
}

// discharge commits (fail false) or rolls back a transaction, after
// everything the connection received before it: sends and settlements
// (submitted now), and the transaction's operations on $management, which
// run in helper goroutines (rpc.go). A client may pipeline "complete on
// $management, then commit" without waiting for the reply in between.
func (l *link) discharge(p *partial, id []byte, fail bool) {
	c := l.s.c
	ct := c.txns[string(id)]
	if ct == nil {
		l.answerCoordinator(p, &frames.Rejected{Error: errorf(condTxnUnknownID,
			"No active Transaction was found for ID '%s'. The Transaction may have timed out or attempted to span multiple top-level entities such as Queue or Topic. The server Transaction timeout is: %s.",
			id, txnTimeoutText(c.broker().TxnTimeout()))})
		return
	}
	c.dropTxn(ct) // what comes after the discharge finds it gone
	c.submitPending()
	c.oweInTurn(func(ticket uint64) {
		if ct.timedOut && !fail {
			l.answerCoordinator(p, &frames.Rejected{Error: errorf(condTxnTimeout,
				"The transaction '%s' timed out %s after its first operation and was rolled back.", id, txnTimeoutText(c.broker().TxnTimeout()))})
			c.paid(ticket)
			return
		}
		if ct.aborted != nil && !fail {
			l.answerCoordinator(p, &frames.Rejected{Error: &frames.Error{Condition: condTxnRollback,
				Description: "The transaction was rolled back when one of its operations was refused: " + ct.aborted.Description,
				Info:        encoding.Map{{Key: encoding.Symbol("com.microsoft:cause"), Value: ct.aborted.Condition}}}})
			c.paid(ticket)
			return
		}
		if fail {
			ct.t.Rollback()
			l.answerCoordinator(p, &frames.Accepted{})
			c.paid(ticket)
			return
		}
		c.goWork(func() {
			err := ct.t.Commit()
			c.post(func() {
				if err == nil {
					ct.forgetSettled()
					l.answerCoordinator(p, &frames.Accepted{})
				} else {
					l.answerCoordinator(p, &frames.Rejected{Error: txnFailure(err)})
				}
				c.paid(ticket)
			})
		})
	})
}

// txnFailure is the error of a discharge whose commit failed.
func txnFailure(err error) *frames.Error {
	switch core.CodeOf(err) {
	case core.CodeTimeout:
		return errorf(condTxnTimeout, "%s", description(err))
	case core.CodeOutcomeUnknown: // not rolled back: it may have committed
		return amqpError(err)
	}
	e := amqpError(err)
	return &frames.Error{Condition: condTxnRollback,
		Description: "The transaction was rolled back: " + e.Description,
		Info:        encoding.Map{{Key: encoding.Symbol("com.microsoft:cause"), Value: e.Condition}}}
}

// txnTimeoutText writes d as .NET writes a TimeSpan (00:02:00).
func txnTimeoutText(d time.Duration) string {
	s := int64(d / time.Second)
	return twoDigits(s/3600) + ":" + twoDigits(s/60%60) + ":" + twoDigits(s%60)
}

func twoDigits(n int64) string {
	return string([]byte{byte('0' + n/10%10), byte('0' + n%10)})
}

// answerCoordinator settles a coordinator delivery with state. A client
// that settled its delivery itself gets no answer.
func (l *link) answerCoordinator(p *partial, state frames.DeliveryState) {
	if p.settled || !l.s.live() {
		return
	}
	l.s.c.write(l.s.ch, &frames.Disposition{Role: frames.RoleReceiver, First: p.id, Settled: true, State: state})
}

// dropTxn removes a transaction from the connection.
func (c *conn) dropTxn(ct *connTxn) {
	delete(c.txns, string(ct.id))
	if ct.timer != nil {
		ct.timer.Stop()
	}
	c.releaseTxnHeld(ct)
}

// releaseCoordinator rolls back every transaction the coordinator link l
// declared and did not discharge: the link is going away.
func (l *link) releaseCoordinator() {
	c := l.s.c
	for _, ct := range c.txns {
		if ct.coord == l {
			c.dropTxn(ct)
			ct.t.Rollback()
		}
	}
}

// forgetSettled forgets, once the transaction committed, the deliveries
// it settled: their locks are consumed.
func (ct *connTxn) forgetSettled() {
	for _, d := range ct.settled {
		if d.s.live() && d.s.unsettled[d.id] == d.od {
			d.s.forgetUnsettled(d.id, d.od)
		}
	}
	ct.settled = nil
}
