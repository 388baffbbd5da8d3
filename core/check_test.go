package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
)

// Check sees each kind of difference between memory and store: it is
// what the fault and script tests rely on, so it must be able to fail.
func TestCheckFindsDifferences(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, env *coretest.Env, b *storage.Batch)
		want   string
	}{
		{"state record gone", func(t *testing.T, env *coretest.Env, b *storage.Batch) {
			b.Delete(core.StateKey(env.Broker, "q", 1))
		}, "q: message 1 is in memory (available) but not stored"},
		{"state record added", func(t *testing.T, env *coretest.Env, b *storage.Batch) {
			v, _ := env.Store.Get(core.StateKey(env.Broker, "q", 1))
			b.Set(core.StateKey(env.Broker, "q", 9), v)
		}, "q: message 9 is stored (Active) but not in memory"},
		{"body gone", func(t *testing.T, env *coretest.Env, b *storage.Batch) {
			b.Delete(core.BodyKey(env.Broker, "q", 2))
		}, "q: the body of message 2 is missing"},
		{"body garbled", func(t *testing.T, env *coretest.Env, b *storage.Batch) {
			b.Set(core.BodyKey(env.Broker, "q", 2), []byte{1, 2})
		}, "the body of message 2 cannot be read"},
		{"shared body gone", func(t *testing.T, env *coretest.Env, b *storage.Batch) {
			b.Delete(core.BodyKey(env.Broker, "t/Subscriptions/a", 1))
		}, "t/Subscriptions/a: the body of message 1 is missing"},
		{"subscription copy gone", func(t *testing.T, env *coretest.Env, b *storage.Batch) {
			b.Delete(core.StateKey(env.Broker, "t/Subscriptions/b", 1))
		}, `topic "t": body 1 counts 2 references, 1 copies point at it`},
		{"orphan body", func(t *testing.T, env *coretest.Env, b *storage.Batch) {
			k := core.BodyKey(env.Broker, "q", 1)
			v, _ := env.Store.Get(k)
			k[len(k)-1] = 77
			b.Set(k, v)
		}, "the body of message 77 is stored but no message needs it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := coretest.New(t)
			env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
			env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
			env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "a"})
			env.MustCreate(t, core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "b"})
			env.MustSend(t, "q", coretest.Text("one"), coretest.Text("two"))
			env.MustSend(t, "t", coretest.Text("shared"))
			mustCheck(t, env, "before the damage")
			var b storage.Batch
			tc.damage(t, env, &b)
			if err := env.Store.Apply(&b); err != nil {
				t.Fatal(err)
			}
			err := env.Broker.Check()
			var ce *core.CheckError
			if !errors.As(err, &ce) || !strings.Contains(strings.Join(ce.Findings, "\n"), tc.want) {
				t.Fatalf("check: %v\nwant a finding containing %q", err, tc.want)
			}
		})
	}
}
