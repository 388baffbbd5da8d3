package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// limitDescs describe the process's protective limits: what the log
// limiter held back, and the memory budget.
type limitDescs struct {
	logSuppressed                          *prometheus.Desc
	memoryLimit, memoryHeld, memoryRefused *prometheus.Desc
}

func newLimitDescs() limitDescs {
	return limitDescs{
		logSuppressed: prometheus.NewDesc("omnibus_log_suppressed_total",
			"Log lines peers caused that the log limiter held back, by reason (the line's message).", []string{"reason"}, nil),
		memoryLimit: prometheus.NewDesc("omnibus_memory_budget_bytes",
			"The memory budget of what peers make omnibus hold (--max-memory); 0: none.", nil, nil),
		memoryHeld: prometheus.NewDesc("omnibus_memory_held_bytes",
			"Bytes held now against the memory budget: incoming and outgoing AMQP buffers, open transactions, $management replies, REST bodies, console pages.", nil, nil),
		memoryRefused: prometheus.NewDesc("omnibus_memory_refused_total",
			"Work refused (server-busy, 503) because the memory budget had no room, by what would have held it.", []string{"holder"}, nil),
	}
}

func (d *limitDescs) describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{d.logSuppressed, d.memoryLimit, d.memoryHeld, d.memoryRefused} {
		ch <- x
	}
}

func (d *limitDescs) collect(ch chan<- prometheus.Metric, cfg *Config) {
	if cfg.LogSuppressed != nil {
		for reason, n := range cfg.LogSuppressed() {
			ch <- prometheus.MustNewConstMetric(d.logSuppressed, prometheus.CounterValue, float64(n), reason)
		}
	}
	if m := cfg.Memory; m != nil {
		ch <- prometheus.MustNewConstMetric(d.memoryLimit, prometheus.GaugeValue, float64(m.Limit()))
		ch <- prometheus.MustNewConstMetric(d.memoryHeld, prometheus.GaugeValue, float64(m.Used()))
		for holder, n := range m.Refused() {
			ch <- prometheus.MustNewConstMetric(d.memoryRefused, prometheus.CounterValue, float64(n), holder)
		}
	}
}
