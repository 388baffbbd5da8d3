package amqpserver

import (
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// A SASL PLAIN login has no token to expire, but its key is checked again
// while its links live: once the key's rule is rotated away, its links
// are detached with amqp:unauthorized-access at the next check; a login
// with the rule's new key keeps working.
func TestPlainLoginEndsWhenItsKeyIsRotated(t *testing.T) {
	const (
		oldKey = "b2xkLWtleS1vbGQta2V5LW9sZC1rZXktb2xkLWtleS0="
		newKey = "bmV3LWtleS1uZXcta2V5LW5ldy1rZXktbmV3LWtleS0="
	)
	reg, err := namespace.Open(namespace.Config{Store: memstore.New(),
		RootRules: []sas.Rule{{KeyName: testKeyName, Key: testKey, Rights: sas.Manage}},
		NewBroker: func(name string, s storage.Store, c clock.Clock) (*core.Broker, error) {
			return core.New(core.Config{Store: s, Clock: c, Namespace: name})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	rules := func(key string) []core.AuthorizationRule {
		return []core.AuthorizationRule{{KeyName: "reader", PrimaryKey: key, Rights: sas.Listen}}
	}
	sales, err := reg.Create(t.Context(), "sales", rules(oldKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sales.Broker().CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, func(c *Config) { c.Namespaces, c.TokenCheckInterval = reg, 20*time.Millisecond })
	login := func(key string) *amqp.Receiver {
		t.Helper()
		c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("reader@sales", key)})
		return mustReceiver(t, mustSession(t, c), "q", amqp.ReceiverSettleModeSecond)
	}
	old := login(oldKey)
	if _, err := reg.SetRules(t.Context(), "sales", rules(newKey)); err != nil {
		t.Fatal(err)
	}
	if cond := waitDetached(t, old); cond != amqp.ErrCondUnauthorizedAccess {
		t.Errorf("the old key's receiver detached with %s, want unauthorized-access", cond)
	}
	fresh := login(newKey)
	if _, err := sales.Broker().Send(t.Context(), "q", &core.Message{Body: []byte("after the rotation")}); err != nil {
		t.Fatal(err)
	}
	if got := string(mustReceive(t, fresh).GetData()); got != "after the rotation" {
		t.Errorf("the new key's receiver got %q", got)
	}
}
