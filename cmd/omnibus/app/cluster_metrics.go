package app

import (
	"context"
	"net"
	"net/http"

	"github.com/omnibusmq/omnibus/cmd/omnibus/metrics"
)

// clusterMetrics is a cluster node's metrics listener (Options.MetricsAddr).
// It outlives the brokers: it always serves the Raft node's metrics, and
// the broker's while this node leads.
type clusterMetrics struct {
	m    *metrics.Node
	srv  *http.Server
	addr net.Addr
}

// startClusterMetrics serves the node's metrics when o.MetricsAddr asks
// for them (nil otherwise).
func (cl *Cluster) startClusterMetrics() (*clusterMetrics, error) {
	o := cl.opts
	if o.MetricsAddr == "" || disabled(o.MetricsAddr) {
		return nil, nil
	}
	m, err := metrics.NewNode(cl.node, o.Logger.Named("metrics"))
	if err != nil {
		return nil, err
	}
	srv, addr, err := serveMetrics(o, m.Handler())
	if err != nil {
		return nil, err
	}
	return &clusterMetrics{m: m, srv: srv, addr: addr}, nil
}

// sink is what a leader's broker hands its metrics to (Options.metricsSink):
// nil when the node serves no metrics.
func (cm *clusterMetrics) sink() func(*metrics.Metrics) {
	if cm == nil {
		return nil
	}
	return cm.m.SetBroker
}

// brokerStopped drops the metrics of a broker that stopped serving.
func (cm *clusterMetrics) brokerStopped() {
	if cm != nil {
		cm.m.SetBroker(nil)
	}
}

func (cm *clusterMetrics) close(ctx context.Context) {
	if cm != nil {
		_ = cm.srv.Shutdown(ctx)
	}
}

// MetricsAddr is the metrics listener's address (nil when disabled).
func (cl *Cluster) MetricsAddr() net.Addr {
	if cl.metrics == nil {
		return nil
	}
	return cl.metrics.addr
}
