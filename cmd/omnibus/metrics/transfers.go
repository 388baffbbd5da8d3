package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Transfers is what a node of a cluster with data groups reports of the
// forwarding between groups (transfers: a group's outbox, handed over to
// the target group by the node leading the source).
type Transfers struct {
	// Outbox is, for each data group this node leads, the transfers its
	// outbox holds now (every namespace's).
	Outbox map[uint64]int
	// Sent, Failed and Refused count, by source and target group, the
	// transfers this node handed over since it started: applied by the
	// target; not handed over this time (the target's group had no
	// leader, the call failed: retried); refused by the target for good
	// (dead-lettered in the source).
	Sent, Failed, Refused map[GroupPair]uint64
}

// GroupPair is a source and a target data group.
type GroupPair struct{ Group, To uint64 }

// SetTransfers makes the node's metrics include what read returns at each
// scrape (nil: none).
func (m *Node) SetTransfers(read func() Transfers) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.transfers = read
}

// transfersRead returns the node's transfer reader, nil if none.
func (m *Node) transfersRead() func() Transfers {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.transfers
}

// transferCollector reports a node's Transfers at each scrape.
type transferCollector struct {
	m                           *Node
	outbox, sent, failed, refus *prometheus.Desc
}

func newTransferCollector(m *Node) *transferCollector {
	return &transferCollector{m: m,
		outbox: prometheus.NewDesc("omnibus_transfer_outbox",
			"Transfers (messages forwarded to an entity of another data group) waiting in the outbox of each data group this node leads.", []string{"group"}, nil),
		sent: prometheus.NewDesc("omnibus_transfers_sent_total",
			"Transfers this node handed over from a data group it led to another, applied by the target group.", []string{"group", "to"}, nil),
		failed: prometheus.NewDesc("omnibus_transfers_failed_total",
			"Transfers this node could not hand over for now (the target group had no leader, or the call failed); each is retried.", []string{"group", "to"}, nil),
		refus: prometheus.NewDesc("omnibus_transfers_refused_total",
			"Transfers the target group refused for good (missing, disabled or full entity): dead-lettered in the source.", []string{"group", "to"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *transferCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.outbox
	ch <- c.sent
	ch <- c.failed
	ch <- c.refus
}

// Collect implements prometheus.Collector.
func (c *transferCollector) Collect(ch chan<- prometheus.Metric) {
	read := c.m.transfersRead()
	if read == nil {
		return
	}
	t := read()
	for g, n := range t.Outbox {
		ch <- prometheus.MustNewConstMetric(c.outbox, prometheus.GaugeValue, float64(n), strconv.FormatUint(g, 10))
	}
	for _, x := range []struct {
		desc *prometheus.Desc
		by   map[GroupPair]uint64
	}{{c.sent, t.Sent}, {c.failed, t.Failed}, {c.refus, t.Refused}} {
		for p, n := range x.by {
			ch <- prometheus.MustNewConstMetric(x.desc, prometheus.CounterValue, float64(n),
				strconv.FormatUint(p.Group, 10), strconv.FormatUint(p.To, 10))
		}
	}
}
