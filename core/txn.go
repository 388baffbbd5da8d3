package core

import (
	"context"
	"sync"
	"time"
)

// Transactions.
//
// A Txn is a write that collects many operations and commits once: its
// sends and settlements are checked when they are made and kept in the
// transaction; Commit plans all of them into one write (write.go) — the
// locks it settles consumed as any settlement consumes them, its messages
// given sequence numbers — and applies that write with one synced batch.
// Memory changes only once the batch committed, so a crash before commit
// leaves nothing of the transaction and a crash after leaves all of it.
//
// Until commit nothing of a transaction is visible: its messages are not
// stored, and the messages it settles stay locked, their locks running.
// A lock that is lost before commit (expired, settled outside the
// transaction, its entity deleted) fails the commit, and the whole
// transaction rolls back. A rollback has nothing to undo: the messages a
// transaction abandoned or completed keep their locks until those expire
// or are settled again, as in Service Bus.
//
// All operations of a transaction go through one top-level entity (a
// queue or a topic; a subscription's is its topic): the first one used.
// A send names the entity its messages go through (via) and the one they
// are stored in, which may differ (Service Bus's send-via). In a cluster
// with data groups the one they are stored in may be in another group
// than via: the commit's write then puts them in this group's outbox
// (transfer.go, txn_transfer.go), committed or discarded with the rest
// of the transaction, and the pump hands them to their group after the
// commit, each applied there once.
//
// A transaction times out Config.TxnTimeout (two minutes) after its first
// operation: any later operation, and its commit, fail with
// [ErrTxnTimeout], and it is rolled back.

// Bounds of one transaction.
const (
	// DefaultTxnTimeout is Service Bus's transaction timeout, counted
	// from the first operation.
	DefaultTxnTimeout = 2 * time.Minute
	// MaxTxnMessages is the most messages one transaction may send, as
	// in Service Bus.
	MaxTxnMessages = 100
	// MaxTxnSettlements is the most settlements one transaction may
	// hold. Service Bus documents no such bound; this one keeps what a
	// transaction holds in memory bounded.
	MaxTxnSettlements = 5000
)

// Errors of transactions (their Code says how a front reports them).
var (
	// ErrTxnTimeout is the error of an operation on, or the commit of, a
	// transaction that timed out.
	ErrTxnTimeout = &Error{Code: CodeTimeout, Msg: "The transaction timed out and was rolled back."}
	// ErrTxnSpansEntities is Service Bus's refusal of an operation on
	// another top-level entity than the transaction's first.
	ErrTxnSpansEntities = &Error{Code: CodeBadRequest,
		Msg: "Local transactions cannot span multiple top-level entities such as queue or topic."}
)

// Txn is a transaction. Its methods are safe for concurrent use; an
// operation that runs while the transaction commits fails.
type Txn struct {
	b  *Broker
	mu sync.Mutex // guards every field below; never held across storage I/O

	ended    bool   // committed, rolled back or timed out
	timedOut bool   // ended by its timeout
	viaKey   string // lookup key of the top-level entity its operations go through; "" before the first
	viaName  string // that entity as first written
	partKey  string // the partition key of its sends to a partitioned entity; "" before the first
	first    int64  // unix nanos of the first operation; 0 before it
	sends    []txnSend
	messages int   // messages in sends
	bytes    int64 // their sizes ([Message.Size]) added up
	settles  []txnSettle
	tokens   map[txnToken]struct{} // locks settled in it

	// inner is, for a routed broker's transaction (route.go), the
	// transaction of its entity's backend it forwards to; nil before its
	// first operation.
	inner *Txn
	// remote, when set, carries out every operation (a stand-in for a
	// transaction of a broker in another process: NewRemoteTxn).
	remote RemoteTxn
}

// RemoteTxn is a transaction of a broker in another process, as a
// backend's stand-in carries it out (see [Router]).
type RemoteTxn interface {
	Send(path, via string, msgs []*Message) error
	Settle(path string, tok LockToken, o Outcome) error
	RenewLock(ctx context.Context, path string, tok LockToken) (time.Time, error)
	Commit() error
	Rollback()
	// Deadline is when the transaction times out (zero before its first
	// operation).
	Deadline() time.Time
}

// NewRemoteTxn returns a Txn whose operations r carries out; its Bytes
// and Entity are kept here.
func NewRemoteTxn(b *Broker, r RemoteTxn) *Txn { return &Txn{b: b, remote: r} }

// txnSend is messages to store at commit.
type txnSend struct {
	path  string // the queue or topic they are stored in
	via   string // the entity the send goes through (path itself when not a send-via)
	group uint64 // path's data group when another than this broker's: they go by transfer
	msgs  []*Message
	key   string // a partitioned entity's: the transaction's partition key
}

// txnSettle is a settlement to apply at commit.
type txnSettle struct {
	q   *queue
	tok LockToken
	o   Outcome
}

// txnToken names one lock of one queue.
type txnToken struct {
	q   *queue
	tok LockToken
}

// BeginTxn starts a transaction. It holds nothing until its first
// operation.
func (b *Broker) BeginTxn() *Txn { return &Txn{b: b} }

// Send adds msgs, to be stored on the queue or topic at path when the
// transaction commits. via names the entity the send goes through (the
// link's entity for a send-via; "" for path itself): it counts as the
// entity of the operation. The messages are checked now as a send checks
// them (the entity exists and takes them) and again at commit. Send
// takes ownership of msgs, as [Broker.SendAsync] does.
func (t *Txn) Send(path, via string, msgs []*Message) error {
	if t.remote != nil || t.b.routed() {
		return t.forwardSend(path, via, msgs)
	}
	e, err := t.b.sendTarget(path)
	var group uint64 // the destination's data group, when not this broker's
	if err != nil {
		if via == "" || CodeOf(err) != CodeNotFound {
			return err
		}
		if group, err = t.b.txnTransferGroup(path, via, err); err != nil {
			return err
		}
	}
	var size int64
	if e != nil {
		d := e.desc.Load()
		if d.Kind == KindSubscription {
			return errf(CodeBadRequest, "cannot send to subscription '%s'", d.Path())
		}
		if d.Status == StatusDisabled || d.Status == StatusSendDisabled {
			return errf(CodeEntityDisabled, "Messaging entity '%s' is currently disabled for sending.", d.Path())
		}
		for _, m := range msgs {
			ms := measure(m)
			if err := checkSendable(d, m, ms); err != nil {
				return err
			}
			size += int64(ms.size)
		}
	} else {
		// The destination's group checks the messages when it applies
		// the transfer; what it refuses for good is dead-lettered in the
		// via queue (transfer.go).
		for _, m := range msgs {
			size += int64(measure(m).size)
		}
	}
	if via == "" {
		via = path
	} else if _, err := t.b.lookup(ParseAddress(via)); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.enlistLocked(via); err != nil {
		return err
	}
	if t.messages+len(msgs) > MaxTxnMessages {
		return errf(CodeQuotaExceeded, "Cannot send more than %d messages in a single transaction.", MaxTxnMessages)
	}
	if t.b.cfg.Faults.TxnAtOnce {
		// Test-only fault: stored now, whatever the outcome (under t.mu,
		// which nothing else of the broker takes).
		t.messages += len(msgs)
		_, err := t.b.Send(context.Background(), path, msgs...)
		return err
	}
	var key string
	if e != nil && e.parts != nil {
		d := e.desc.Load()
		// Service Bus: every message a transaction sends to a partitioned
		// entity has a partition key (its SessionId, PartitionKey or
		// MessageId), the same for all, so that one partition takes them.
		for _, m := range msgs {
			k := txnPartitionKey(m)
			if k == "" {
				return errf(CodeBadRequest, "A message sent in a transaction to the partitioned entity '%s' must have a partition key: a SessionId, a PartitionKey or a MessageId.", d.Path())
			}
			if key == "" {
				key = t.partKey
			}
			if key == "" {
				key = k
			}
			if k != key {
				return errf(CodeBadRequest, "The messages a transaction sends to the partitioned entity '%s' must all have the same partition key: '%s' is not '%s'.", d.Path(), k, key)
			}
		}
		if err := checkHeldPart(d, partitionOfKey(key, len(e.parts)), 0); err != nil {
			return err
		}
		t.partKey = key
	}
	t.sends = append(t.sends, txnSend{path: path, via: via, group: group, msgs: msgs, key: key})
	t.messages += len(msgs)
	t.bytes += size
	return nil
}

// txnPartitionKey is the partition key of a message sent in a
// transaction: its SessionId, PartitionKey or MessageId.
func txnPartitionKey(m *Message) string {
	if m.SessionID != "" {
		return m.SessionID
	}
	if m.PartitionKey != "" {
		return m.PartitionKey
	}
	return m.MessageIDString()
}

// Settle adds the settlement of the message locked by tok on the entity
// at path, applied when the transaction commits. The lock must be live
// now, and still be at commit. A lock settled twice in one transaction
// fails the second time with [ErrLockLost].
func (t *Txn) Settle(path string, tok LockToken, o Outcome) error {
	if t.remote != nil {
		if err := t.remote.Settle(path, tok, o); err != nil {
			return err
		}
		t.noteForwarded(path, 0)
		return nil
	}
	if t.b.routed() {
		in, err := t.routedInner(path)
		if err != nil {
			return err
		}
		return in.Settle(path, tok, o)
	}
	q, err := t.b.queueFor(path, byLock(tok))
	if err != nil {
		return err
	}
	if o.Kind < Complete || o.Kind > Release {
		return errf(CodeBadRequest, "unknown outcome %d", o.Kind)
	}
	q.mu.Lock()
	_, err = q.lockedLocked(tok, t.b.Now())
	q.mu.Unlock()
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.enlistLocked(path); err != nil {
		return err
	}
	k := txnToken{q, tok}
	if _, dup := t.tokens[k]; dup {
		return lockLost()
	}
	if len(t.settles) >= MaxTxnSettlements {
		return errf(CodeQuotaExceeded, "Cannot settle more than %d messages in a single transaction.", MaxTxnSettlements)
	}
	if t.tokens == nil {
		t.tokens = make(map[txnToken]struct{})
	}
	t.tokens[k] = struct{}{}
	if t.b.cfg.Faults.TxnAtOnce {
		// Test-only fault: settled now, whatever the outcome.
		return t.b.Settle(context.Background(), path, tok, o)
	}
	t.settles = append(t.settles, txnSettle{q: q, tok: tok, o: o})
	return nil
}

// RenewLock renews the lock tok holds, as [Broker.RenewLock] does, as an
// operation of the transaction: it counts towards its entity and its
// timeout. The renewal takes effect at once and stays whatever the
// transaction's outcome (a receiver relies on the new expiry now).
func (t *Txn) RenewLock(ctx context.Context, path string, tok LockToken) (time.Time, error) {
	if t.remote != nil {
		until, err := t.remote.RenewLock(ctx, path, tok)
		if err == nil {
			t.noteForwarded(path, 0)
		}
		return until, err
	}
	if t.b.routed() {
		in, err := t.routedInner(path)
		if err != nil {
			return time.Time{}, err
		}
		return in.RenewLock(ctx, path, tok)
	}
	if _, err := t.b.queueFor(path, byLock(LockToken{})); err != nil {
		return time.Time{}, err
	}
	t.mu.Lock()
	err := t.enlistLocked(path)
	t.mu.Unlock()
	if err != nil {
		return time.Time{}, err
	}
	return t.b.RenewLock(ctx, path, tok)
}

// enlistLocked checks that the transaction is open and that path's
// top-level entity is the transaction's, making it so for the first
// operation, which also starts the timeout.
func (t *Txn) enlistLocked(path string) error {
	now := t.b.Now()
	if err := t.openLocked(now); err != nil {
		return err
	}
	a := ParseAddress(path)
	key := entityKey(a.Entity)
	switch t.viaKey {
	case "":
		t.viaKey, t.viaName, t.first = key, a.Entity, now
	case key:
	default:
		return ErrTxnSpansEntities
	}
	return nil
}

// openLocked fails once the transaction ended, rolling it back if its
// timeout passed.
func (t *Txn) openLocked(now int64) error {
	if !t.ended && t.first != 0 && now-t.first >= int64(t.b.cfg.TxnTimeout) {
		t.endLocked()
		t.timedOut = true
	}
	switch {
	case t.timedOut:
		return ErrTxnTimeout
	case t.ended:
		return errf(CodeBadRequest, "The transaction has already been discharged.")
	}
	return nil
}

// endLocked ends the transaction and drops what it held.
func (t *Txn) endLocked() {
	t.ended = true
	t.sends, t.settles, t.tokens = nil, nil, nil
	t.messages, t.bytes = 0, 0
}

// Rollback ends the transaction without applying anything. Rolling back
// an ended transaction does nothing.
func (t *Txn) Rollback() {
	if t.remote != nil {
		t.remote.Rollback()
	} else if in := t.routedTxn(); in != nil {
		in.Rollback()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended {
		t.endLocked()
	}
}

// Deadline returns when the transaction times out, or the zero time if
// no operation started its timeout yet.
func (t *Txn) Deadline() time.Time {
	if t.remote != nil {
		return t.remote.Deadline()
	}
	if t.b.routed() {
		if in := t.routedTxn(); in != nil {
			return in.Deadline()
		}
		return time.Time{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first == 0 {
		return time.Time{}
	}
	return time.Unix(0, t.first+int64(t.b.cfg.TxnTimeout))
}

// Bytes returns the sizes of the messages the transaction holds to send.
func (t *Txn) Bytes() int64 {
	if in := t.routedTxn(); in != nil {
		return in.Bytes()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes
}

// Entity returns the top-level entity the transaction's operations go
// through, "" before its first operation.
func (t *Txn) Entity() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.viaName
}

// Commit applies the transaction: every settlement and send in one
// durable write, or none of them. It fails, and the transaction is rolled
// back, when a lock it settles is lost, an entity it touches is gone or
// refuses the messages, the store refuses the write ([ErrServerBusy]), or
// its timeout passed ([ErrTxnTimeout]). Either way the transaction has
// ended when Commit returns.
func (t *Txn) Commit() error {
	if t.remote != nil {
		t.mu.Lock()
		t.endLocked()
		t.mu.Unlock()
		return t.remote.Commit()
	}
	if t.b.routed() {
		in := t.routedTxn()
		if in == nil {
			return nil // nothing to commit
		}
		return in.Commit()
	}
	t.mu.Lock()
	if err := t.openLocked(t.b.Now()); err != nil {
		t.mu.Unlock()
		return err
	}
	sends, settles := t.sends, t.settles
	t.endLocked()
	t.mu.Unlock()
	return t.b.commitTxn(sends, settles)
}

// TxnTimeout returns how long a transaction may stay open after its
// first operation (Config.TxnTimeout).
func (b *Broker) TxnTimeout() time.Duration { return b.cfg.TxnTimeout }
