package core

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
}

// Defaults of [Limits].
const (
	DefaultDedupHistoryMax = 1_000_000
	DefaultBodyCacheBytes  = 128 << 20
	// QueueCacheBytes is the most one queue keeps of the body cache: a
	// body larger than it is never cached.
	QueueCacheBytes = 8 << 20
)

func (l *Limits) setDefaults() {
	if l.DedupHistoryMax <= 0 {
		l.DedupHistoryMax = DefaultDedupHistoryMax
	}
	if l.BodyCacheBytes <= 0 {
		l.BodyCacheBytes = DefaultBodyCacheBytes
	}
}
