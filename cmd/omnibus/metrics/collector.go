package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnibusmq/omnibus/core"
)

// Indices of an entity's counters in a tally.
const (
	cIncoming = iota
	cOutgoing
	cCompleted
	cAbandoned
	cDeadLettered
	cExpired
	cDeferred
	cLockExpiries
	cSessionLockExpiries
	numCounters
)

// countersOf returns s's counters in tally order.
func countersOf(s *core.EntityStats) [numCounters]int64 {
	return [numCounters]int64{s.Incoming, s.Outgoing, s.Completed, s.Abandoned, s.DeadLettered,
		s.Expired, s.Deferred, s.LockExpiries, s.SessionLockExpiries}
}

// Indices of an entity's gauges.
const (
	gActive = iota
	gDeadLettered
	gScheduled
	gDeferred
	gMessages
	gSize
	gSessionsHeld
	numGauges
)

func gaugesOf(s *core.EntitySnapshot) [numGauges]int64 {
	c := s.Counts
	return [numGauges]int64{c.Active, c.DeadLetter, c.Scheduled, c.Deferred, c.Total, c.SizeBytes, s.Stats.SessionsHeld}
}

var entityLabelNames = []string{"namespace", "entity", "kind"}

func entityDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("omnibus_"+name, help, entityLabelNames, nil)
}

// Per-entity descriptions, in tally and gauge order. Which kinds report
// which: topics only what is sent to them (incoming, send latency) and
// their size; queues and subscriptions everything.
var (
	counterDescs = [numCounters]*prometheus.Desc{
		entityDesc("incoming_messages_total", "Messages stored: sent to a queue or topic, or a subscription's copies (Azure: IncomingMessages)."),
		entityDesc("outgoing_messages_total", "Messages delivered to receivers, from the dead-letter subqueue too (Azure: OutgoingMessages)."),
		entityDesc("completed_messages_total", "Messages completed (Azure: CompleteMessage)."),
		entityDesc("abandoned_messages_total", "Messages abandoned (Azure: AbandonMessage); AMQP released is not counted."),
		entityDesc("deadlettered_messages_total", "Messages moved to the dead-letter subqueue, by a receiver or by the broker (delivery count, expiry, filter errors)."),
		entityDesc("expired_messages_total", "Messages whose time to live ended (dropped, or dead-lettered with DeadLetteringOnMessageExpiration)."),
		entityDesc("deferred_messages_total", "Deferrals."),
		entityDesc("lock_expiries_total", "Message locks that lapsed before their message was settled."),
		entityDesc("session_lock_expiries_total", "Session locks that lapsed."),
	}
	gaugeDescs = [numGauges]*prometheus.Desc{
		entityDesc("active_messages", "Active messages, locked or not (Azure: ActiveMessages)."),
		entityDesc("deadlettered_messages", "Messages in the dead-letter subqueue (Azure: DeadletteredMessages)."),
		entityDesc("scheduled_messages", "Scheduled messages (Azure: ScheduledMessages)."),
		entityDesc("deferred_messages", "Deferred messages."),
		entityDesc("messages", "Messages stored, in every state (Azure: Messages)."),
		entityDesc("size_bytes", "Bytes counted against MaxSizeInMegabytes; a topic's is its subscriptions' (Azure: Size)."),
		entityDesc("sessions_held", "Sessions a receiver holds now."),
	}
	sendLatencyDesc = entityDesc("send_latency_seconds", "Time from a send's arrival to its messages being stored with fsync, per message (Azure: ServerSendLatency).")
	e2eLatencyDesc  = entityDesc("end_to_end_latency_seconds", "Time from a message's enqueue to its first delivery.")

	entitiesDesc = prometheus.NewDesc("omnibus_entities", "Entities, by namespace and kind.", []string{"namespace", "kind"}, nil)
	foldedDesc   = prometheus.NewDesc("omnibus_entities_folded", "Entities reported under entity=\"other\" (beyond --metrics-max-entities), by namespace and kind.", []string{"namespace", "kind"}, nil)
)

// collector is the prometheus.Collector of everything omnibus reports.
type collector struct {
	cfg    Config
	fronts frontDescs
	store  storeDescs
	limits limitDescs
	spread spreadDescs

	mu     sync.Mutex // guards labels; held for a whole Collect
	labels *entityLabels
}

func newCollector(cfg Config) *collector {
	return &collector{cfg: cfg, fronts: newFrontDescs(), store: newStoreDescs(), limits: newLimitDescs(), spread: newSpreadDescs(), labels: newEntityLabels(cfg.MaxEntities)}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range counterDescs {
		ch <- d
	}
	for _, d := range gaugeDescs {
		ch <- d
	}
	ch <- sendLatencyDesc
	ch <- e2eLatencyDesc
	ch <- entitiesDesc
	ch <- foldedDesc
	c.fronts.describe(ch)
	c.store.describe(ch)
	c.limits.describe(ch)
	c.spread.describe(ch)
}

// otherSum accumulates the folded entities of one kind in a scrape.
type otherSum struct {
	t      tally
	gauges [numGauges]int64
	n      int
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[entityKey]bool{}
	var t tally
	// First every entity (which also tells the labels which are gone),
	// then the "other" sums, which take in the entities gone.
	type nsSums struct {
		name   string
		others map[core.EntityKind]*otherSum
		kinds  map[core.EntityKind]int
	}
	var all []nsSums
	for _, ns := range c.cfg.Namespaces() {
		others := map[core.EntityKind]*otherSum{}
		kinds := map[core.EntityKind]int{}
		all = append(all, nsSums{ns.Name, others, kinds})
		c.spread.collect(ch, ns.Name, ns.Broker)
		ns.Broker.EachEntity(func(s *core.EntitySnapshot) {
			kinds[s.Kind]++
			label := c.labels.label(ns.Name, s, seen)
			t.set(&s.Stats)
			g := gaugesOf(s)
			if label != OtherEntity {
				emitEntity(ch, ns.Name, label, s.Kind, &t, &g, s.Stats.SendLatency.Bounds, s.Stats.EndToEnd.Bounds)
				return
			}
			o := others[s.Kind]
			if o == nil {
				o = &otherSum{}
				others[s.Kind] = o
			}
			o.t.add(&t)
			for i := range g {
				o.gauges[i] += g[i]
			}
			o.n++
		})
	}
	live := make(map[string]bool, len(all))
	for _, ns := range all {
		live[ns.name] = true
	}
	c.labels.sweep(seen, live)
	for _, ns := range all {
		for _, kind := range []core.EntityKind{core.KindQueue, core.KindTopic, core.KindSubscription} {
			o, r := ns.others[kind], c.labels.retired[retiredKey{ns.name, kind}]
			if o != nil || r != nil {
				if o == nil {
					o = &otherSum{}
				}
				if r != nil {
					o.t.add(r)
				}
				emitEntity(ch, ns.name, OtherEntity, kind, &o.t, &o.gauges, core.SendLatencyBounds, core.EndToEndLatencyBounds)
			}
			ch <- prometheus.MustNewConstMetric(entitiesDesc, prometheus.GaugeValue, float64(ns.kinds[kind]), ns.name, kind.String())
			n := 0
			if o != nil {
				n = o.n
			}
			ch <- prometheus.MustNewConstMetric(foldedDesc, prometheus.GaugeValue, float64(n), ns.name, kind.String())
		}
	}
	c.fronts.collect(ch, c.cfg.Fronts)
	c.store.collect(ch, c.cfg.Store, c.cfg.Batches)
	c.limits.collect(ch, &c.cfg)
	c.spread.collectCalls(ch, c.cfg.PeerCalls)
}

// emitEntity sends one entity's series (or the "other" sum of a kind).
func emitEntity(ch chan<- prometheus.Metric, ns, label string, kind core.EntityKind, t *tally, g *[numGauges]int64, sendBounds, e2eBounds []time.Duration) {
	k := kind.String()
	counter := func(i int) {
		ch <- prometheus.MustNewConstMetric(counterDescs[i], prometheus.CounterValue, float64(t.counters[i]), ns, label, k)
	}
	gauge := func(i int) {
		ch <- prometheus.MustNewConstMetric(gaugeDescs[i], prometheus.GaugeValue, float64(g[i]), ns, label, k)
	}
	if kind == core.KindTopic {
		counter(cIncoming)
		gauge(gSize)
		ch <- constHistogram(sendLatencyDesc, sendBounds, &t.send, ns, label, k)
		return
	}
	for i := range numCounters {
		counter(i)
	}
	for i := range numGauges {
		gauge(i)
	}
	if kind == core.KindQueue {
		ch <- constHistogram(sendLatencyDesc, sendBounds, &t.send, ns, label, k)
	}
	ch <- constHistogram(e2eLatencyDesc, e2eBounds, &t.e2e, ns, label, k)
}
