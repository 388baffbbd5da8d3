package namespace_test

import (
	"errors"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// Each namespace checks tokens against its own rules (or the root rules
// when it has none) and the rules of the entity a path lies in; a token
// reaches only what its rule covers, with the rights the rule grants.
func TestValidate(t *testing.T) {
	clk := clock.NewFake(coretest.Epoch)
	r := newRegistry(t, memstore.New(), clk, false)
	inherit := mustCreate(t, r, "inherit")
	own := mustCreate(t, r, "own",
		core.AuthorizationRule{KeyName: "sender", PrimaryKey: key1, SecondaryKey: key2, Rights: sas.Send},
		core.AuthorizationRule{KeyName: "admin", PrimaryKey: key2, Rights: sas.Manage})
	if _, err := own.Broker().CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "orders",
		AuthorizationRules: []core.AuthorizationRule{{KeyName: "reader", PrimaryKey: key1, Rights: sas.Listen}}}); err != nil {
		t.Fatal(err)
	}
	mustQueue(t, own, "other")
	exp := coretest.Epoch.Add(time.Hour)
	tok := func(host, path, keyName, key string) string {
		return sas.Sign("sb://"+host+"/"+path, keyName, key, exp)
	}
	for _, tc := range []struct {
		name string
		ns   interface {
			Validate(string, string, sas.Rights) (sas.Rights, error)
		}
		token string
		path  string
		need  sas.Rights
		err   error // nil: accepted
	}{
		{"root key on a namespace without rules", inherit, tok("inherit.localhost", "", rootName, rootKey), "q", sas.Manage, nil},
		{"root key under its alias", inherit, tok("localhost", "", rootName+"@inherit", rootKey), "q", sas.Manage, nil},
		{"namespace name as key name", inherit, tok("localhost", "", "inherit", rootKey), "q", sas.Manage, nil},
		{"root key on a namespace with rules", own, tok("own.localhost", "", rootName, rootKey), "q", sas.Send, sas.ErrUnknownKey},
		{"send rule sends", own, tok("own.localhost", "", "sender", key1), "orders", sas.Send, nil},
		{"secondary key", own, tok("own.localhost", "", "sender", key2), "orders", sas.Send, nil},
		{"send rule cannot listen", own, tok("own.localhost", "", "sender", key1), "orders", sas.Listen, sas.ErrInsufficientRights},
		{"send rule cannot manage", own, tok("own.localhost", "", "sender", key1), "orders", sas.Manage, sas.ErrInsufficientRights},
		{"manage implies listen", own, tok("own.localhost", "", "admin", key2), "orders/messages/head", sas.Listen, nil},
		{"wrong key", own, tok("own.localhost", "", "sender", rootKey), "orders", sas.Send, sas.ErrInvalidSignature},
		{"entity rule on its entity", own, tok("own.localhost", "orders", "reader", key1), "orders/messages/head", sas.Listen, nil},
		{"entity rule under its alias", own, tok("localhost", "orders", "reader@own", key1), "orders", sas.Listen, nil},
		{"entity rule cannot send", own, tok("own.localhost", "orders", "reader", key1), "orders", sas.Send, sas.ErrInsufficientRights},
		{"entity rule on another entity", own, tok("own.localhost", "", "reader", key1), "other", sas.Listen, sas.ErrUnknownKey},
		{"another namespace's key", inherit, tok("inherit.localhost", "", "sender", key1), "orders", sas.Send, sas.ErrUnknownKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.ns.Validate(tc.token, tc.path, tc.need)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("Validate: %v, want %v", err, tc.err)
			}
		})
	}

	// Rotation takes effect at once: the old key stops working.
	old := tok("own.localhost", "", "sender", key1)
	if _, err := r.SetRules(t.Context(), "own", []core.AuthorizationRule{
		{KeyName: "sender", PrimaryKey: key2, Rights: sas.Send}}); err != nil {
		t.Fatal(err)
	}
	if _, err := own.Validate(old, "orders", sas.Send); !errors.Is(err, sas.ErrInvalidSignature) {
		t.Errorf("a token of the rotated-out key: %v, want ErrInvalidSignature", err)
	}
	if _, err := own.Validate(tok("own.localhost", "", "sender", key2), "orders", sas.Send); err != nil {
		t.Errorf("a token of the new key: %v", err)
	}
	// Refused rules change nothing.
	if _, err := r.SetRules(t.Context(), "own", []core.AuthorizationRule{{KeyName: "x", PrimaryKey: "short", Rights: sas.Send}}); !errors.Is(err, core.ErrBadRequest) {
		t.Errorf("SetRules with a short key: %v, want ErrBadRequest", err)
	}
	if _, err := own.Validate(tok("own.localhost", "", "sender", key2), "orders", sas.Send); err != nil {
		t.Errorf("after a refused change: %v", err)
	}

	// SASL PLAIN: namespace rules, then entity rules.
	if rule, err := own.Authenticate("reader", key1); err != nil || rule.Scope != "orders" || rule.Rights != sas.Listen {
		t.Errorf("Authenticate with an entity's rule = %+v, %v; want Listen on orders", rule, err)
	}
	if _, err := own.Authenticate("reader", key2); !errors.Is(err, sas.ErrInvalidSignature) {
		t.Errorf("Authenticate with a wrong key: %v, want ErrInvalidSignature", err)
	}
}

// The test clock moves one namespace's time: its scheduled messages
// come due and its locks lapse at once; another namespace's do not.
func TestAdvanceClock(t *testing.T) {
	clk := clock.NewFake(coretest.Epoch)
	st := memstore.New()
	r := newRegistry(t, st, clk, true)
	fast, slow := mustCreate(t, r, "fast"), mustCreate(t, r, "slow")
	for _, ns := range []interface {
		Broker() *core.Broker
	}{fast, slow} {
		if _, err := ns.Broker().CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
			t.Fatal(err)
		}
		m := coretest.Text("later")
		m.ScheduledEnqueueTime = coretest.Epoch.Add(time.Hour)
		if _, err := ns.Broker().Send(t.Context(), "q", m, coretest.Text("now")); err != nil {
			t.Fatal(err)
		}
		if got, err := ns.Broker().Receive(coretest.Now(t), "q", core.ReceiveOptions{Mode: core.PeekLock}); err != nil || len(got) != 1 {
			t.Fatalf("peek-lock: %v, %v", got, err)
		}
	}
	now, err := r.AdvanceClock(t.Context(), "fast", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := coretest.Epoch.Add(2 * time.Hour); !now.Equal(want) {
		t.Errorf("the namespace's time is %v, want %v", now, want)
	}
	if got := receiveAll(t, fast, "q"); len(got) != 2 {
		t.Errorf("after moving its clock 2h, fast has %q available, want the scheduled and the unlocked message", got)
	}
	if got := receiveAll(t, slow, "q"); len(got) != 0 {
		t.Errorf("another namespace's messages came due: %q", got)
	}
	// The offset survives a restart.
	r.Close()
	r = newRegistry(t, st, clk, true)
	ns, _ := r.Get("fast")
	if d := ns.Clock().Ahead(); d != 2*time.Hour {
		t.Errorf("after a restart the clock is %v ahead, want 2h", d)
	}
}
