package app

import (
	"context"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

// fencedBackend is a data group this node leads, as the routed broker's
// backend: its broker, each answer checked against the group's Session
// once the call returns. An answer the lease no longer allows becomes a
// retryable error (com.microsoft:server-busy) instead of reaching a
// client, as the single-group cluster's fenced connections and the peer
// calls' fenced answers (clusterrpc) guarantee; sends and settlements,
// whose success means committed, excepted.
type fencedBackend struct {
	b     *core.Broker
	valid func() bool
}

var _ core.Backend = fencedBackend{}

// errDeposed is what a call whose answer came too late gets.
var errDeposed = &core.Error{Code: core.CodeServerBusy, Msg: "this node stopped leading the entity's group; retry"}

func (f fencedBackend) check(err error) error {
	if err == nil && !f.valid() {
		return errDeposed
	}
	return err
}

// A send or a settlement that succeeded is committed: it holds whoever
// leads the group afterwards, so its answer is not fenced (fencing it
// turned a completion that took effect into a failure, and a stored send
// into one the client sends again; clusterrpc's committed answers).

func (f fencedBackend) Send(ctx context.Context, path string, msgs ...*core.Message) ([]int64, error) {
	return f.b.Send(ctx, path, msgs...)
}

func (f fencedBackend) SendAsync(path string, msgs []*core.Message, done func([]int64, error)) error {
	return f.b.SendAsync(path, msgs, done)
}

func (f fencedBackend) Receive(ctx context.Context, path string, opts core.ReceiveOptions) ([]*core.Message, error) {
	msgs, err := f.b.Receive(ctx, path, opts)
	if err = f.check(err); err != nil {
		return nil, err // taken messages stay locked: the next leader has them back
	}
	return msgs, nil
}

func (f fencedBackend) Settle(ctx context.Context, path string, tok core.LockToken, o core.Outcome) error {
	return f.b.Settle(ctx, path, tok, o)
}

func (f fencedBackend) CompleteMany(path string, toks []core.LockToken, durable bool) []error {
	return f.b.CompleteMany(path, toks, durable)
}

func (f fencedBackend) RenewLock(ctx context.Context, path string, tok core.LockToken) (time.Time, error) {
	t, err := f.b.RenewLock(ctx, path, tok)
	return t, f.check(err)
}

func (f fencedBackend) ReceiveDeferred(ctx context.Context, path string, mode core.ReceiveMode, seqs []int64) ([]*core.Message, error) {
	msgs, err := f.b.ReceiveDeferred(ctx, path, mode, seqs)
	if err = f.check(err); err != nil {
		return nil, err
	}
	return msgs, nil
}

func (f fencedBackend) Peek(ctx context.Context, path string, opts core.PeekOptions) ([]*core.Message, error) {
	msgs, err := f.b.Peek(ctx, path, opts)
	if err = f.check(err); err != nil {
		return nil, err
	}
	return msgs, nil
}

func (f fencedBackend) CancelScheduled(ctx context.Context, path string, seqs []int64) error {
	return f.check(f.b.CancelScheduled(ctx, path, seqs))
}

func (f fencedBackend) DeleteMessages(ctx context.Context, path string, opts core.DeleteOptions) (int, error) {
	n, err := f.b.DeleteMessages(ctx, path, opts)
	return n, f.check(err)
}

func (f fencedBackend) AcceptSession(ctx context.Context, path, id string) (*core.SessionLock, error) {
	sl, err := f.b.AcceptSession(ctx, path, id)
	if err = f.check(err); err != nil {
		return nil, err
	}
	return sl, nil
}

func (f fencedBackend) RenewSessionLock(ctx context.Context, path string, sl *core.SessionLock) (time.Time, error) {
	t, err := f.b.RenewSessionLock(ctx, path, sl)
	return t, f.check(err)
}

func (f fencedBackend) CloseSession(path string, sl *core.SessionLock) error {
	return f.check(f.b.CloseSession(path, sl))
}

func (f fencedBackend) GetSessionState(ctx context.Context, path string, sl *core.SessionLock) ([]byte, error) {
	st, err := f.b.GetSessionState(ctx, path, sl)
	return st, f.check(err)
}

func (f fencedBackend) SetSessionState(ctx context.Context, path string, sl *core.SessionLock, state []byte) error {
	return f.check(f.b.SetSessionState(ctx, path, sl, state))
}

func (f fencedBackend) ListSessions(ctx context.Context, path string, since time.Time) ([]string, error) {
	ids, err := f.b.ListSessions(ctx, path, since)
	return ids, f.check(err)
}

func (f fencedBackend) Sessions(path, after string, max int) ([]core.SessionInfo, int, error) {
	infos, n, err := f.b.Sessions(path, after, max)
	return infos, n, f.check(err)
}

func (f fencedBackend) CreateEntity(ctx context.Context, e core.Entity) (*core.Entity, error) {
	d, err := f.b.CreateEntity(ctx, e)
	return d, f.check(err)
}

func (f fencedBackend) UpdateEntity(ctx context.Context, e core.Entity) (*core.Entity, error) {
	d, err := f.b.UpdateEntity(ctx, e)
	return d, f.check(err)
}

func (f fencedBackend) DeleteEntity(ctx context.Context, path string) error {
	return f.check(f.b.DeleteEntity(ctx, path))
}

func (f fencedBackend) GetEntity(path string) (*core.Entity, error) {
	d, err := f.b.GetEntity(path)
	return d, f.check(err)
}

func (f fencedBackend) ListEntities(kind core.EntityKind, topic string) ([]*core.Entity, error) {
	es, err := f.b.ListEntities(kind, topic)
	return es, f.check(err)
}

func (f fencedBackend) AddRule(ctx context.Context, path string, r core.Rule) error {
	return f.check(f.b.AddRule(ctx, path, r))
}

func (f fencedBackend) RemoveRule(ctx context.Context, path, name string) error {
	return f.check(f.b.RemoveRule(ctx, path, name))
}

func (f fencedBackend) ListRules(path string) ([]core.Rule, error) {
	rs, err := f.b.ListRules(path)
	return rs, f.check(err)
}

func (f fencedBackend) Counts(path string) (core.Counts, error) {
	c, err := f.b.Counts(path)
	return c, f.check(err)
}

func (f fencedBackend) EntityStats(path string) (core.EntityStats, error) {
	s, err := f.b.EntityStats(path)
	return s, f.check(err)
}

func (f fencedBackend) EachEntity(fn func(*core.EntitySnapshot)) { f.b.EachEntity(fn) }

// BeginTxn implements core.Backend: the group broker's own transaction;
// its commit is one write the Session fences like any other.
func (f fencedBackend) BeginTxn() *core.Txn { return f.b.BeginTxn() }
