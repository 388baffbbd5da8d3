package core

import "sync/atomic"

// Limits bound what the broker keeps in memory beyond one small index
// entry per stored message. Zero values mean the defaults below; cmd/omnibus/README.md's
// "Limits" section lists them with their flags.
type Limits struct {
	// DedupHistoryMax caps the message ids one entity's duplicate
	// detection remembers. Service Bus bounds the history only by its time
	// window, which at a high send rate can mean millions of ids; past the
	// cap the oldest id is forgotten before its window ends (and that is
	// logged), so a duplicate of it sent later is accepted.
	DedupHistoryMax int
	// BodyCacheBytes is the broker-wide budget for message bodies kept in
	// memory to hand to receivers without a storage read (each queue also
	// keeps at most QueueCacheBytes of it). Bodies beyond it are read
	// from the store when delivered.
	BodyCacheBytes int64
	// MaxEntityBytes caps what one queue or topic stores, below its
	// MaxSizeInMegabytes: Service Bus accepts no size under 1 GB, which a
	// developer's disk may not spare for each entity. Zero means no cap
	// beyond MaxSizeInMegabytes; a full entity's error states the cap.
	MaxEntityBytes int64
	// MaxEntities caps the queues and topics the broker holds (its
	// namespace's), subscriptions not counted, as Service Bus's
	// "number of topics or queues per namespace" (10,000 on Standard,
	// [DefaultMaxEntities]). Zero means no cap. A create past it fails
	// with [CodeQuotaExceeded]; entities already stored are never
	// refused at recovery, so lowering the cap removes none.
	MaxEntities int
}

// Defaults of [Limits].
const (
	DefaultDedupHistoryMax = 1_000_000
	DefaultBodyCacheBytes  = 128 << 20
	// QueueCacheBytes is the most one queue keeps of the body cache: a
	// body larger than it is never cached.
	QueueCacheBytes = 8 << 20
	// DefaultMaxEntities is Service Bus Standard's quota of queues and
	// topics per namespace, the binary's default for
	// [Limits.MaxEntities] (the zero value means no cap).
	DefaultMaxEntities = 10_000
)

func (l *Limits) setDefaults() {
	if l.DedupHistoryMax <= 0 {
		l.DedupHistoryMax = DefaultDedupHistoryMax
	}
	if l.BodyCacheBytes <= 0 {
		l.BodyCacheBytes = DefaultBodyCacheBytes
	}
}

// quotas are the limits a namespace's owner may change while the broker
// runs ([Broker.SetQuotas]): Limits.MaxEntities and Limits.MaxEntityBytes,
// read without a lock by every create and every send.
type quotas struct {
	maxEntities    atomic.Int64 // 0: no cap
	maxEntityBytes atomic.Int64 // 0: no cap below MaxSizeInMegabytes
}

// SetQuotas replaces the broker's [Limits.MaxEntities] and
// [Limits.MaxEntityBytes] (zero: no cap), for the creates and sends that
// follow; what is stored already stays, whatever the new caps.
func (b *Broker) SetQuotas(maxEntities int, maxEntityBytes int64) {
	b.quotas.maxEntities.Store(int64(max(maxEntities, 0)))
	b.quotas.maxEntityBytes.Store(max(maxEntityBytes, 0))
}

// checkEntityCount refuses a new queue or topic when the broker holds
// MaxEntities of them already. Called under b.manage, which serialises
// the creates and deletes that change the count.
func (b *Broker) checkEntityCount(kind EntityKind) error {
	max := b.quotas.maxEntities.Load()
	if kind == KindSubscription || max <= 0 {
		return nil
	}
	b.mu.RLock()
	n := b.mu.queuesAndTopics
	b.mu.RUnlock()
	if int64(n) >= max {
		return errf(CodeQuotaExceeded, "The maximum entity count of %d has been reached or exceeded for namespace '%s': "+
			"it holds %d queues and topics. Delete one, or raise the namespace's Limits.MaxEntities.", max, b.cfg.Namespace, n)
	}
	return nil
}
