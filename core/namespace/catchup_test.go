package namespace_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/namespace"
	"github.com/omnibusmq/omnibus/core/sas"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// lateShared is a namespace.Shared whose records a registry takes only
// when it catches up (no sync loop): what another process created.
type lateShared struct {
	reg      *namespace.Registry
	mu       sync.Mutex
	records  []namespace.Record
	catchUps atomic.Int64
}

func (s *lateShared) Create(context.Context, namespace.Record, int) (namespace.Record, error) {
	return namespace.Record{}, errors.New("not in this test")
}
func (s *lateShared) Update(context.Context, namespace.Record) error {
	return errors.New("not in this test")
}
func (s *lateShared) Delete(context.Context, namespace.Record) error {
	return errors.New("not in this test")
}

func (s *lateShared) CatchUp(context.Context) error {
	s.catchUps.Add(1)
	return s.reg.Sync(func() (namespace.Snapshot, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return namespace.Snapshot{Others: append([]namespace.Record(nil), s.records...)}, nil
	})
}

// TestResolveCatchesUpOnUnknownNamespace: on a shared registry, a key
// name "rule@ns" of a namespace created elsewhere a moment ago resolves
// (the registry catches up before refusing); one of no namespace is
// still refused (sas.ErrUnknownKey); and a flood of unknown names costs
// at most one catch-up per CatchUpInterval.
func TestResolveCatchesUpOnUnknownNamespace(t *testing.T) {
	sh := &lateShared{}
	reg, err := namespace.Open(namespace.Config{
		Store: memstore.New(), Shared: sh, DefaultName: "sbemulatorns",
		RootRules: []sas.Rule{{KeyName: rootName, Key: rootKey, Rights: sas.Manage}},
		NewBroker: func(name string, s storage.Store, c clock.Clock) (*core.Broker, error) {
			return core.New(core.Config{Store: s, Clock: c, Namespace: name})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	sh.reg = reg

	sh.mu.Lock()
	sh.records = append(sh.records, namespace.Record{ID: 7, Name: "late", Created: time.Now()})
	sh.mu.Unlock()
	ns, named, err := reg.Resolve("", rootName+"@late", "")
	if err != nil || !named || ns.Name() != "late" {
		t.Fatalf("Resolve of a namespace created elsewhere: %v %v %v", ns, named, err)
	}

	start := time.Now()
	var wg sync.WaitGroup
	var refused atomic.Int64
	before := sh.catchUps.Load()
	for i := range 200 {
		wg.Go(func() {
			_, _, err := reg.Resolve("", fmt.Sprintf("%s@nosuch%d", rootName, i%20), "")
			var se *sas.Error
			if errors.As(err, &se) && errors.Is(se.Err, sas.ErrUnknownKey) {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := refused.Load(); n != 200 {
		t.Fatalf("%d of 200 unknown names refused as unknown keys", n)
	}
	rounds := sh.catchUps.Load() - before
	if most := 1 + int64(elapsed/namespace.CatchUpInterval); rounds < 1 || rounds > most {
		t.Fatalf("200 unknown names made %d catch-ups in %v; want 1 to %d (one per %v at most)", rounds, elapsed, most, namespace.CatchUpInterval)
	}
}
