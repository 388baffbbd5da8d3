package raftstore

import (
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// fsyncBoundsNs are the upper bounds of the log's fsync histogram, in
// nanoseconds (those of the broker's fsync metric, so that it converts
// bucket for bucket).
var fsyncBoundsNs = [...]float64{1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2.5e7, 5e7, 1e8, 2.5e8, 5e8, 1e9, 2.5e9, 1e10}

// fsyncHist counts the log's fdatasyncs by duration. The appender writes
// it; the metrics collector reads it.
type fsyncHist struct {
	counts [len(fsyncBoundsNs) + 1]atomic.Uint64 // the last: above every bound
	sumNs  atomic.Uint64
}

func (h *fsyncHist) observe(d time.Duration) {
	i := 0
	for i < len(fsyncBoundsNs) && float64(d) > fsyncBoundsNs[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(d))
}

// histogram returns the counts as a cumulative histogram in nanoseconds.
func (h *fsyncHist) histogram() *dto.Histogram {
	var cum uint64
	buckets := make([]*dto.Bucket, len(fsyncBoundsNs))
	for i, b := range fsyncBoundsNs {
		cum += h.counts[i].Load()
		c := cum
		buckets[i] = &dto.Bucket{UpperBound: &b, CumulativeCount: &c}
	}
	total := cum + h.counts[len(fsyncBoundsNs)].Load()
	sum := float64(h.sumNs.Load())
	return &dto.Histogram{SampleCount: &total, SampleSum: &sum, Bucket: buckets}
}
