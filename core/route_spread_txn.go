package core

import (
	"context"
	"sync"
	"time"
)

// spreadTxn is a transaction on a spread entity (a [RemoteTxn]): it binds
// at its first operation to a transaction of the group that operation
// belongs to (a send's partition key's, a settlement's lock token's).
// Service Bus has a transaction on a partitioned entity use one partition
// key, so one partition; an operation of another group is refused as
// Service Bus refuses the second partition key.
type spreadTxn struct {
	s *spreadBackend

	mu    sync.Mutex
	group uint64 // the group bound to; 0 before the first operation
	inner *Txn
}

// bind returns the transaction of group g, beginning it at the first
// operation.
func (t *spreadTxn) bind(g uint64, what string) (*Txn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.inner == nil:
		be, err := t.s.be(g)
		if err != nil {
			return nil, err
		}
		t.group, t.inner = g, be.BeginTxn()
	case t.group != g:
		return nil, errf(CodeBadRequest, "A transaction on a partitioned entity uses one partition: this %s belongs to another partition than the transaction's first operation.", what)
	}
	return t.inner, nil
}

func (t *spreadTxn) Send(path, via string, msgs []*Message) error {
	g := t.s.sp.Groups[0]
	if len(msgs) > 0 {
		if k := txnPartitionKey(msgs[0]); k != "" {
			g = t.s.groupOfKey(k)
		}
	}
	in, err := t.bind(g, "send")
	if err != nil {
		return err
	}
	return in.Send(path, via, msgs)
}

func (t *spreadTxn) Settle(path string, tok LockToken, o Outcome) error {
	in, err := t.bind(t.s.groupOfLock(tok), "settlement")
	if err != nil {
		return err
	}
	return in.Settle(path, tok, o)
}

func (t *spreadTxn) RenewLock(ctx context.Context, path string, tok LockToken) (time.Time, error) {
	in, err := t.bind(t.s.groupOfLock(tok), "lock renewal")
	if err != nil {
		return time.Time{}, err
	}
	return in.RenewLock(ctx, path, tok)
}

// current is the bound transaction, nil before the first operation.
func (t *spreadTxn) current() *Txn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inner
}

func (t *spreadTxn) Commit() error {
	if in := t.current(); in != nil {
		return in.Commit()
	}
	return nil
}

func (t *spreadTxn) Rollback() {
	if in := t.current(); in != nil {
		in.Rollback()
	}
}

func (t *spreadTxn) Deadline() time.Time {
	if in := t.current(); in != nil {
		return in.Deadline()
	}
	return time.Time{}
}
