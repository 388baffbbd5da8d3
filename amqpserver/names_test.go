package amqpserver

import (
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// A link address that climbs out of an entity with a dot segment reaches
// nothing: with a token for "a", "a/../orders" (or "a/%2e%2e/orders") is
// outside the token's scope (amqp:unauthorized-access), and even with the
// namespace key it names no entity (amqp:not-found) rather than being read
// as "orders". Nothing reaches orders either way.
func TestAttachDotSegmentsReachNothing(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "a"})
	ts.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "orders"})

	c := ts.dialWith(t, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	aud := "amqp://" + ts.addr + "/a"
	if st, desc := putToken(t, c, aud, sas.Sign(aud, testKeyName, testKey, time.Now().Add(time.Hour))); st != 202 {
		t.Fatalf("token for a: status %d (%s), want 202", st, desc)
	}
	s := mustSession(t, c)
	mustSender(t, s, "a") // the token works where it is meant to
	for _, addr := range []string{"a/../orders", "a/%2e%2e/orders", "/a/./../orders", "amqps://" + ts.addr + "/a/../orders", "a/../orders/$management"} {
		_, err := s.NewSender(t.Context(), addr, nil)
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondUnauthorizedAccess {
			t.Errorf("send attach to %q with a token for a: %v, want unauthorized-access", addr, err)
		}
		_, err = s.NewReceiver(t.Context(), addr, nil)
		if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondUnauthorizedAccess {
			t.Errorf("receive attach from %q with a token for a: %v, want unauthorized-access", addr, err)
		}
	}
	if st, desc := putToken(t, c, "amqp://"+ts.addr+"/a/../orders", sas.Sign(aud, testKeyName, testKey, time.Now().Add(time.Hour))); st != 401 {
		t.Errorf("token for a put for a/../orders: status %d (%s), want 401", st, desc)
	}

	root := ts.session(t)
	_, err := root.NewSender(t.Context(), "a/../orders", nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Condition != amqp.ErrCondNotFound {
		t.Errorf("send attach to a/../orders with the namespace key: %v, want not-found", err)
	}
	if n, err := ts.Broker.Counts("orders"); err != nil || n.Active != 0 {
		t.Errorf("orders holds %+v (%v), want nothing", n, err)
	}
}
