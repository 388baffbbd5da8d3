package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// constHistogram turns bucket counts (not cumulative, one beyond the last
// bound) into a Prometheus histogram in seconds.
func constHistogram(d *prometheus.Desc, bounds []time.Duration, h *histogramTally, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		if i < len(h.counts) {
			cum += h.counts[i]
		}
		buckets[b.Seconds()] = cum
	}
	if len(h.counts) > len(bounds) {
		cum += h.counts[len(bounds)]
	}
	return prometheus.MustNewConstHistogram(d, cum, h.sum, buckets, labels...)
}
