package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/storage/raftstore"
)

// RaftNode is what a cluster node's metrics read from its Raft node
// (raftstore.Node).
type RaftNode interface {
	Status() raftstore.Status
	LogFsyncLatency() (*dto.Histogram, bool)
}

// Node is the metrics of one node of a cluster: its Raft node's always,
// and its broker's while it leads (the broker starts and stops with the
// node's leadership). One registry holds the Raft collector and the Go
// runtime's and the process's; the broker's [Metrics], made with
// [Config.NoRuntime], is gathered with it while set.
type Node struct {
	reg *prometheus.Registry
	log *zap.Logger

	mu        sync.Mutex // guards broker and transfers
	broker    *Metrics
	transfers func() Transfers // a cluster with data groups' (transfers.go)
}

// NewNode returns the metrics of the Raft node rn.
func NewNode(rn RaftNode, log *zap.Logger) (*Node, error) {
	if log == nil {
		log = zap.NewNop()
	}
	m := &Node{reg: prometheus.NewRegistry(), log: log}
	for _, c := range []prometheus.Collector{&raftCollector{rn: rn, d: newRaftDescs()}, newTransferCollector(m), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetBroker sets the metrics of the broker this node runs now, nil when
// it runs none.
func (m *Node) SetBroker(b *Metrics) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.broker = b
}

// Gather implements prometheus.Gatherer: the node's metrics and its
// broker's, if it runs one.
func (m *Node) Gather() ([]*dto.MetricFamily, error) {
	m.mu.Lock()
	b := m.broker
	m.mu.Unlock()
	if b == nil {
		return m.reg.Gather()
	}
	return prometheus.Gatherers{m.reg, b.reg}.Gather()
}

// Handler serves the metrics as [Metrics.Handler] does.
func (m *Node) Handler() http.Handler {
	return promhttp.HandlerFor(m, promhttp.HandlerOpts{
		ErrorLog:            zap.NewStdLog(m.log),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 1,
	})
}

type raftDescs struct {
	isLeader, serving, stalled, failed, term, leader, commit, applied, last, snapshot,
	snapshots, lease, members, reachable, heard, match, fsync *prometheus.Desc
}

func newRaftDescs() raftDescs {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("omnibus_raft_"+name, help, labels, nil)
	}
	return raftDescs{
		isLeader:  d("is_leader", "1 while this node is the Raft leader."),
		serving:   d("serving", "1 while this node's broker serves clients (it leads, holds the lease, and has applied every earlier entry); the others proxy their clients to it."),
		stalled:   d("stalled", "1 while a write to this node's disk is failing (it is retried; the node sends nothing to its peers meanwhile)."),
		failed:    d("failed", "1 once this node stopped on an error it cannot survive (damaged Raft state); omnibus cluster status says which."),
		term:      d("term", "The node's current Raft term; each election raises it."),
		leader:    d("leader_id", "The id of the leader this node knows of, 0 if none."),
		commit:    d("commit_index", "The highest log index this node knows committed by a quorum."),
		applied:   d("applied_index", "The highest log index applied to this node's state database; commit minus applied is its apply backlog."),
		last:      d("last_index", "The last index of this node's log."),
		snapshot:  d("snapshot_index", "The index of the log's latest snapshot (compaction)."),
		snapshots: d("snapshots_installed_total", "Snapshots this node received from a leader and installed since it started (it had fallen behind the log)."),
		lease:     d("lease_seconds", "What remains of the leader's lease (0 on a follower): the leader serves only while it holds one."),
		members:   d("members", "Members of the group by role as this node knows them.", "role"),
		reachable: d("peer_reachable", "1 if a frame from the peer arrived within the election timeout. Followers send nothing to each other in Raft: a follower reports its leader only; the leader reports every member.", "peer"),
		heard:     d("peer_last_heard_seconds", "Time since a frame from the peer last arrived (series as for omnibus_raft_peer_reachable).", "peer"),
		match:     d("peer_match_index", "The leader's view of how far each member's log matches its own (leader only): commit_index minus it is the member's replication lag.", "peer"),
		fsync:     d("log_fsync_duration_seconds", "Fsyncs of the Raft log's write-ahead log on this node; one covers every entry appended meanwhile."),
	}
}

// raftCollector reads a Raft node's status at each scrape.
type raftCollector struct {
	rn RaftNode
	d  raftDescs
}

// Describe implements prometheus.Collector.
func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	d := &c.d
	for _, x := range []*prometheus.Desc{d.isLeader, d.serving, d.stalled, d.failed, d.term, d.leader, d.commit, d.applied,
		d.last, d.snapshot, d.snapshots, d.lease, d.members, d.reachable, d.heard, d.match, d.fsync} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	d := &c.d
	st := c.rn.Status()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	leader := st.Leader != 0 && st.Leader == st.ID
	gauge(d.isLeader, b2f(leader))
	gauge(d.serving, b2f(st.Serving))
	gauge(d.stalled, b2f(st.Stalled))
	gauge(d.failed, b2f(st.Error != ""))
	gauge(d.term, float64(st.Term))
	gauge(d.leader, float64(st.Leader))
	gauge(d.commit, float64(st.Commit))
	gauge(d.applied, float64(st.Applied))
	gauge(d.last, float64(st.LastIndex))
	gauge(d.snapshot, float64(st.Snapshot))
	ch <- prometheus.MustNewConstMetric(d.snapshots, prometheus.CounterValue, float64(st.SnapshotsInstalled))
	gauge(d.lease, float64(st.LeaseMillis)/1000)
	voters, learners := 0, 0
	for _, mb := range st.Members {
		if mb.Voter {
			voters++
		} else {
			learners++
		}
		if mb.ID == st.ID || (!leader && mb.ID != st.Leader) {
			continue
		}
		peer := strconv.FormatUint(mb.ID, 10)
		gauge(d.reachable, b2f(mb.Reachable), peer)
		if mb.HeardMillis >= 0 {
			gauge(d.heard, float64(mb.HeardMillis)/1000, peer)
		}
		if leader {
			gauge(d.match, float64(mb.Match), peer)
		}
	}
	if len(st.Members) > 0 { // not when the loop was too busy to say
		gauge(d.members, float64(voters), "voter")
		gauge(d.members, float64(learners), "learner")
	}
	if h, ok := c.rn.LogFsyncLatency(); ok {
		ch <- fsyncHistogram(d.fsync, h)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
