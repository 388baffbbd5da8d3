// Package core is omnibus's protocol-neutral Service Bus engine: entities
// (queues, topics, subscriptions, rules), messages and their life cycle
// (send, schedule, peek-lock, receive-and-delete, settle, renew, defer,
// dead-letter, expire, forward), sessions and their state. It knows
// nothing of AMQP, HTTP or Pebble: the fronts (amqpserver, httpgw) translate
// their protocols into calls on [Broker], and a [storage.Store] keeps
// everything durable.
//
// # API the fronts call
//
//	Send(ctx, path, msgs...) ([]seq, error)          queue or topic; durable on return
//	Receive(ctx, path, ReceiveOptions) ([]*Message, error)  blocks until ≥1 or ctx done
//	Settle(ctx, path, lockToken, Outcome) error       complete/abandon/defer/dead-letter/release
//	RenewLock(ctx, path, lockToken) (time.Time, error)
//	ReceiveDeferred(ctx, path, mode, seqs) ([]*Message, error)
//	Peek(ctx, path, PeekOptions) ([]*Message, error)
//	CancelScheduled(ctx, path, seqs) error
//	AcceptSession / RenewSessionLock / CloseSession / Get|SetSessionState / ListSessions
//	CreateEntity / UpdateEntity / DeleteEntity / GetEntity / ListEntities / Counts
//	AddRule / RemoveRule / ListRules
//	BeginTxn() *Txn; Txn.Send / Settle / RenewLock / Commit / Rollback
//
// Paths are entity paths as both protocols write them: "q",
// "q/$DeadLetterQueue", "t/Subscriptions/s", "t/Subscriptions/s/$DeadLetterQueue"
// (reserved segments match case-insensitively; see [ParseAddress]). Errors
// are *[Error] with a [Code]; each front maps codes in one table.
//
// # Model
//
// Each stored message has two records (record.go): an immutable body and a
// small state record. Memory holds only an index entry per message
// (msgRec and its heap slot, about 130 bytes), so a backlog lives on disk;
// recovery scans the state records only. A topic stores a body once and
// one state record per matching subscription.
//
// # Bounds
//
// What memory holds beyond the index is bounded by what exists now, not
// by the rate things come and go: the hand-over cache (cache.go) by a
// per-queue share and a broker-wide budget (Limits.BodyCacheBytes); timer
// entries (timer.go) by the locks and scheduled messages held; the
// duplicate-detection history (dedup.go) by its window and
// Limits.DedupHistoryMax. The index itself is bounded by the entities'
// quotas (quota.go): a send that would take its queue or topic over
// MaxSizeInMegabytes is refused, each message counting its size plus
// MessageOverhead, so no entity stores more than MaxSizeInMegabytes /
// (size + MessageOverhead) messages.
//
// A message record is in exactly one place of its queue: avail (a heap by
// sequence number, or its session's heap), locked, deferred, or
// scheduled. Lock tokens are UUIDs kept in one table per queue; a token is
// valid from any connection and either protocol.
//
// # Time
//
// Time comes from an injected clock (package clock). Lock expiry and
// scheduled activation run from one broker timer (timer.go) that calls
// each queue's tick with the current time; message TTL is evaluated when a
// receiver would take the message, as Service Bus does. Each queue keeps
// one timer entry per lock (message or session) and scheduled message
// that exists now: an entry leaves with its lock or schedule and moves
// when the lock is renewed, and the broker timer holds one entry per
// queue. Tests use clock.Fake and never sleep.
//
// # Locking
//
// Lock order: Broker.manage → inlet.mu → queue.mu (a queue's main before
// its dead-letter subqueue is never needed: moves release one before
// taking the other) → entity.refs → brokerTimer.mu. Broker.mu is taken
// alone; so is idleReaper.mu (autodelete.go), after the queue mutexes
// have been released. write.abort takes the mutex of each queue it gives
// records back to in turn, never two at once, and entity.refs under it.
// Broker.pulls.mu (pull.go) is taken last, under a queue's mutex or
// alone. No mutex is held across storage I/O, except inlet.mu while
// publishing, which is in-memory work only.
//
// # Durability
//
// Send, settle and management changes return after a Sync batch; the store
// group-commits concurrent batches so fsync is paid per group, not per
// message. Writes whose loss a crash cannot make visible (delivery counts,
// expiry deletions, scheduled activation) are not synced. Locks are not
// persisted: after a restart a message that was locked is available again,
// its delivery already counted (a pull's counts in one delivery record,
// pull.go).
//
// # Writes
//
// Every change goes through a write (write.go): one batch plus the
// reservations taken while planning it (a consumed lock, records set
// aside, records taken for a delivery, references to shared topic bodies,
// bodyrefs.go). Memory changes only after the batch committed; a writer
// defers write.abort, which gives every reservation back if it did not.
// The only exceptions are writes that merely follow memory and whose
// loss changes nothing a client can see: scheduled activation, delivery
// counts, a closed session's delivery counts.
//
// A settlement is planned into a write and applied once it committed
// (settled.go). A transaction (txn.go) is one write that collects many:
// its settlements and sends are checked when made, kept, and planned into
// a single write at commit; until then it holds no reservation, and the
// messages it settles stay locked with their locks running.
//
// # Storage faults
//
// A write the store refuses (storage.ErrNoSpace, storage.ErrUnavailable)
// fails with [CodeServerBusy] and changes nothing (storeerr.go). A body
// that is missing or unreadable moves its message to the dead-letter
// subqueue with [ReasonBodyUnreadable] when a receive meets it
// (damaged.go), so it never blocks its queue. [Broker.Check] compares
// memory with the store (check.go); tests run it after every script step
// and every injected fault, and `omnibus check` on a data directory.
package core
