package core

import (
	"sort"
	"sync/atomic"
	"time"
)

// Statistics for monitoring.
//
// With [Config.Stats] set each entity keeps cumulative counts of what
// happened to its messages (sent in, delivered, completed, abandoned,
// dead-lettered, expired, deferred, locks that lapsed) and two latency
// histograms, in atomics that the paths bump as they go: a metrics
// exporter reads them at scrape time ([Broker.EachEntity]), so the core
// never knows about Prometheus or any exporter, and a path pays an atomic
// add (and, for the histograms, a clock reading it mostly already made).
// Without Stats every hook is a nil check.
//
// Counts are attributed to the entity a message belongs to: a dead-letter
// subqueue's deliveries count as its queue's or subscription's, a topic
// counts the messages sent to it and each subscription the copies it
// received.

// Latency histogram bounds (upper bounds of each bucket; one more bucket
// holds what lies beyond the last).
var (
	// SendLatencyBounds bound the send-to-durable histogram: from a send's
	// arrival at the broker to its messages being stored with fsync.
	SendLatencyBounds = []time.Duration{
		100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
		25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
		time.Second, 5 * time.Second,
	}
	// EndToEndLatencyBounds bound the end-to-end histogram: from a
	// message's enqueue time to its first delivery.
	EndToEndLatencyBounds = []time.Duration{
		time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second,
		10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour,
	}
)

// EntityStats are an entity's cumulative statistics since it was created
// or the broker started (they are not stored).
type EntityStats struct {
	Incoming     int64 // messages stored: sent to a queue or topic, or copied into a subscription
	Outgoing     int64 // messages delivered to receivers (either mode, dead-letter subqueue included)
	Completed    int64 // completions, receive-and-delete deliveries included
	Abandoned    int64 // abandons (AMQP released, which does not count a delivery, is not one)
	DeadLettered int64 // messages moved to the dead-letter subqueue (or its forwarding target)
	Expired      int64 // messages whose time to live ended (dropped or dead-lettered)
	Deferred     int64 // deferrals
	// LockExpiries counts message locks that lapsed, SessionLockExpiries
	// session locks.
	LockExpiries, SessionLockExpiries int64
	// SessionsHeld is how many of the entity's sessions a receiver holds
	// now (a gauge).
	SessionsHeld int64
	// SendLatency is send-to-durable, EndToEnd enqueue-to-first-delivery.
	SendLatency, EndToEnd Histogram
}

// addCounters adds o's counters and the SessionsHeld gauge to s (not the
// latency histograms): the parts of one entity held in several places.
func (s *EntityStats) addCounters(o EntityStats) {
	s.Incoming += o.Incoming
	s.Outgoing += o.Outgoing
	s.Completed += o.Completed
	s.Abandoned += o.Abandoned
	s.DeadLettered += o.DeadLettered
	s.Expired += o.Expired
	s.Deferred += o.Deferred
	s.LockExpiries += o.LockExpiries
	s.SessionLockExpiries += o.SessionLockExpiries
	s.SessionsHeld += o.SessionsHeld
}

// Histogram is a snapshot of a latency histogram. Counts[i] is how many
// observations were at most Bounds[i] (and above Bounds[i-1]);
// Counts[len(Bounds)] those beyond the last bound. Sum is their total.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
	Sum    time.Duration
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// entityStats is the live form of EntityStats.
type entityStats struct {
	incoming, outgoing                          atomic.Int64
	completed, abandoned, deadLettered, expired atomic.Int64
	deferred, lockExpiries, sessionLockExpiries atomic.Int64
	sessionsHeld                                atomic.Int64
	send, e2e                                   histogram
}

func newEntityStats() *entityStats {
	s := &entityStats{}
	s.send.init(SendLatencyBounds)
	s.e2e.init(EndToEndLatencyBounds)
	return s
}

// histogram counts durations into fixed buckets with atomics.
type histogram struct {
	bounds []time.Duration
	counts []atomic.Uint64 // len(bounds)+1
	sum    atomic.Int64    // nanoseconds
}

func (h *histogram) init(bounds []time.Duration) {
	h.bounds = bounds
	h.counts = make([]atomic.Uint64, len(bounds)+1)
}

// observe records n observations of d.
func (h *histogram) observe(d time.Duration, n int64) {
	if n <= 0 {
		return
	}
	d = max(d, 0)
	h.counts[h.bucket(d)].Add(uint64(n))
	h.sum.Add(int64(d) * n)
}

// bucket returns the index of the bucket d falls in.
func (h *histogram) bucket(d time.Duration) int {
	i := 0 // a linear scan: at most 14 bounds, no closure to allocate
	for i < len(h.bounds) && d > h.bounds[i] {
		i++
	}
	return i
}

// add adds counts (one per bucket) and their sum in nanoseconds.
func (h *histogram) add(counts []uint64, sum int64) {
	for i, c := range counts {
		if c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.sum.Add(sum)
}

// snapshot copies h into out, reusing out's slice.
func (h *histogram) snapshot(out *Histogram) {
	out.Bounds = h.bounds
	out.Counts = out.Counts[:0]
	for i := range h.counts {
		out.Counts = append(out.Counts, h.counts[i].Load())
	}
	out.Sum = time.Duration(h.sum.Load())
}

// snapshot copies s into out.
func (s *entityStats) snapshot(out *EntityStats) {
	out.Incoming = s.incoming.Load()
	out.Outgoing = s.outgoing.Load()
	out.Completed = s.completed.Load()
	out.Abandoned = s.abandoned.Load()
	out.DeadLettered = s.deadLettered.Load()
	out.Expired = s.expired.Load()
	out.Deferred = s.deferred.Load()
	out.LockExpiries = s.lockExpiries.Load()
	out.SessionLockExpiries = s.sessionLockExpiries.Load()
	out.SessionsHeld = s.sessionsHeld.Load()
	s.send.snapshot(&out.SendLatency)
	s.e2e.snapshot(&out.EndToEnd)
}

// count adds n to the counter pick selects of q's entity, if stats are on.
func (q *queue) count(pick func(*entityStats) *atomic.Int64, n int) {
	if s := q.ent.stats; s != nil && n > 0 {
		pick(s).Add(int64(n))
	}
}

// Counter selectors for queue.count.
func statCompleted(s *entityStats) *atomic.Int64   { return &s.completed }
func statExpired(s *entityStats) *atomic.Int64     { return &s.expired }
func statLockExpired(s *entityStats) *atomic.Int64 { return &s.lockExpiries }

// count adds a committed settlement to its entity's statistics (a single
// one or one of a transaction's: both end in settled.apply).
func (sd *settled) count() {
	s := sd.q.ent.stats
	if s == nil {
		return
	}
	switch sd.kind {
	case settledRemoved:
		s.completed.Add(1)
	case settledDeferred:
		s.deferred.Add(1)
	case settledReturned:
		if !sd.released {
			s.abandoned.Add(1)
		}
	case settledDeadLettered, settledForwarded:
		s.deadLettered.Add(int64(len(sd.recs)))
	}
}

// noteDelivered counts messages handed to a receiver and, for first
// deliveries from the queue itself, how long they waited since enqueued.
// A receive-and-delete counts as a completion too: the AMQP front takes
// such messages peek-locked and completes them once written, so counting
// it here keeps both fronts' receive-and-delete alike.
func (q *queue) noteDelivered(out []*Message, mode ReceiveMode) {
	s := q.ent.stats
	if s == nil || len(out) == 0 {
		return
	}
	s.outgoing.Add(int64(len(out)))
	if mode == ReceiveAndDelete {
		s.completed.Add(int64(len(out)))
	}
	if q.isDeadLetter() {
		return
	}
	now := q.b.Now()
	var counts [16]uint64
	if len(out) == 1 || len(s.e2e.counts) > len(counts) { // one message, or more buckets than the tally holds
		for _, m := range out {
			if m != nil && m.DeliveryCount == 1 && !m.EnqueuedTime.IsZero() {
				s.e2e.observe(time.Duration(now-m.EnqueuedTime.UnixNano()), 1)
			}
		}
		return
	}
	// A batch is tallied first, so that it costs an atomic addition per
	// bucket it touches rather than two per message.
	var sum int64
	n := 0
	for _, m := range out {
		if m != nil && m.DeliveryCount == 1 && !m.EnqueuedTime.IsZero() {
			d := max(time.Duration(now-m.EnqueuedTime.UnixNano()), 0)
			counts[s.e2e.bucket(d)]++
			sum += int64(d)
			n++
		}
	}
	if n > 0 {
		s.e2e.add(counts[:len(s.e2e.counts)], sum)
	}
}

// noteSessionLocked and noteSessionUnlocked keep SessionsHeld; called
// with q.mu held when a session without a lock gets one and when a held
// one loses it.
func (q *queue) noteSessionLocked() {
	if s := q.ent.stats; s != nil {
		s.sessionsHeld.Add(1)
	}
}

func (q *queue) noteSessionUnlocked(expired bool) {
	if s := q.ent.stats; s != nil {
		s.sessionsHeld.Add(-1)
		if expired {
			s.sessionLockExpiries.Add(1)
		}
	}
}

// noteSent counts a durable send's messages on its entity and records
// how long they took to become durable.
func (ps *pendingSend) noteSent(took time.Duration) {
	if s := ps.in.e.stats; s != nil && ps.n > 0 {
		s.send.observe(took, int64(ps.n))
	}
}

// EntitySnapshot is what [Broker.EachEntity] reports of one entity.
type EntitySnapshot struct {
	// ID identifies this entity for the life of the data directory: an
	// entity deleted and created again under the same path gets another.
	ID     uint64
	Path   string
	Kind   EntityKind
	Counts Counts
	// Stats are zero unless [Config.Stats] is set.
	Stats EntityStats
}

// EachEntity calls fn with a snapshot of every entity (queues, topics,
// subscriptions), in path order. The snapshot is reused: fn must copy
// what it keeps (Histogram slices included). Entities created or deleted
// meanwhile may or may not be reported.
func (b *Broker) EachEntity(fn func(*EntitySnapshot)) {
	if b.routed() {
		b.eachRouted(fn)
		return
	}
	b.mu.RLock()
	ents := make([]*entity, 0, len(b.mu.entities))
	for _, e := range b.mu.entities {
		ents = append(ents, e)
	}
	b.mu.RUnlock()
	sort.Slice(ents, func(i, j int) bool { return ents[i].key < ents[j].key })
	var snap EntitySnapshot
	for _, e := range ents {
		e.snapshot(&snap)
		fn(&snap)
	}
}

// EntityStats returns the statistics of the entity at path (a queue,
// topic or subscription; a dead-letter subqueue's are its entity's). They
// are zero unless [Config.Stats] is set.
func (b *Broker) EntityStats(path string) (EntityStats, error) {
	if b.routed() {
		be, err := b.route(path)
		if err != nil {
			return EntityStats{}, err
		}
		return be.EntityStats(path)
	}
	e, err := b.lookup(ParseAddress(path))
	if err != nil {
		return EntityStats{}, err
	}
	var st EntityStats
	if e.stats != nil {
		e.stats.snapshot(&st)
	}
	return st, nil
}

func (e *entity) snapshot(out *EntitySnapshot) {
	d := e.desc.Load()
	out.ID, out.Path, out.Kind = e.id, d.Path(), d.Kind
	out.Counts = e.counts()
	if e.stats != nil {
		e.stats.snapshot(&out.Stats)
	} else {
		out.Stats = EntityStats{}
	}
}

// noteIncoming counts a published send: its messages on the queue or
// topic it was sent to, and each copy on the subscription that got it.
// Called with the inlet mutex held.
func (ps *pendingSend) noteIncoming() {
	s := ps.in.e.stats
	if s == nil { // stats are on for every entity or for none
		return
	}
	s.incoming.Add(int64(ps.n))
	if ps.in.e.q != nil {
		return // a queue: its placements are the messages just counted
	}
	for _, pl := range ps.places {
		if sub := pl.q.ent.stats; sub != nil {
			sub.incoming.Add(1)
			if pl.q.isDeadLetter() { // a filter exception, or no session id for a session subscription
				sub.deadLettered.Add(1)
			}
		}
	}
}
