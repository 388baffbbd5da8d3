package core

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"
)

// Routing: a broker whose entities live in other brokers.
//
// A cluster with data groups (storage/raftstore, groups.go) runs one
// Broker per group on the node that leads it, each over that group's
// store, and places every queue or topic (with a topic's subscriptions)
// in one group. A node's fronts talk to one more Broker, made with
// [Config.Router]: it holds no entity itself; every operation on an
// entity goes to the [Backend] the router names for its queue or topic
// (a Broker of this process, or a stand-in that calls the node leading
// the group), and a listing asks every backend. So the fronts, which
// take a *Broker, serve every entity of the cluster from any node, one
// link or request at a time, without knowing where each lives.
//
// A transaction of a routed broker binds, at its first operation, to a
// transaction of the backend of that operation's entity; a transaction
// spans one top-level entity (and so one group) anyway.

// Router names the backends of a routed broker's entities.
type Router interface {
	// Route returns the backend of the queue or topic named name (its
	// subscriptions and subqueues go with it). It fails with ErrNotFound
	// when name is placed nowhere, and with a *Error of CodeServerBusy
	// when its backend cannot be reached now (retryable).
	Route(name string) (Backend, error)
	// Place returns the backend a new queue or topic named name goes to,
	// choosing and recording one if name has none yet.
	Place(ctx context.Context, name string) (Backend, error)
	// All returns every backend (a listing asks each); Local those of
	// this process (metrics report theirs).
	All() ([]Backend, error)
	Local() []Backend
}

// GroupRouter is a [Router] whose backends are groups (a cluster's data
// groups): a broker forwards in one write only to an entity it holds, and
// to an entity of another group by transfer (transfer.go). A routed
// broker over one places a new queue with the entities it forwards to.
type GroupRouter interface {
	Router
	// Group returns the group of the queue or topic named name, 0 when
	// name is placed nowhere.
	Group(ctx context.Context, name string) (uint64, error)
	// PlaceIn is Place, choosing group g (when not 0) if name has no
	// place yet.
	PlaceIn(ctx context.Context, name string, g uint64) (Backend, error)
}

// Backend is what a routed broker hands an entity's operations to: the
// entity operations of [Broker], which implements it.
type Backend interface {
	Send(ctx context.Context, path string, msgs ...*Message) ([]int64, error)
	SendAsync(path string, msgs []*Message, done func(seqs []int64, err error)) error
	Receive(ctx context.Context, path string, opts ReceiveOptions) ([]*Message, error)
	Settle(ctx context.Context, path string, tok LockToken, o Outcome) error
	CompleteMany(path string, toks []LockToken, durable bool) []error
	RenewLock(ctx context.Context, path string, tok LockToken) (time.Time, error)
	ReceiveDeferred(ctx context.Context, path string, mode ReceiveMode, seqs []int64) ([]*Message, error)
	Peek(ctx context.Context, path string, opts PeekOptions) ([]*Message, error)
	CancelScheduled(ctx context.Context, path string, seqs []int64) error
	DeleteMessages(ctx context.Context, path string, opts DeleteOptions) (int, error)
	AcceptSession(ctx context.Context, path, id string) (*SessionLock, error)
	RenewSessionLock(ctx context.Context, path string, sl *SessionLock) (time.Time, error)
	CloseSession(path string, sl *SessionLock) error
	GetSessionState(ctx context.Context, path string, sl *SessionLock) ([]byte, error)
	SetSessionState(ctx context.Context, path string, sl *SessionLock, state []byte) error
	ListSessions(ctx context.Context, path string, since time.Time) ([]string, error)
	Sessions(path, after string, max int) ([]SessionInfo, int, error)
	CreateEntity(ctx context.Context, e Entity) (*Entity, error)
	UpdateEntity(ctx context.Context, e Entity) (*Entity, error)
	DeleteEntity(ctx context.Context, path string) error
	GetEntity(path string) (*Entity, error)
	ListEntities(kind EntityKind, topic string) ([]*Entity, error)
	AddRule(ctx context.Context, path string, r Rule) error
	RemoveRule(ctx context.Context, path, name string) error
	ListRules(path string) ([]Rule, error)
	Counts(path string) (Counts, error)
	EntityStats(path string) (EntityStats, error)
	EachEntity(fn func(*EntitySnapshot))
	BeginTxn() *Txn
}

var _ Backend = (*Broker)(nil)

// routed reports whether b routes its entities (Config.Router).
func (b *Broker) routed() bool { return b.cfg.Router != nil }

// route returns the backend of the entity at path.
func (b *Broker) route(path string) (Backend, error) {
	name := ParseAddress(path).Entity
	if name == "" {
		return nil, entityNotFound(path)
	}
	if be, err := b.routeSpread(name); be != nil || err != nil {
		return be, err
	}
	return b.cfg.Router.Route(name)
}

// routeEntity returns the backend an entity being created goes to: a
// queue's or topic's place, a subscription's topic's.
func (b *Broker) routeEntity(ctx context.Context, e Entity, create bool) (Backend, error) {
	if sr, ok := b.cfg.Router.(SpreadRouter); ok {
		if be, err := b.routeEntitySpread(ctx, sr, e, create); be != nil || err != nil {
			return be, err
		}
	}
	if gr, ok := b.cfg.Router.(GroupRouter); ok {
		return b.routeGrouped(ctx, gr, e, create)
	}
	if e.Kind == KindSubscription {
		return b.route(e.Topic)
	}
	if create {
		return b.cfg.Router.Place(ctx, e.Name)
	}
	return b.route(e.Name)
}

// listRouted is ListEntities of a routed broker: every backend's, merged
// in path order.
func (b *Broker) listRouted(kind EntityKind, topic string) ([]*Entity, error) {
	if kind == KindSubscription {
		be, err := b.route(topic)
		if err != nil {
			return nil, err
		}
		return be.ListEntities(kind, topic)
	}
	all, err := b.cfg.Router.All()
	if err != nil {
		return nil, err
	}
	var out []*Entity
	seen := map[string]bool{} // a spread entity is in each of its groups
	for _, be := range all {
		es, err := be.ListEntities(kind, topic)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if key := entityKey(e.Path()); !seen[key] {
				seen[key] = true
				out = append(out, public(e))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Path()) < strings.ToLower(out[j].Path()) })
	return out, nil
}

// eachRouted is EachEntity of a routed broker: the entities of the
// backends in this process. A spread entity held by several of them is
// reported once, their parts added up (mergeSnapshots).
func (b *Broker) eachRouted(fn func(*EntitySnapshot)) {
	local := b.cfg.Router.Local()
	if len(local) == 1 {
		local[0].EachEntity(fn)
		return
	}
	mergeSnapshots(local, fn)
}

// routedInner binds a routed broker's transaction to the backend of its
// first operation's entity; later operations must name the same one.
func (t *Txn) routedInner(path string) (*Txn, error) {
	be, err := t.b.route(path)
	if err != nil {
		return nil, err
	}
	key := entityKey(ParseAddress(path).Entity)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.inner == nil:
		t.inner, t.viaKey, t.viaName = be.BeginTxn(), key, ParseAddress(path).Entity
	case t.viaKey != key:
		return nil, ErrTxnSpansEntities
	}
	return t.inner, nil
}

// routedTxn returns the inner transaction, nil before the first
// operation.
func (t *Txn) routedTxn() *Txn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inner
}

// forwardSend is Txn.Send of a remote stand-in or a routed broker's
// transaction.
func (t *Txn) forwardSend(path, via string, msgs []*Message) error {
	if t.remote != nil {
		if err := t.remote.Send(path, via, msgs); err != nil {
			return err
		}
		var size int64
		for _, m := range msgs {
			size += int64(m.Size())
		}
		if via == "" {
			via = path
		}
		t.noteForwarded(via, size)
		return nil
	}
	at := path
	if via != "" {
		at = via
	}
	in, err := t.routedInner(at)
	if err != nil {
		return err
	}
	return in.Send(path, via, msgs)
}

// noteForwarded records, on a remote stand-in, what Entity and Bytes
// report.
func (t *Txn) noteForwarded(path string, size int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.viaName == "" {
		t.viaName = ParseAddress(path).Entity
	}
	t.bytes += size
}

// routedSettleErr is what a routed broker reports for a settlement
// (Settle, CompleteMany) that failed with err. A refusal for now (server
// busy: the entity's group is changing leaders, its leader cannot be
// reached, or it stopped leading), a broken call (outcome unknown) or an
// internal failure means the lock lived in a broker that is gone or out
// of reach: it is reported lost, and the message is delivered again
// (unless the settlement was applied before its answer was lost; a
// retry could not tell either, the new leader knowing no lock of the
// old). A retryable answer is unsafe here: go-amqp takes any reply to a
// disposition as settling the delivery, so the Go SDK's retry of a
// rejected completion reports success without asking the broker again,
// and a message whose completion was never applied is delivered again
// after the client was told it was completed.
func routedSettleErr(err error) error {
	switch CodeOf(err) {
	case CodeServerBusy, CodeOutcomeUnknown, CodeTimeout, CodeInternal:
		var e *Error
		msg := err.Error()
		if errors.As(err, &e) && e.Msg != "" {
			msg = e.Msg
		}
		return &Error{Code: CodeLockLost, Msg: "The lock supplied is invalid: the broker holding it stopped serving the entity or cannot be reached (" + msg + "). The message will be delivered again, unless this settlement took effect before its answer was lost."}
	}
	return err
}
