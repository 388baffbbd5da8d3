package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/omnibusmq/omnibus/storage"
)

// FsyncReporter is a store that measures its write-ahead log's fsyncs
// (pebblestore.Store): cumulative counts at upper bounds in nanoseconds.
type FsyncReporter interface {
	WALFsyncLatency() (*dto.Histogram, bool)
}

// fsyncBounds are the bucket bounds reported, in seconds. Pebble's own
// buckets are finer (every 100 µs up to 5 ms, then 50 exponential ones up
// to 10 s); each bound here takes the count of Pebble's largest bound at
// or below it, so the counts are exact for that bound.
var fsyncBounds = []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10}

// batchBounds bound the storage batches' sizes, in operations.
var batchBounds = [...]float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 1024}

// BatchStats count the storage batches the broker writes.
type BatchStats struct {
	synced, unsynced atomic.Int64
	buckets          [len(batchBounds) + 1]atomic.Uint64
	ops              atomic.Int64
}

// CountBatches returns s counting every batch applied through it into
// stats: the store the broker runs on, when metrics are on. Everything
// else passes through.
func CountBatches(s storage.Store, stats *BatchStats) storage.Store {
	return &countingStore{Store: s, stats: stats}
}

type countingStore struct {
	storage.Store
	stats *BatchStats
}

// Health passes on the store's [storage.HealthReporter] (healthy if it
// has none), so that wrapping hides nothing the store tells.
func (c *countingStore) Health() error {
	if h, ok := c.Store.(storage.HealthReporter); ok {
		return h.Health()
	}
	return nil
}

// Apply implements storage.Store.
func (c *countingStore) Apply(b *storage.Batch) error {
	err := c.Store.Apply(b)
	if err == nil && b != nil && len(b.Ops) > 0 {
		st := c.stats
		if b.Sync {
			st.synced.Add(1)
		} else {
			st.unsynced.Add(1)
		}
		n := len(b.Ops)
		i := 0
		for i < len(batchBounds) && float64(n) > batchBounds[i] {
			i++
		}
		st.buckets[i].Add(1)
		st.ops.Add(int64(n))
	}
	return err
}

type storeDescs struct {
	fsync, batchOps, batches *prometheus.Desc
}

func newStoreDescs() storeDescs {
	return storeDescs{
		fsync: prometheus.NewDesc("omnibus_store_fsync_duration_seconds",
			"Fsyncs of the store's write-ahead log; one covers every batch committed meanwhile (group commit).", nil, nil),
		batchOps: prometheus.NewDesc("omnibus_store_batch_operations",
			"Records written per storage batch (a send, a settlement, a delivery count, a management change).", nil, nil),
		batches: prometheus.NewDesc("omnibus_store_batches_total",
			"Storage batches written; sync=\"true\" ones waited for fsync. Divided by the fsyncs' count, batches per fsync.", []string{"sync"}, nil),
	}
}

func (d *storeDescs) describe(ch chan<- *prometheus.Desc) {
	ch <- d.fsync
	ch <- d.batchOps
	ch <- d.batches
}

func (d *storeDescs) collect(ch chan<- prometheus.Metric, fr FsyncReporter, bs *BatchStats) {
	if fr != nil {
		if h, ok := fr.WALFsyncLatency(); ok {
			ch <- fsyncHistogram(d.fsync, h)
		}
	}
	if bs == nil {
		return
	}
	buckets := make(map[float64]uint64, len(batchBounds))
	var cum uint64
	for i, b := range batchBounds {
		cum += bs.buckets[i].Load()
		buckets[b] = cum
	}
	cum += bs.buckets[len(batchBounds)].Load()
	ch <- prometheus.MustNewConstHistogram(d.batchOps, cum, float64(bs.ops.Load()), buckets)
	ch <- prometheus.MustNewConstMetric(d.batches, prometheus.CounterValue, float64(bs.synced.Load()), "true")
	ch <- prometheus.MustNewConstMetric(d.batches, prometheus.CounterValue, float64(bs.unsynced.Load()), "false")
}

// fsyncHistogram converts Pebble's histogram (nanoseconds, fine buckets)
// to one in seconds with fsyncBounds.
func fsyncHistogram(d *prometheus.Desc, h *dto.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(fsyncBounds))
	src := h.GetBucket()
	j := 0
	var cum uint64
	for _, b := range fsyncBounds {
		ns := b * 1e9
		for j < len(src) && src[j].GetUpperBound() <= ns*(1+1e-9) {
			cum = src[j].GetCumulativeCount()
			j++
		}
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.GetSampleCount(), h.GetSampleSum()/1e9, buckets)
}
