package core_test

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage"
	"github.com/omnibusmq/omnibus/storage/memstore"
)

// capped starts a broker whose duplicate detection remembers at most max
// ids, logging to the returned observer.
func capped(t *testing.T, st storage.Store, clk *clock.Fake, max int) (*core.Broker, *observer.ObservedLogs) {
	t.Helper()
	obs, logs := observer.New(zapcore.WarnLevel)
	b, err := newBroker(st, clk, zap.New(obs), max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, logs
}

func newBroker(st storage.Store, clk *clock.Fake, log *zap.Logger, max int) (*core.Broker, error) {
	return core.New(core.Config{Store: st, Clock: clk, Logger: log, Limits: core.Limits{DedupHistoryMax: max}})
}

func sendID(t *testing.T, b *core.Broker, id string) int64 {
	t.Helper()
	m := coretest.Text(id)
	m.MessageID = id
	seqs, err := b.Send(t.Context(), "q", m)
	if err != nil {
		t.Fatal(err)
	}
	return seqs[0]
}

// Past the cap the oldest id is forgotten early (a duplicate of it gets
// through), younger ones still catch duplicates, and the eviction is
// logged once, not once per id.
func TestDedupHistoryCap(t *testing.T) {
	st := memstore.New()
	clk := clock.NewFake(coretest.Epoch)
	b, logs := capped(t, st, clk, 5)
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q",
		RequiresDuplicateDetection: true, DuplicateDetectionHistoryTimeWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		clk.Advance(time.Second)
		if sendID(t, b, fmt.Sprintf("m%02d", i)) == 0 {
			t.Fatalf("m%02d dropped as a duplicate", i)
		}
	}
	if ids, entries := core.DedupHistory(b, "q"); ids != 5 || entries != 5 {
		t.Errorf("history holds %d ids (%d entries), want the cap of 5", ids, entries)
	}
	if sendID(t, b, "m19") != 0 || sendID(t, b, "m15") != 0 {
		t.Error("a duplicate of an id within the cap was stored")
	}
	if logs.Len() != 1 {
		t.Errorf("early evictions logged %d times, want once (at most once a minute)", logs.Len())
	} else if e := logs.All()[0]; e.ContextMap()["cap"] != int64(5) {
		t.Errorf("log entry %q %v does not name the cap", e.Message, e.ContextMap())
	}
	if sendID(t, b, "m00") == 0 {
		t.Error("the oldest id, evicted by the cap, still caught a duplicate")
	}

	// After a restart the recovered history (scanned in id order) is
	// still evicted oldest first.
	b.Close()
	b2, _ := capped(t, st, clk, 5)
	if ids, _ := core.DedupHistory(b2, "q"); ids != 5 {
		t.Fatalf("recovered %d ids, want 5", ids)
	}
	// History now: m16..m19, m00 (newest). One more evicts m16.
	clk.Advance(time.Second)
	if sendID(t, b2, "zz") == 0 {
		t.Fatal("zz dropped")
	}
	if sendID(t, b2, "m00") != 0 {
		t.Error("m00, the newest recovered id, was evicted instead of the oldest")
	}
	if sendID(t, b2, "m16") == 0 {
		t.Error("m16, the oldest recovered id, was not evicted")
	}
}
