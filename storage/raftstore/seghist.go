package raftstore

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fsyncBoundsNs are the upper bounds of the log's fsync histogram, in
// nanoseconds (those of the broker's fsync metric, so that it converts
// bucket for bucket).
var fsyncBoundsNs = []float64{1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2.5e7, 5e7, 1e8, 2.5e8, 5e8, 1e9, 2.5e9, 1e10}

// newFsyncHist is the histogram of the log's fdatasyncs, in nanoseconds,
// registered nowhere: the appender observes it, the metrics collector
// reads it through histogramOf.
func newFsyncHist() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raft_log_fsync_ns", Buckets: fsyncBoundsNs})
}

// histogramOf returns h's counts as a cumulative histogram.
func histogramOf(h prometheus.Histogram) (*dto.Histogram, bool) {
	var m dto.Metric
	if err := h.Write(&m); err != nil || m.Histogram == nil {
		return nil, false
	}
	return m.Histogram, true
}
