package clusterrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
)

// Backend is a data group led by another node, as a routed broker's
// backend (core.Backend): each operation is a call on that node.
type Backend struct {
	c     *Client
	group uint64
	// home is the routed broker the backend serves: transactions are
	// made on it (core.NewRemoteTxn).
	home *core.Broker
}

// NewBackend returns group's backend, reached through c, for the routed
// broker home.
func NewBackend(c *Client, group uint64, home *core.Broker) *Backend {
	return &Backend{c: c, group: group, home: home}
}

var _ core.Backend = (*Backend)(nil)

// deadline is what a blocking call tells the server of ctx's deadline.
func deadline(ctx context.Context) int64 {
	if d, ok := ctx.Deadline(); ok {
		return d.UnixNano()
	}
	return 0
}

func (b *Backend) do(ctx context.Context, op byte, e *enc, changes bool) (*dec, error) {
	return b.doOrphan(ctx, op, e, changes, nil)
}

// doOrphan is do for a call whose answer holds locks: orphan gives them
// back when the answer comes after the call failed (Client.FailGroup).
// The request's bytes are queued (copied) before the call waits, so the
// caller may free e (a pooled encoder) as soon as it returns.
func (b *Backend) doOrphan(ctx context.Context, op byte, e *enc, changes bool, orphan func(*dec)) (*dec, error) {
	if e.err != nil {
		return nil, e.err
	}
	var late func([]byte)
	if orphan != nil {
		late = func(ans []byte) {
			if d, err := answer(ans, false); err == nil {
				orphan(d)
			}
		}
	}
	return b.c.call(ctx, op, b.group, e.b, changes, late)
}

// releaseLate gives back the messages of a peek-lock receive's answer
// that came after its call failed: nobody will deliver them, and their
// locks would keep them from every receiver until they expire.
func (b *Backend) releaseLate(path string) func(*dec) {
	return func(d *dec) {
		msgs := d.messages()
		if d.err != nil {
			return
		}
		for _, m := range msgs {
			_ = b.Settle(context.Background(), path, m.LockToken, core.Outcome{Kind: core.Release})
		}
		if len(msgs) > 0 {
			b.c.log.Info("released the messages of a receive answered after its call failed",
				zap.Uint64("group", b.group), zap.String("entity", path), zap.Int("messages", len(msgs)))
		}
	}
}

// Send implements core.Backend.
func (b *Backend) Send(ctx context.Context, path string, msgs ...*core.Message) ([]int64, error) {
	e := getEnc()
	defer e.free()
	e.string(path)
	e.messages(msgs)
	d, err := b.do(context.WithoutCancel(ctx), opSend, e, true)
	if err != nil {
		return nil, err
	}
	return d.int64s(), d.err
}

// SendAsync implements core.Backend. The request goes out before it
// returns, so that sends made one after the other reach the server, and
// are planned there, in that order; done runs when the answer comes. A
// send that cannot be planned fails through done, not here.
func (b *Backend) SendAsync(path string, msgs []*core.Message, done func(seqs []int64, err error)) error {
	e := getEnc()
	defer e.free()
	e.string(path)
	e.messages(msgs)
	if e.err != nil {
		return e.err
	}
	_, _, _, err := b.c.start(context.Background(), opSendAsync, b.group, e.b, true, nil, func(ans []byte) {
		d, err := answer(ans, true)
		if err != nil {
			done(nil, err)
			return
		}
		seqs := d.int64s()
		if d.err != nil {
			done(nil, d.err)
			return
		}
		done(seqs, nil)
	})
	return err
}

// Receive implements core.Backend.
func (b *Backend) Receive(ctx context.Context, path string, opts core.ReceiveOptions) ([]*core.Message, error) {
	e := getEnc()
	defer e.free()
	e.varint(deadline(ctx))
	e.string(path)
	e.byte(byte(opts.Mode))
	e.uvarint(uint64(max(opts.Max, 0)))
	e.uvarint(uint64(max(opts.MaxBytes, 0)))
	e.sessionLock(opts.Session)
	var orphan func(*dec)
	if opts.Mode == core.PeekLock {
		orphan = b.releaseLate(path)
	}
	d, err := b.doOrphan(ctx, opReceive, e, opts.Mode == core.ReceiveAndDelete, orphan)
	if err != nil {
		if deadlineEndedWait(ctx, err) {
			return nil, nil // as a local receive whose wait ran out
		}
		return nil, ctxCause(ctx, err)
	}
	msgs := d.messages()
	return msgs, d.err
}

// ctxCause is the error a blocking call that failed returns: ctx's own
// when ctx was cancelled (the server's answer then only echoes it), as a
// local call would.
func ctxCause(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return err
}

// deadlineEndedWait reports whether err is the server's answer to a
// blocking call this side cancelled because ctx's deadline passed: the
// wait there then ends with "context canceled", which the deadline caused,
// not a fault. Both sides wait for the same instant (the call carries
// it), so which one sees it first is a race; a REST receive through
// another node answered 500 instead of 204 when this side won it.
func deadlineEndedWait(ctx context.Context, err error) bool {
	var ce *core.Error
	return errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.As(err, &ce) &&
		ce.Code == core.CodeInternal && ce.Msg == context.Canceled.Error()
}

// Settle implements core.Backend.
func (b *Backend) Settle(ctx context.Context, path string, tok core.LockToken, o core.Outcome) error {
	e := getEnc()
	defer e.free()
	e.string(path)
	e.token(tok)
	e.outcome(o)
	_, err := b.do(context.WithoutCancel(ctx), opSettle, e, true)
	return err
}

// CompleteMany implements core.Backend.
func (b *Backend) CompleteMany(path string, toks []core.LockToken, durable bool) []error {
	errs := make([]error, len(toks))
	e := getEnc()
	defer e.free()
	e.string(path)
	e.uvarint(uint64(len(toks)))
	for _, t := range toks {
		e.token(t)
	}
	e.bool(durable)
	d, err := b.do(context.Background(), opCompleteMany, e, true)
	if err == nil {
		for i := range errs {
			if d.bool() {
				errs[i] = d.error()
			}
		}
		err = d.err
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// RenewLock implements core.Backend.
func (b *Backend) RenewLock(ctx context.Context, path string, tok core.LockToken) (time.Time, error) {
	e := &enc{}
	e.string(path)
	e.token(tok)
	d, err := b.do(ctx, opRenewLock, e, false)
	if err != nil {
		return time.Time{}, err
	}
	return d.time(), d.err
}

// ReceiveDeferred implements core.Backend.
func (b *Backend) ReceiveDeferred(ctx context.Context, path string, mode core.ReceiveMode, seqs []int64) ([]*core.Message, error) {
	e := &enc{}
	e.string(path)
	e.byte(byte(mode))
	e.int64s(seqs)
	var orphan func(*dec)
	if mode == core.PeekLock {
		orphan = b.releaseLate(path)
	}
	d, err := b.doOrphan(context.WithoutCancel(ctx), opReceiveDeferred, e, true, orphan)
	if err != nil {
		return nil, err
	}
	msgs := d.messages()
	return msgs, d.err
}

// Peek implements core.Backend. opts.Reserve is asked here, of each
// message the server returned, and the peek ends where it refuses.
func (b *Backend) Peek(ctx context.Context, path string, opts core.PeekOptions) ([]*core.Message, error) {
	e := &enc{}
	e.string(path)
	e.varint(opts.From)
	e.uvarint(uint64(max(opts.Max, 0)))
	e.string(opts.SessionID)
	e.uvarint(uint64(max(opts.MaxBytes, 0)))
	d, err := b.do(ctx, opPeek, e, false)
	if err != nil {
		return nil, err
	}
	msgs := d.messages()
	if d.err != nil {
		return nil, d.err
	}
	if opts.Reserve != nil {
		for i, m := range msgs {
			if !opts.Reserve(m.Size()) {
				return msgs[:i], nil
			}
		}
	}
	return msgs, nil
}

// CancelScheduled implements core.Backend.
func (b *Backend) CancelScheduled(ctx context.Context, path string, seqs []int64) error {
	e := &enc{}
	e.string(path)
	e.int64s(seqs)
	_, err := b.do(context.WithoutCancel(ctx), opCancelScheduled, e, true)
	return err
}

// DeleteMessages implements core.Backend.
func (b *Backend) DeleteMessages(ctx context.Context, path string, opts core.DeleteOptions) (int, error) {
	e := &enc{}
	e.string(path)
	e.uvarint(uint64(max(opts.Max, 0)))
	e.time(opts.Before)
	e.string(opts.SessionID)
	d, err := b.do(context.WithoutCancel(ctx), opDeleteMessages, e, true)
	if err != nil {
		return 0, err
	}
	return int(d.uvarint()), d.err
}

// AcceptSession implements core.Backend.
func (b *Backend) AcceptSession(ctx context.Context, path, id string) (*core.SessionLock, error) {
	e := &enc{}
	e.varint(deadline(ctx))
	e.string(path)
	e.string(id)
	d, err := b.doOrphan(ctx, opAcceptSession, e, false, func(d *dec) {
		// A session lock nobody holds: closed, so that others may take it.
		if sl := d.sessionLock(); d.err == nil && sl != nil {
			_ = b.CloseSession(path, sl)
		}
	})
	if err != nil {
		if deadlineEndedWait(ctx, err) {
			// As a local accept whose wait ran out (core.Broker.AcceptSession).
			return nil, &core.Error{Code: core.CodeTimeout, Msg: fmt.Sprintf("No session available to accept on '%s' within the timeout.", path)}
		}
		return nil, ctxCause(ctx, err)
	}
	sl := d.sessionLock()
	if d.err != nil {
		return nil, d.err
	}
	if sl == nil {
		return nil, errMalformed
	}
	ended := make(chan struct{})
	sl.SetEnded(ended)
	go b.watchSessionLock(path, sl, ended)
	return sl, nil
}

// watchSessionLock closes ended, the Ended channel of sl (a session lock
// the group's leader handed out), once the leader says the lock ended:
// it expired, another receiver took the session, the holder closed it,
// the leader's broker stopped (a new leader holds none of the old one's
// locks). The front then detaches the holder's link with
// session-lock-lost at once, as it does for a lock of its own process,
// rather than at the holder's next settlement. A call that fails (the
// connection broke, the leader no longer leads, the entity is gone) ends
// the lock as well: the lock cannot be known to hold. Only an internal
// error leaves it unwatched (settlements still find out).
func (b *Backend) watchSessionLock(path string, sl *core.SessionLock, ended chan struct{}) {
	e := &enc{}
	e.string(path)
	e.sessionLock(sl)
	_, err := b.do(context.Background(), opSessionEnded, e, false)
	if ce := (*core.Error)(nil); errors.As(err, &ce) && ce.Code == core.CodeInternal {
		b.c.log.Warn("cannot watch a session lock held on another node; its end is found by its holder's next call",
			zap.Uint64("group", b.group), zap.String("entity", path), zap.Error(err))
		return
	}
	close(ended)
}

// sessionCall is the calls that take a path and a session lock.
func (b *Backend) sessionCall(ctx context.Context, op byte, path string, sl *core.SessionLock, more func(*enc), changes bool) (*dec, error) {
	e := &enc{}
	e.string(path)
	e.sessionLock(sl)
	if more != nil {
		more(e)
	}
	return b.do(ctx, op, e, changes)
}

// RenewSessionLock implements core.Backend.
func (b *Backend) RenewSessionLock(ctx context.Context, path string, sl *core.SessionLock) (time.Time, error) {
	d, err := b.sessionCall(ctx, opRenewSessionLock, path, sl, nil, false)
	if err != nil {
		return time.Time{}, err
	}
	until := d.time()
	if d.err == nil {
		sl.LockedUntil = until
	}
	return until, d.err
}

// CloseSession implements core.Backend.
func (b *Backend) CloseSession(path string, sl *core.SessionLock) error {
	_, err := b.sessionCall(context.Background(), opCloseSession, path, sl, nil, true)
	return err
}

// GetSessionState implements core.Backend.
func (b *Backend) GetSessionState(ctx context.Context, path string, sl *core.SessionLock) ([]byte, error) {
	d, err := b.sessionCall(ctx, opGetSessionState, path, sl, nil, false)
	if err != nil {
		return nil, err
	}
	has := d.bool()
	st := d.bytes()
	if d.err != nil {
		return nil, d.err
	}
	if !has {
		return nil, nil
	}
	if st == nil {
		st = []byte{}
	}
	return st, nil
}

// SetSessionState implements core.Backend.
func (b *Backend) SetSessionState(ctx context.Context, path string, sl *core.SessionLock, state []byte) error {
	_, err := b.sessionCall(context.WithoutCancel(ctx), opSetSessionState, path, sl, func(e *enc) {
		e.bool(state != nil)
		if state != nil {
			e.bytes(state)
		}
	}, true)
	return err
}

// ListSessions implements core.Backend.
func (b *Backend) ListSessions(ctx context.Context, path string, since time.Time) ([]string, error) {
	e := &enc{}
	e.string(path)
	e.time(since)
	d, err := b.do(ctx, opListSessions, e, false)
	if err != nil {
		return nil, err
	}
	var ids []string
	d.json(&ids)
	return ids, d.err
}

// Sessions implements core.Backend.
func (b *Backend) Sessions(path, after string, max int) ([]core.SessionInfo, int, error) {
	e := &enc{}
	e.string(path)
	e.string(after)
	e.uvarint(uint64(max))
	d, err := b.do(context.Background(), opSessions, e, false)
	if err != nil {
		return nil, 0, err
	}
	var infos []core.SessionInfo
	d.json(&infos)
	total := int(d.uvarint())
	return infos, total, d.err
}

func (b *Backend) entityCall(ctx context.Context, op byte, ent core.Entity) (*core.Entity, error) {
	e := &enc{}
	e.entity(&ent)
	d, err := b.do(context.WithoutCancel(ctx), op, e, true)
	if err != nil {
		return nil, err
	}
	out := d.entity()
	return out, d.err
}

// CreateEntity implements core.Backend.
func (b *Backend) CreateEntity(ctx context.Context, ent core.Entity) (*core.Entity, error) {
	return b.entityCall(ctx, opCreateEntity, ent)
}

// UpdateEntity implements core.Backend.
func (b *Backend) UpdateEntity(ctx context.Context, ent core.Entity) (*core.Entity, error) {
	return b.entityCall(ctx, opUpdateEntity, ent)
}

// DeleteEntity implements core.Backend.
func (b *Backend) DeleteEntity(ctx context.Context, path string) error {
	e := &enc{}
	e.string(path)
	_, err := b.do(context.WithoutCancel(ctx), opDeleteEntity, e, true)
	return err
}

// GetEntity implements core.Backend.
func (b *Backend) GetEntity(path string) (*core.Entity, error) {
	e := &enc{}
	e.string(path)
	d, err := b.do(context.Background(), opGetEntity, e, false)
	if err != nil {
		return nil, err
	}
	out := d.entity()
	return out, d.err
}

// ListEntities implements core.Backend.
func (b *Backend) ListEntities(kind core.EntityKind, topic string) ([]*core.Entity, error) {
	e := &enc{}
	e.byte(byte(kind))
	e.string(topic)
	d, err := b.do(context.Background(), opListEntities, e, false)
	if err != nil {
		return nil, err
	}
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		return nil, errMalformed
	}
	out := make([]*core.Entity, 0, n)
	for range n {
		if x := d.entity(); x != nil {
			out = append(out, x)
		}
	}
	return out, d.err
}

// AddRule implements core.Backend.
func (b *Backend) AddRule(ctx context.Context, path string, r core.Rule) error {
	e := &enc{}
	e.string(path)
	e.rule(r)
	_, err := b.do(context.WithoutCancel(ctx), opAddRule, e, true)
	return err
}

// RemoveRule implements core.Backend.
func (b *Backend) RemoveRule(ctx context.Context, path, name string) error {
	e := &enc{}
	e.string(path)
	e.string(name)
	_, err := b.do(context.WithoutCancel(ctx), opRemoveRule, e, true)
	return err
}

// ListRules implements core.Backend.
func (b *Backend) ListRules(path string) ([]core.Rule, error) {
	e := &enc{}
	e.string(path)
	d, err := b.do(context.Background(), opListRules, e, false)
	if err != nil {
		return nil, err
	}
	rs := d.rules()
	return rs, d.err
}

// Counts implements core.Backend.
func (b *Backend) Counts(path string) (core.Counts, error) {
	e := &enc{}
	e.string(path)
	var c core.Counts
	d, err := b.do(context.Background(), opCounts, e, false)
	if err != nil {
		return c, err
	}
	d.json(&c)
	return c, d.err
}

// EntityStats implements core.Backend.
func (b *Backend) EntityStats(path string) (core.EntityStats, error) {
	e := &enc{}
	e.string(path)
	var st core.EntityStats
	d, err := b.do(context.Background(), opEntityStats, e, false)
	if err != nil {
		return st, err
	}
	d.json(&st)
	return st, d.err
}

// EachEntity implements core.Backend: another node's entities are its to
// report (metrics), so this reports none.
func (b *Backend) EachEntity(func(*core.EntitySnapshot)) {}

// BeginTxn implements core.Backend: a transaction of the remote group,
// begun there at its first operation.
func (b *Backend) BeginTxn() *core.Txn {
	return core.NewRemoteTxn(b.home, &remoteTxn{b: b})
}

// remoteTxn carries a transaction's operations to the group's leader.
type remoteTxn struct {
	b *Backend

	mu       sync.Mutex // guards the fields below
	id       uint64     // 0 before the first operation
	deadline time.Time
	err      error // the begin failed
}

// txnCall makes a transaction call, beginning the transaction first.
func (t *remoteTxn) txnCall(ctx context.Context, op byte, args func(*enc), changes bool) (*dec, error) {
	t.mu.Lock()
	if t.id == 0 && t.err == nil {
		d, err := t.b.do(ctx, opTxnBegin, &enc{}, false)
		if err == nil {
			t.id = d.uvarint()
			err = d.err
		}
		t.err = err
	}
	id, err := t.id, t.err
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e := &enc{}
	e.uvarint(id)
	if args != nil {
		args(e)
	}
	return t.b.do(ctx, op, e, changes)
}

// done reads the deadline every transaction answer ends with.
func (t *remoteTxn) done(d *dec) error {
	dl := d.time()
	if d.err != nil {
		return d.err
	}
	t.mu.Lock()
	t.deadline = dl
	t.mu.Unlock()
	return nil
}

func (t *remoteTxn) Send(path, via string, msgs []*core.Message) error {
	d, err := t.txnCall(context.Background(), opTxnSend, func(e *enc) {
		e.string(path)
		e.string(via)
		e.messages(msgs)
	}, false)
	if err != nil {
		return err
	}
	return t.done(d)
}

func (t *remoteTxn) Settle(path string, tok core.LockToken, o core.Outcome) error {
	d, err := t.txnCall(context.Background(), opTxnSettle, func(e *enc) {
		e.string(path)
		e.token(tok)
		e.outcome(o)
	}, false)
	if err != nil {
		return err
	}
	return t.done(d)
}

func (t *remoteTxn) RenewLock(ctx context.Context, path string, tok core.LockToken) (time.Time, error) {
	d, err := t.txnCall(ctx, opTxnRenewLock, func(e *enc) {
		e.string(path)
		e.token(tok)
	}, false)
	if err != nil {
		return time.Time{}, err
	}
	until := d.time()
	return until, t.done(d)
}

func (t *remoteTxn) Commit() error {
	t.mu.Lock()
	begun := t.id != 0
	t.mu.Unlock()
	if !begun {
		return nil
	}
	d, err := t.txnCall(context.Background(), opTxnCommit, nil, true)
	if err != nil {
		return err
	}
	return t.done(d)
}

func (t *remoteTxn) Rollback() {
	t.mu.Lock()
	begun := t.id != 0
	t.mu.Unlock()
	if begun {
		_, _ = t.txnCall(context.Background(), opTxnRollback, nil, false)
	}
}

func (t *remoteTxn) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}
