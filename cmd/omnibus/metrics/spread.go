package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnibusmq/omnibus/core"
)

// spreadDescs describe what the receives from partitioned entities
// spread over a cluster's data groups cost (core.SpreadReceiveStats), by
// namespace: reported by a cluster node's routed brokers once they served
// one.
type spreadDescs struct {
	receives, groupReceives, delivered, released *prometheus.Desc
	peerCalls                                    *prometheus.Desc
}

func newSpreadDescs() spreadDescs {
	l := []string{"namespace"}
	return spreadDescs{
		receives: prometheus.NewDesc("omnibus_spread_receives_total",
			"Receives from partitioned entities spread over the data groups that this node served.", l, nil),
		groupReceives: prometheus.NewDesc("omnibus_spread_group_receives_total",
			"Receives those asked of one data group (a call on another node for a group this node does not lead).", l, nil),
		delivered: prometheus.NewDesc("omnibus_spread_delivered_total",
			"Messages those receives returned.", l, nil),
		released: prometheus.NewDesc("omnibus_spread_released_total",
			"Messages a data group handed out that the receive gave back unused (released: no delivery counted).", l, nil),
		peerCalls: prometheus.NewDesc("omnibus_peer_calls_total",
			"Calls this cluster node made on the nodes leading the data groups (and the meta group), by operation.", []string{"op"}, nil),
	}
}

func (d *spreadDescs) describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{d.receives, d.groupReceives, d.delivered, d.released, d.peerCalls} {
		ch <- x
	}
}

func (d *spreadDescs) collect(ch chan<- prometheus.Metric, ns string, b *core.Broker) {
	st := b.SpreadReceiveStats()
	if st.Receives == 0 {
		return
	}
	for _, x := range []struct {
		d *prometheus.Desc
		n int64
	}{{d.receives, st.Receives}, {d.groupReceives, st.GroupReceives}, {d.delivered, st.Delivered}, {d.released, st.Released}} {
		ch <- prometheus.MustNewConstMetric(x.d, prometheus.CounterValue, float64(x.n), ns)
	}
}

// collectCalls reports the calls between nodes, when counted.
func (d *spreadDescs) collectCalls(ch chan<- prometheus.Metric, calls func() map[string]int64) {
	if calls == nil {
		return
	}
	for op, n := range calls() {
		ch <- prometheus.MustNewConstMetric(d.peerCalls, prometheus.CounterValue, float64(n), op)
	}
}
