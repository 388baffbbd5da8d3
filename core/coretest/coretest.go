// Package coretest holds fixtures for tests of the core and of the fronts:
// a broker on an in-memory store with a fake clock, restartable on the same
// store, and a store decorator that counts storage operations.
package coretest

import (
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// Epoch is the fake clock's start time in tests.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Opener returns the store a broker runs on. It is called once when the
// [Env] starts (prev nil) and again on every [Env.Restart] with the store
// the stopped broker used, which it may return as is (memstore) or close
// and reopen (a store on disk).
type Opener func(t testing.TB, prev storage.Store) storage.Store

// MemOpener keeps one memstore across restarts, like a process whose disk
// survives it.
func MemOpener(t testing.TB, prev storage.Store) storage.Store {
	if prev != nil {
		return prev
	}
	return memstore.New()
}

// Env is a broker under test.
type Env struct {
	Broker *core.Broker
	Store  storage.Store
	Clock  *clock.Fake
	open   Opener
	limits core.Limits
}

// New returns a broker on a fresh memstore with a fake clock, closed at
// the end of the test.
func New(t testing.TB) *Env {
	t.Helper()
	return NewWith(t, MemOpener)
}

// NewWith returns a broker on the store open returns, with a fake clock
// set to [Epoch]. The broker is closed at the end of the test; closing the
// store is the opener's business.
func NewWith(t testing.TB, open Opener) *Env {
	t.Helper()
	return NewWithLimits(t, open, core.Limits{})
}

// NewWithLimits is [NewWith] for a broker with limits l, kept across
// restarts.
func NewWithLimits(t testing.TB, open Opener, l core.Limits) *Env {
	t.Helper()
	e := &Env{Clock: clock.NewFake(Epoch), open: open, limits: l}
	e.Store = open(t, nil)
	e.start(t)
	t.Cleanup(func() { e.Broker.Close() })
	return e
}

// Reopen starts a broker on an existing store (a restart).
func Reopen(t testing.TB, st storage.Store, clk *clock.Fake) *Env {
	t.Helper()
	e := &Env{Store: st, Clock: clk, open: func(testing.TB, storage.Store) storage.Store { return st }}
	e.start(t)
	t.Cleanup(func() { e.Broker.Close() })
	return e
}

func (e *Env) start(t testing.TB) {
	t.Helper()
	b, err := core.New(core.Config{Store: e.Store, Clock: e.Clock, Stats: true, Limits: e.limits})
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	e.Broker = b
}

// Restart stops the broker and starts a new one on the same data, as after
// a process restart: every lock is lost, everything durable is recovered.
// The clock keeps its time.
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	if err := e.Broker.Close(); err != nil {
		t.Fatalf("close broker: %v", err)
	}
	e.Store = e.open(t, e.Store)
	e.start(t)
}

// MustCreate creates an entity or fails the test.
func (e *Env) MustCreate(t testing.TB, ent core.Entity) *core.Entity {
	t.Helper()
	got, err := e.Broker.CreateEntity(t.Context(), ent)
	if err != nil {
		t.Fatalf("create %s %q: %v", ent.Kind, ent.Path(), err)
	}
	return got
}

// MustSend sends messages or fails the test.
func (e *Env) MustSend(t testing.TB, path string, msgs ...*core.Message) []int64 {
	t.Helper()
	seqs, err := e.Broker.Send(t.Context(), path, msgs...)
	if err != nil {
		t.Fatalf("send to %q: %v", path, err)
	}
	return seqs
}

// MustReceive takes up to max messages that are available now (it does not
// wait) or fails the test.
func (e *Env) MustReceive(t testing.TB, path string, mode core.ReceiveMode, max int) []*core.Message {
	t.Helper()
	msgs, err := e.Broker.Receive(Now(t), path, core.ReceiveOptions{Mode: mode, Max: max})
	if err != nil {
		t.Fatalf("receive from %q: %v", path, err)
	}
	return msgs
}

// MustSettle settles a lock or fails the test.
func (e *Env) MustSettle(t testing.TB, path string, tok core.LockToken, o core.Outcome) {
	t.Helper()
	if err := e.Broker.Settle(t.Context(), path, tok, o); err != nil {
		t.Fatalf("settle %v on %q: %v", o.Kind, path, err)
	}
}

// MustCounts returns an entity's counts or fails the test.
func (e *Env) MustCounts(t testing.TB, path string) core.Counts {
	t.Helper()
	c, err := e.Broker.Counts(path)
	if err != nil {
		t.Fatalf("counts of %q: %v", path, err)
	}
	return c
}

// Text returns a message with a text body.
func Text(body string) *core.Message {
	return &core.Message{Body: []byte(body)}
}

// Bodies returns the bodies of msgs as strings, for comparisons.
func Bodies(msgs []*core.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}
