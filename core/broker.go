package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/core/clock"
	"github.com/omnibusmq/omnibus/core/gopool"
	"github.com/omnibusmq/omnibus/storage"
)

// Config configures a [Broker]. The zero value of every field but Store
// means its default.
type Config struct {
	Store     storage.Store // required: where messages and entities live
	Clock     clock.Clock   // default clock.Real{}
	Logger    *zap.Logger   // default zap.NewNop()
	Namespace string        // namespace name, for messages and management
	Limits    Limits        // memory bounds; zero values mean the defaults
	// Router makes a broker that holds no entities: every operation on
	// one goes to the backend the router names (route.go), for a node of
	// a cluster whose entities live in its data groups. Store is then
	// not used (and may be nil).
	Router Router
	// Deleted, when set, is called once the deletion of a queue or topic
	// (DeleteEntity, AutoDeleteOnIdle) is durable, outside every lock of
	// the broker, with its name; DeleteEntity returns after it. A data
	// group of a cluster forgets the entity's placement there (the meta
	// group's, cmd/omnibus/app/cluster_unplace.go). It does not run for a
	// routed broker, nor for a subscription.
	Deleted func(ctx context.Context, name string)
	// Transfers makes the broker one data group of a cluster's several:
	// forwarding to an entity of another group goes by transfer
	// (transfer.go). The zero value: the broker forwards only to
	// entities it holds.
	Transfers TransferConfig
	// PartitionCount is how many partitions a queue or topic created with
	// EnablePartitioning gets (partition.go); zero means
	// [DefaultPartitionCount], at most [MaxPartitionCount]. An entity
	// keeps the count it was created with.
	PartitionCount int
	// TxnTimeout is how long a transaction may stay open after its first
	// operation before it is rolled back (txn.go); zero means
	// [DefaultTxnTimeout], Service Bus's two minutes.
	TxnTimeout time.Duration
	// BodyCache, when set, is the body cache account the broker shares
	// with others (the namespaces of one process), so that
	// Limits.BodyCacheBytes bounds them together; nil: its own.
	BodyCache *BodyCache
	// Stats keeps per-entity statistics for monitoring (stats.go):
	// [Broker.EachEntity] reports them.
	Stats bool
	// Faults deliberately break Service Bus semantics. They exist only so
	// the conformance suite can prove that its scenarios can fail; never
	// set them in production.
	Faults Faults
}

// Faults are test-only switches that make the broker non-conforming.
type Faults struct {
	IgnoreLockExpiry    bool // locks never expire
	BreakFIFO           bool // deliver the newest available message first
	IgnoreMessageExpiry bool // messages never expire (time to live is stamped but not enforced)
	// IgnoreComplete acknowledges a complete (outside a transaction) and
	// changes nothing: the message stays locked and comes back when its
	// lock lapses.
	IgnoreComplete bool
	// DropDeadLetters deletes a message that is dead-lettered (by a
	// receiver, by MaxDeliveryCount, on expiry) instead of moving it to
	// the dead-letter subqueue or ForwardDeadLetteredMessagesTo.
	DropDeadLetters bool
	// TxnAtOnce applies each send and settlement of a transaction when it
	// is made: nothing waits for the commit, and a rollback undoes nothing.
	TxnAtOnce bool
	// IgnoreFilters places every message of a topic in every subscription,
	// whatever its rules.
	IgnoreFilters bool
	// IgnoreDuplicates lets a message through duplicate detection even
	// when its MessageId is in the history.
	IgnoreDuplicates bool
	// IgnoreSchedule makes a scheduled message available at once.
	IgnoreSchedule bool
	// ShareSessionLocks lets a receiver accept a session that another
	// holds (taking its lock over) instead of refusing it.
	ShareSessionLocks bool
}

func (c *Config) validate() error {
	if c.Store == nil && c.Router == nil {
		return errf(CodeInternal, "Config.Store is required")
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Namespace == "" {
		c.Namespace = "omnibus"
	}
	c.Limits.setDefaults()
	c.Transfers.setDefaults()
	if c.PartitionCount <= 0 {
		c.PartitionCount = DefaultPartitionCount
	}
	if c.PartitionCount > MaxPartitionCount {
		return errf(CodeInternal, "Config.PartitionCount %d is more than %d", c.PartitionCount, MaxPartitionCount)
	}
	if c.TxnTimeout <= 0 {
		c.TxnTimeout = DefaultTxnTimeout
	}
	return nil
}

// Broker is the protocol-neutral Service Bus engine. Both fronts call its
// methods; it is safe for concurrent use.
type Broker struct {
	cfg   Config
	store storage.Store
	clk   clock.Clock
	log   *zap.Logger
	timer brokerTimer
	cache *bodyCache     // the hand-over cache's account (cache.go): the broker's or Config.BodyCache's
	idle  idleReaper     // AutoDeleteOnIdle (autodelete.go)
	wg    sync.WaitGroup // background goroutines and tasks (see run)
	tasks *gopool.Pool   // goroutines for them

	quotas quotas         // the limits SetQuotas changes (limits.go)
	xfer   transfers      // the outbox and the applied transfer ids (transfer.go)
	spread spreadCounters // what spread receives cost (route_spread_stats.go)

	mu struct {
		sync.RWMutex // guards the fields below
		entities     map[string]*entity
		nextID       uint64
		closed       bool
		deleted      bool // closed by CloseDeleted: every entity is gone

		// queuesAndTopics counts the entities without a topic
		// (Limits.MaxEntities); partitions are not in entities.
		queuesAndTopics int
	}
	// manage serialises entity create/update/delete so that persistence
	// and the in-memory registry change in the same order.
	manage sync.Mutex

	pulls pulls // delivery records no message needs, deleted by the next write (pull.go)

	orphans struct { // body deletions the store refused, retried (orphans.go)
		sync.Mutex // guards keys; taken alone
		keys       [][]byte
		n          atomic.Int32 // len(keys), read without the mutex
	}
	warned struct { // throttles storage-failure warnings (storeerr.go)
		sync.Mutex // guards m; taken alone
		m          map[string]*warnState
	}
}

// entity is a queue, topic or subscription at run time.
type entity struct {
	key   string // lower-case path
	id    uint64
	desc  atomic.Pointer[Entity]
	q     *queue  // queues and subscriptions
	in    *inlet  // queues and topics: sequence numbers, dedup, ordered publish
	topic *entity // subscriptions: their topic

	subs  atomic.Pointer[[]*entity]       // topics: current subscriptions
	rules atomic.Pointer[[]*compiledRule] // subscriptions: current rules
	refs  struct {                        // topics: references to shared bodies
		sync.Mutex
		m map[int64]bodyRefs
	}
	lastUsed atomic.Int64 // unix nanos, for AutoDeleteOnIdle
	quota    entityQuota  // queues and topics: size against MaxSizeInMegabytes (quota.go)
	stats    *entityStats // nil unless Config.Stats (stats.go); a partition shares its parent's

	// Partitioning (partition.go). A partitioned entity has parts and
	// neither q nor in of its own; a partition has a parent and its index.
	parts    []*entity
	parent   *entity
	part     int
	nextPart atomic.Uint32 // the partition the next message without a key goes to
	nextRecv atomic.Uint32 // the partition the next receive looks at first
}

// New opens a broker on cfg.Store, recovering every entity and message it
// holds. Locks held before a restart are gone: those messages are
// available again with their delivery count already raised.
func New(cfg Config) (*Broker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, store: cfg.Store, clk: cfg.Clock, log: cfg.Logger, tasks: gopool.New(maxIdleTasks)}
	b.timer.clk = cfg.Clock
	b.SetQuotas(cfg.Limits.MaxEntities, cfg.Limits.MaxEntityBytes)
	b.cache = &bodyCache{}
	if cfg.BodyCache != nil {
		b.cache = &cfg.BodyCache.c
	}
	b.mu.entities = make(map[string]*entity)
	if cfg.Router != nil {
		return b, nil // its entities live in its backends (route.go)
	}
	if err := b.recover(); err != nil {
		return nil, err
	}
	if err := b.recoverTransfers(); err != nil {
		return nil, err
	}
	b.dropNonDurableClientAffine()
	b.armIdle()
	return b, nil
}

// Namespace returns the configured namespace name.
func (b *Broker) Namespace() string { return b.cfg.Namespace }

// Now returns the broker's current time (its clock's).
func (b *Broker) Now() int64 { return b.clk.Now().UnixNano() }

// CloseDeleted closes the broker of a namespace that was deleted: as
// Close, and every later call finds no entity (core.ErrNotFound) rather
// than a closed broker, which is what clients of a deleted namespace are
// told.
func (b *Broker) CloseDeleted() error {
	b.mu.Lock()
	b.mu.deleted = true
	b.mu.Unlock()
	return b.Close()
}

// Close stops timers, fails waiting receivers and waits for background
// work. It does not close the store, which the caller owns.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return nil
	}
	b.mu.closed = true
	deleted := b.mu.deleted
	ents := make([]*entity, 0, len(b.mu.entities))
	for _, e := range b.mu.entities {
		ents = append(ents, e)
	}
	b.mu.Unlock()
	b.timer.close()
	b.idle.close()
	for _, e := range ents {
		for _, q := range e.allQueues() {
			q.close(deleted)
		}
	}
	b.wg.Wait()
	b.tasks.Close()
	return nil
}

// lookup returns the entity for a path (without subqueue).
func (b *Broker) lookup(a Address) (*entity, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.mu.closed {
		if b.mu.deleted {
			return nil, entityNotFound(a.String())
		}
		return nil, ErrClosed
	}
	e := b.mu.entities[a.key()]
	if e == nil {
		return nil, entityNotFound(a.String())
	}
	return e, nil
}

// queueFor resolves a path naming a queue, a subscription or a dead-letter
// subqueue of either: everything one can receive from. A partitioned
// entity has one such queue per partition: pick chooses the partition
// (nil: the entity must not be partitioned, or it is a bad request).
func (b *Broker) queueFor(path string, pick func(*entity) *entity) (*queue, error) {
	a := ParseAddress(path)
	e, err := b.receivable(a)
	if err != nil {
		return nil, err
	}
	if e.parts != nil {
		if pick == nil {
			return nil, errf(CodeBadRequest, "'%s' is partitioned; this operation is not supported on it", a.String())
		}
		if e = pick(e); e == nil {
			return nil, errf(CodeMessageNotFound, "No such message in '%s'.", a.String())
		}
	}
	if a.DeadLetter {
		return e.q.dead, nil
	}
	return e.q, nil
}

// queuesFor resolves path as queueFor does, to every partition's queue
// of a partitioned entity (one queue otherwise).
func (b *Broker) queuesFor(path string) ([]*queue, error) {
	a := ParseAddress(path)
	e, err := b.receivable(a)
	if err != nil {
		return nil, err
	}
	return e.mainQueues(a.DeadLetter), nil
}

// receivable looks up a queue or subscription, touching it.
func (b *Broker) receivable(a Address) (*entity, error) {
	e, err := b.lookup(a)
	if err != nil {
		return nil, err
	}
	if e.q == nil && e.parts == nil || e.desc.Load().Kind == KindTopic {
		return nil, errf(CodeBadRequest, "cannot receive from topic '%s'; receive from one of its subscriptions", a.String())
	}
	e.touch(b.Now())
	return e, nil
}

// touch records a use of e (and of its parent, for a partition).
func (e *entity) touch(now int64) {
	e.lastUsed.Store(now)
	if e.parent != nil {
		e.parent.lastUsed.Store(now)
	}
}

// maxIdleTasks is how many idle goroutines the broker keeps for its
// tasks: about as many as commits run at once under load.
const maxIdleTasks = 16

// run runs f on a goroutine of the broker's pool (a send's commit, a
// read-ahead: work that goes deep into the store); Close waits for it.
func (b *Broker) run(f func()) {
	b.wg.Add(1)
	b.tasks.Go(func() {
		defer b.wg.Done()
		f()
	})
}

func (b *Broker) closed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.closed
}

// ctxErr converts a context error into the core's timeout error.
func ctxErr(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return ErrTimeout
	}
	return ctx.Err()
}
