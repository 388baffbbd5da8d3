// Package coretest holds fixtures for tests of the core and of the fronts:
// a broker on an in-memory store with a fake clock.
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

// Env is a broker under test.
type Env struct {
	Broker *core.Broker
	Store  storage.Store
	Clock  *clock.Fake
}

// New returns a broker on a fresh memstore with a fake clock, closed at
// the end of the test.
func New(t testing.TB) *Env {
	t.Helper()
	return Reopen(t, memstore.New(), clock.NewFake(Epoch))
}

// Reopen starts a broker on an existing store (a restart).
func Reopen(t testing.TB, st storage.Store, clk *clock.Fake) *Env {
	t.Helper()
	b, err := core.New(core.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return &Env{Broker: b, Store: st, Clock: clk}
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

// Text returns a message with a text body.
func Text(body string) *core.Message {
	return &core.Message{Body: []byte(body)}
}
