// Package metrics exports omnibus's statistics in Prometheus's text format:
// per-entity message counters, gauges and latency histograms read from the
// core ([core.Broker.EachEntity]), connection and request counts of each
// protocol front, and the store's fsync latency and batch sizes.
//
// Nothing here runs on a message's path: the core and the fronts keep
// their own atomic counts, and a scrape reads them ([Metrics.Collect]).
// Names follow Azure Monitor's Service Bus metrics (IncomingMessages →
// omnibus_incoming_messages_total, ActiveMessages → omnibus_active_messages,
// …), each entity's carrying a namespace label (core/namespace), an
// entity label (its path) and a kind label (queue, topic, subscription).
// Label cardinality is bounded: past [Config.MaxEntities] entities, over
// every namespace, further ones are folded into entity "other" of their
// namespace (label.go).
package metrics

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/membudget"
)

// DefaultMaxEntities is how many entities get series of their own by
// default; the rest are summed under entity="other".
const DefaultMaxEntities = 500

// OtherEntity is the entity label of the entities beyond the limit.
const OtherEntity = "other"

// Config configures [New].
type Config struct {
	// Namespaces returns the namespaces to report, read at every scrape.
	// Their brokers' statistics (core.Config.Stats) must be on for the
	// message counters and histograms to move; the gauges come from their
	// counts either way. Nil: Broker alone.
	Namespaces func() []Namespace
	// Broker is the one broker reported when Namespaces is nil.
	Broker *core.Broker
	// MaxEntities bounds the entities with series of their own; 0 means
	// DefaultMaxEntities.
	MaxEntities int
	// Fronts are the protocol listeners whose connections and requests are
	// reported, labelled by protocol.
	Fronts []Front
	// Store, when set, reports the store's write-ahead log fsyncs.
	Store FsyncReporter
	// Batches, when set, are the storage batches counted by [CountBatches].
	Batches *BatchStats
	// LogSuppressed, when set, returns the log lines held back so far by
	// reason (loglimit.Limiter.Suppressed).
	LogSuppressed func() map[string]int64
	// Memory, when set, is the memory budget whose limit, use and
	// refusals are reported.
	Memory *membudget.Budget
	// PeerCalls, when set, returns the calls a cluster node made on the
	// other nodes, by operation (clusterrpc.CallCounts).
	PeerCalls func() map[string]int64
	// Logger receives the failures of serving a scrape.
	Logger *zap.Logger
	// NoRuntime leaves out the Go runtime's and the process's metrics:
	// another registry serves them (a cluster node's, [Node]).
	NoRuntime bool
}

// Namespace is one namespace's broker, reported under its name.
type Namespace struct {
	Name   string
	Broker *core.Broker
}

// Front is one protocol front's source of connection and request counts.
type Front struct {
	Protocol string // the protocol label: "amqp", "http"
	Stats    func() FrontStats
}

// FrontStats are a front's cumulative counts and its open connections.
type FrontStats struct {
	ConnectionsOpened, ConnectionsClosed, ActiveConnections int64
	Successful, UserErrors, ServerErrors, Throttled         int64
}

// Metrics is a Prometheus registry holding omnibus's collector and the
// Go runtime's and the process's.
type Metrics struct {
	cfg Config
	reg *prometheus.Registry
	col *collector
}

// New returns the metrics of cfg's namespaces.
func New(cfg Config) (*Metrics, error) {
	if cfg.Namespaces == nil {
		if cfg.Broker == nil {
			return nil, errors.New("metrics: Config.Namespaces or Config.Broker is required")
		}
		one := []Namespace{{Name: cfg.Broker.Namespace(), Broker: cfg.Broker}}
		cfg.Namespaces = func() []Namespace { return one }
	}
	if cfg.MaxEntities == 0 {
		cfg.MaxEntities = DefaultMaxEntities
	}
	if cfg.MaxEntities < 0 {
		return nil, errors.New("metrics: negative Config.MaxEntities")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry(), col: newCollector(cfg)}
	cs := []prometheus.Collector{m.col}
	if !cfg.NoRuntime {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Handler serves the metrics in Prometheus's text (or OpenMetrics) format.
// Scrapes are served one at a time: a second waits for the first.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            zap.NewStdLog(m.cfg.Logger),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 1,
	})
}
