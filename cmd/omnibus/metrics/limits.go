package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// limitDescs describe what the process's protective limits held back.
type limitDescs struct {
	logSuppressed *prometheus.Desc
}

func newLimitDescs() limitDescs {
	return limitDescs{
		logSuppressed: prometheus.NewDesc("omnibus_log_suppressed_total",
			"Log lines peers caused that the log limiter held back, by reason (the line's message).", []string{"reason"}, nil),
	}
}

func (d *limitDescs) describe(ch chan<- *prometheus.Desc) {
	ch <- d.logSuppressed
}

func (d *limitDescs) collect(ch chan<- prometheus.Metric, cfg *Config) {
	if cfg.LogSuppressed != nil {
		for reason, n := range cfg.LogSuppressed() {
			ch <- prometheus.MustNewConstMetric(d.logSuppressed, prometheus.CounterValue, float64(n), reason)
		}
	}
}
