package namespace_test

import (
	"errors"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

const (
	rootName = "RootManageSharedAccessKey"
	rootKey  = "SAS_KEY_VALUE"
	key1     = "0123456789abcdef0123456789abcdef0123456789a="
	key2     = "zyxwvutsrqponmlkjihgfedcba9876543210zyxwvut="
)

// newRegistry opens a registry on st with a fake clock.
func newRegistry(t testing.TB, st storage.Store, clk *clock.Fake, testClock bool) *namespace.Registry {
	t.Helper()
	r, err := namespace.Open(namespace.Config{
		Store: st, Clock: clk, TestClock: testClock, DefaultName: "sbemulatorns",
		RootRules: []sas.Rule{{KeyName: rootName, Key: rootKey, Rights: sas.Manage}},
		TokenNow:  clk.Now,
		NewBroker: func(name string, s storage.Store, c clock.Clock) (*core.Broker, error) {
			return core.New(core.Config{Store: s, Clock: c, Namespace: name})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func mustCreate(t testing.TB, r *namespace.Registry, name string, rules ...core.AuthorizationRule) *namespace.Namespace {
	t.Helper()
	ns, err := r.Create(t.Context(), name, rules)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func mustQueue(t testing.TB, ns *namespace.Namespace, name string) {
	t.Helper()
	if _, err := ns.Broker().CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: name}); err != nil {
		t.Fatal(err)
	}
}

func receiveAll(t testing.TB, ns *namespace.Namespace, q string) []string {
	t.Helper()
	msgs, err := ns.Broker().Receive(coretest.Now(t), q, core.ReceiveOptions{Mode: core.ReceiveAndDelete, Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	return coretest.Bodies(msgs)
}

// Namespaces of the same store keep their entities and messages apart,
// survive a restart, and a deleted one takes all its keys with it and
// nothing of the others.
func TestIsolationRestartAndDelete(t *testing.T) {
	st := memstore.New()
	clk := clock.NewFake(coretest.Epoch)
	r := newRegistry(t, st, clk, false)
	sales, billing := mustCreate(t, r, "Sales"), mustCreate(t, r, "billing")
	for _, ns := range []*namespace.Namespace{r.Default(), sales, billing} {
		mustQueue(t, ns, "orders")
		if _, err := ns.Broker().Send(t.Context(), "orders", coretest.Text("for "+ns.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if sales.Name() != "sales" {
		t.Errorf("name %q, want it in lower case", sales.Name())
	}
	r.Close()

	r = newRegistry(t, st, clk, false)
	if got := len(r.List()); got != 3 {
		t.Fatalf("%d namespaces after a restart, want 3", got)
	}
	sales, _ = r.Get("sales")
	if got := receiveAll(t, sales, "orders"); len(got) != 1 || got[0] != "for sales" {
		t.Fatalf("sales holds %q, want only its own message", got)
	}
	old, _ := r.Get("billing")
	if err := r.Delete(t.Context(), "billing"); err != nil {
		t.Fatal(err)
	}
	// A caller still holding the deleted namespace's broker (a request in
	// flight) finds its entities gone, not a broken broker.
	if _, err := old.Broker().Send(t.Context(), "orders", coretest.Text("late")); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a send on a deleted namespace's broker: %v, want ErrNotFound", err)
	}
	if _, err := r.Get("billing"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Get of a deleted namespace: %v, want ErrNotFound", err)
	}
	n := 0
	st.Scan([]byte{'p'}, nil, func(k, _ []byte) (bool, error) {
		if k[8] == 2 { // billing's id
			n++
		}
		return true, nil
	})
	if n != 0 {
		t.Errorf("%d keys of the deleted namespace are left", n)
	}
	if got := receiveAll(t, r.Default(), "orders"); len(got) != 1 || got[0] != "for sbemulatorns" {
		t.Errorf("the default namespace holds %q after another was deleted", got)
	}
	// A namespace of the same name starts empty.
	billing = mustCreate(t, r, "billing")
	if _, err := billing.Broker().GetEntity("orders"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a re-created namespace sees the old one's queue: %v", err)
	}
}

// Bad input changes nothing.
func TestBadInput(t *testing.T) {
	st := memstore.New()
	r := newRegistry(t, st, clock.NewFake(coretest.Epoch), true)
	mustCreate(t, r, "sales")
	for _, tc := range []struct {
		name  string
		err   error
		rules []core.AuthorizationRule
	}{
		{"sales", core.ErrEntityExists, nil},
		{"SALES", core.ErrEntityExists, nil},
		{"sbemulatorns", core.ErrEntityExists, nil},
		{"1sales", core.ErrBadRequest, nil},
		{"sales-", core.ErrBadRequest, nil},
		{"sa.les", core.ErrBadRequest, nil},
		{"", core.ErrBadRequest, nil},
		{"short", core.ErrBadRequest, []core.AuthorizationRule{{KeyName: "k", PrimaryKey: "tooshort", Rights: sas.Send}}},
		{"twice", core.ErrBadRequest, []core.AuthorizationRule{{KeyName: "k", Rights: sas.Send}, {KeyName: "k", Rights: sas.Listen}}},
	} {
		if _, err := r.Create(t.Context(), tc.name, tc.rules); !errors.Is(err, tc.err) {
			t.Errorf("Create(%q): %v, want %v", tc.name, err, tc.err)
		}
	}
	if got := len(r.List()); got != 2 {
		t.Errorf("%d namespaces after refused creates, want 2", got)
	}
	if err := r.Delete(t.Context(), "sbemulatorns"); !errors.Is(err, core.ErrBadRequest) {
		t.Errorf("deleting the default namespace: %v, want ErrBadRequest", err)
	}
	if err := r.Delete(t.Context(), "nope"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("deleting an unknown namespace: %v, want ErrNotFound", err)
	}
	if _, err := r.AdvanceClock(t.Context(), "sales", -time.Second); !errors.Is(err, core.ErrBadRequest) {
		t.Errorf("moving a clock back: %v, want ErrBadRequest", err)
	}
	ns, _ := r.Get("sales")
	if ns.Clock().Ahead() != 0 {
		t.Errorf("a refused move changed the clock by %v", ns.Clock().Ahead())
	}
}

// A key range no namespace owns (a write that raced a deletion) is
// removed at the next start.
func TestSweepStrayData(t *testing.T) {
	st := memstore.New()
	r := newRegistry(t, st, clock.NewFake(coretest.Epoch), false)
	mustQueue(t, mustCreate(t, r, "keep"), "q")
	r.Close()
	b := storage.Batch{Sync: true}
	b.Set([]byte("p\x00\x00\x00\x00\x00\x00\x00\x07Estray"), []byte("x"))
	if err := st.Apply(&b); err != nil {
		t.Fatal(err)
	}
	r = newRegistry(t, st, clock.NewFake(coretest.Epoch), false)
	if _, err := st.Get([]byte("p\x00\x00\x00\x00\x00\x00\x00\x07Estray")); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("stray key still there: %v", err)
	}
	keep, _ := r.Get("keep")
	if _, err := keep.Broker().GetEntity("q"); err != nil {
		t.Errorf("the sweep took a live namespace's queue: %v", err)
	}
}

func TestForHostAndKeyName(t *testing.T) {
	r := newRegistry(t, memstore.New(), clock.NewFake(coretest.Epoch), false)
	sales := mustCreate(t, r, "sales")
	mustCreate(t, r, "billing", core.AuthorizationRule{KeyName: "billing-sender", PrimaryKey: key1, Rights: sas.Send})
	mustCreate(t, r, "other", core.AuthorizationRule{KeyName: "shared", PrimaryKey: key1, Rights: sas.Send})
	mustCreate(t, r, "again", core.AuthorizationRule{KeyName: "shared", PrimaryKey: key1, Rights: sas.Send})
	for host, want := range map[string]string{
		"sales.localhost":               "sales",
		"SALES.localhost:5671":          "sales",
		"sales.servicebus.windows.net.": "sales",
		"sales":                         "sales",
		"localhost":                     "",
		"127.0.0.1:5672":                "",
		"[::1]:5300":                    "",
		"unknown.localhost":             "",
		"sbemulatorns.localhost":        "sbemulatorns",
		"":                              "",
	} {
		ns, ok := r.ForHost(host)
		if got := map[bool]string{true: ns.Name(), false: ""}[ok]; got != want {
			t.Errorf("ForHost(%q) = %q, want %q", host, got, want)
		}
		if !ok && ns != r.Default() {
			t.Errorf("ForHost(%q) without a match returned %q, want the default", host, ns.Name())
		}
	}
	for skn, want := range map[string]string{
		rootName + "@sales": "sales",
		"anything@billing":  "billing",
		rootName + "@nope":  "",
		rootName:            "",
		"sales":             "sales",
		"billing-sender":    "billing",
		"shared":            "", // two namespaces define it
		"unknown":           "",
	} {
		ns, ok := r.ForKeyName(skn)
		got := ""
		if ok {
			got = ns.Name()
		}
		if got != want {
			t.Errorf("ForKeyName(%q) = %q, want %q", skn, got, want)
		}
	}
	_ = sales
}
