package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/omnibusmq/omnibus/cmd/omnibus/metrics"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/storage/pebblestore"
)

// scrape serves one scrape of m and parses it.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want, and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestEntitiesBeyondTheLimitFoldIntoOther: with room for two entities,
// the third gets entity="other"; its counters stay monotonic when it is
// deleted, and a deleted labelled entity frees its slot for a new one.
func TestEntitiesBeyondTheLimitFoldIntoOther(t *testing.T) {
	env := coretest.New(t)
	m, err := metrics.New(metrics.Config{Broker: env.Broker, MaxEntities: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: n})
	}
	env.MustSend(t, "c", coretest.Text("1"), coretest.Text("2"))
	env.MustSend(t, "d", coretest.Text("3"))
	fams := scrape(t, m)
	q := func(entity string) map[string]string { return map[string]string{"entity": entity, "kind": "queue"} }
	for entity, want := range map[string]float64{"a": 0, "b": 0, "other": 3} {
		if v, ok := value(fams, "omnibus_incoming_messages_total", q(entity)); !ok || v != want {
			t.Errorf("incoming of %s: %v %v, want %v", entity, v, ok, want)
		}
	}
	if _, ok := value(fams, "omnibus_incoming_messages_total", q("c")); ok {
		t.Error("entity c has series of its own beyond the limit")
	}
	if v, _ := value(fams, "omnibus_active_messages", q("other")); v != 3 {
		t.Errorf("active of other: %v, want 3", v)
	}
	if v, _ := value(fams, "omnibus_entities_folded", map[string]string{"kind": "queue"}); v != 2 {
		t.Errorf("folded queues: %v, want 2", v)
	}

	// Deleting folded c keeps other's counter; its messages leave the gauge.
	if err := env.Broker.DeleteEntity(t.Context(), "c"); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, m)
	if v, _ := value(fams, "omnibus_incoming_messages_total", q("other")); v != 3 {
		t.Errorf("incoming of other after deleting c: %v, want 3 (monotonic)", v)
	}
	if v, _ := value(fams, "omnibus_active_messages", q("other")); v != 1 {
		t.Errorf("active of other after deleting c: %v, want 1", v)
	}
	// Deleting labelled a frees a slot: the next new entity takes it.
	if err := env.Broker.DeleteEntity(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	scrape(t, m)
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "e"})
	fams = scrape(t, m)
	if _, ok := value(fams, "omnibus_incoming_messages_total", q("e")); !ok {
		t.Error("new entity e did not take the slot a freed")
	}
	if _, ok := value(fams, "omnibus_incoming_messages_total", q("d")); ok {
		t.Error("folded d was given a label of its own later: labels must not change")
	}
}

// TestHistogramsAreInSeconds checks the latency histograms' shape: the
// core's bounds as seconds, cumulative counts.
func TestHistogramsAreInSeconds(t *testing.T) {
	env := coretest.New(t)
	m, err := metrics.New(metrics.Config{Broker: env.Broker})
	if err != nil {
		t.Fatal(err)
	}
	env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	env.MustSend(t, "q", coretest.Text("1"), coretest.Text("2"))
	env.Clock.Advance(2 * 1e9) // 2 s in the queue
	env.MustReceive(t, "q", core.PeekLock, 2)
	fams := scrape(t, m)
	f := fams["omnibus_end_to_end_latency_seconds"]
	if f == nil || len(f.Metric) != 1 {
		t.Fatalf("end-to-end family: %v", f)
	}
	h := f.Metric[0].Histogram
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 4 {
		t.Fatalf("end-to-end: count %d sum %v, want 2 and 4", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.Bucket {
		want := uint64(0)
		if b.GetUpperBound() >= 5 {
			want = 2
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket ≤ %v s: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

// TestStoreFsyncsAndBatches reads Pebble's own fsync histogram and the
// batches counted on the way to the store.
func TestStoreFsyncsAndBatches(t *testing.T) {
	st, err := pebblestore.Open("db", pebblestore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var batches metrics.BatchStats
	counted := metrics.CountBatches(st, &batches)
	b, err := core.New(core.Config{Store: counted, Stats: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := metrics.New(metrics.Config{Broker: b, Store: st, Batches: &batches})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateEntity(t.Context(), core.Entity{Kind: core.KindQueue, Name: "q"}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := b.Send(t.Context(), "q", coretest.Text("x")); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrape(t, m)
	h := fams["omnibus_store_fsync_duration_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() < 5 {
		t.Errorf("fsyncs: %d, want at least the 5 synced sends", h.GetSampleCount())
	}
	for _, bk := range h.Bucket {
		if bk.GetUpperBound() == 10 && bk.GetCumulativeCount() != h.GetSampleCount() {
			t.Errorf("the 10 s bucket holds %d of %d fsyncs", bk.GetCumulativeCount(), h.GetSampleCount())
		}
	}
	// Every send is one synced batch (creating the queue is one more).
	if v, _ := value(fams, "omnibus_store_batches_total", map[string]string{"sync": "true"}); v != 6 {
		t.Errorf("synced batches: %v, want 6", v)
	}
	if v, _ := value(fams, "omnibus_store_batch_operations", nil); v != 6 {
		t.Errorf("batch size observations: %v, want 6", v)
	}
}

// TestNamespaceLabel: two namespaces whose queues share a path (and,
// each broker counting its own, an entity id) report apart under their
// namespace label, and a namespace that is gone takes its series along.
func TestNamespaceLabel(t *testing.T) {
	sales, billing := coretest.New(t), coretest.New(t)
	nss := []metrics.Namespace{{Name: "sales", Broker: sales.Broker}, {Name: "billing", Broker: billing.Broker}}
	m, err := metrics.New(metrics.Config{Namespaces: func() []metrics.Namespace { return nss }, MaxEntities: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []*coretest.Env{sales, billing} {
		env.MustCreate(t, core.Entity{Kind: core.KindQueue, Name: "q"})
	}
	sales.MustSend(t, "q", coretest.Text("1"), coretest.Text("2"))
	billing.MustSend(t, "q", coretest.Text("3"))
	fams := scrape(t, m)
	for _, tc := range []struct {
		ns, entity string
		want       float64
	}{{"sales", "q", 2}, {"billing", "other", 1}} {
		labels := map[string]string{"namespace": tc.ns, "entity": tc.entity, "kind": "queue"}
		if v, ok := value(fams, "omnibus_active_messages", labels); !ok || v != tc.want {
			t.Errorf("active messages of %v: %v %v, want %v", labels, v, ok, tc.want)
		}
	}
	if v, _ := value(fams, "omnibus_entities", map[string]string{"namespace": "billing", "kind": "queue"}); v != 1 {
		t.Errorf("billing's queues: %v, want 1", v)
	}
	nss = nss[:1] // billing deleted
	fams = scrape(t, m)
	if _, ok := value(fams, "omnibus_active_messages", map[string]string{"namespace": "billing", "entity": "other", "kind": "queue"}); ok {
		t.Error("a deleted namespace still has series")
	}
}
