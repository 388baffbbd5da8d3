package namespace_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// newLimitedRegistry opens a registry on st whose namespaces default to
// def.
func newLimitedRegistry(t testing.TB, st storage.Store, def namespace.Limits) *namespace.Registry {
	t.Helper()
	r, err := namespace.Open(namespace.Config{
		Store: st, Clock: clock.NewFake(coretest.Epoch), DefaultName: "sbemulatorns", Limits: def,
		RootRules: []sas.Rule{{KeyName: rootName, Key: rootKey, Rights: sas.Manage}},
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

// queueSeq names the queues queuesUntilRefused creates.
var queueSeq int

// queuesUntilRefused creates queues in ns until one is refused and
// returns how many it took.
func queuesUntilRefused(t testing.TB, ns *namespace.Namespace) int {
	t.Helper()
	for n := 0; n < 100; n++ {
		queueSeq++
		_, err := ns.Broker().CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q" + strconv.Itoa(queueSeq)})
		if errors.Is(err, core.ErrQuotaExceeded) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("namespace %s took 100 queues", ns.Name())
	return 0
}

// A namespace's own limits hold in its broker, the others keep the
// registry's defaults; own limits survive a restart, and a default
// changed between starts reaches the namespaces without limits of their
// own.
func TestLimitsPerNamespace(t *testing.T) {
	st := memstore.New()
	r := newLimitedRegistry(t, st, namespace.Limits{MaxEntities: 3, MaxConnections: 50})
	small, err := r.CreateWithLimits(t.Context(), "small", nil, namespace.Limits{MaxEntities: 1, MaxEntityBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	plain := mustCreate(t, r, "plain")
	if got, want := small.Limits(), (namespace.Limits{MaxEntities: 1, MaxConnections: 50, MaxEntityBytes: 1 << 20}); got != want {
		t.Errorf("small's limits in force = %+v, want %+v", got, want)
	}
	if got := queuesUntilRefused(t, small); got != 1 {
		t.Errorf("small took %d queues, want 1", got)
	}
	if got := queuesUntilRefused(t, plain); got != 3 {
		t.Errorf("plain took %d queues, want the default 3", got)
	}
	if got := queuesUntilRefused(t, r.Default()); got != 3 {
		t.Errorf("the default namespace took %d queues, want the default 3", got)
	}
	// Raised at run time: room at once.
	if _, err := r.SetLimits(t.Context(), "small", namespace.Limits{MaxEntities: 2}); err != nil {
		t.Fatal(err)
	}
	if got := queuesUntilRefused(t, small); got != 1 {
		t.Errorf("after raising small's cap to 2 it took %d more queues, want 1", got)
	}
	r.Close()

	r = newLimitedRegistry(t, st, namespace.Limits{MaxEntities: 4})
	small, _ = r.Get("small")
	plain, _ = r.Get("plain")
	if got := small.OwnLimits(); got != (namespace.Limits{MaxEntities: 2}) {
		t.Errorf("small's own limits after a restart = %+v", got)
	}
	if got := queuesUntilRefused(t, small); got != 0 {
		t.Errorf("small took %d queues after a restart, want none (2 of 2)", got)
	}
	if got := queuesUntilRefused(t, plain); got != 1 {
		t.Errorf("plain took %d queues under the new default of 4, want 1", got)
	}
}

// Limits out of range are refused and change nothing.
func TestLimitsBadInput(t *testing.T) {
	r := newLimitedRegistry(t, memstore.New(), namespace.Limits{})
	if _, err := r.CreateWithLimits(t.Context(), "neg", nil, namespace.Limits{MaxConnections: -1}); !errors.Is(err, core.ErrBadRequest) ||
		!strings.Contains(err.Error(), "Limits.MaxConnections") {
		t.Errorf("a negative limit: %v, want a bad request naming it", err)
	}
	if _, err := r.Get("neg"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a refused namespace exists: %v", err)
	}
	mustCreate(t, r, "sales")
	if _, err := r.SetLimits(t.Context(), "sales", namespace.Limits{MaxEntities: -5}); !errors.Is(err, core.ErrBadRequest) {
		t.Errorf("SetLimits(-5): %v, want a bad request", err)
	}
	if ns, _ := r.Get("sales"); ns.OwnLimits() != (namespace.Limits{}) {
		t.Errorf("a refused SetLimits left %+v", ns.OwnLimits())
	}
	for _, v := range []int64{0, -1, namespace.MaxLimit + 1} {
		_, err := namespace.LimitsJSON{MaxEntitySizeInMegabytes: &v}.Limits()
		var le *namespace.LimitError
		if !errors.As(err, &le) || le.Field != "MaxEntitySizeInMegabytes" {
			t.Errorf("MaxEntitySizeInMegabytes %d: %v, want a LimitError naming it", v, err)
		}
	}
}
