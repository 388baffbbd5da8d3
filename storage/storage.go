// Package storage defines the narrow, byte-oriented seam between the broker
// core and its durable store.
//
// A [Store] is an ordered key/value map with atomic, durable batches. It knows
// nothing of Service Bus: the core owns the key layout and the value
// encodings. Two implementations exist: storage/memstore (the reference, used
// by --memory and tests) and storage/pebblestore (the default, on Pebble).
// storage/storagetest holds the suite both must pass.
//
// A batch sets keys, deletes keys, deletes every key under a prefix, and
// deletes keys known to have been set at most once since their last
// deletion ([Batch.DeleteOnce]), which a store may make cheaper than an
// ordinary deletion; the caller keeps that condition, and memstore, the
// reference, refuses a batch that breaks it.
//
// Durability contract: when [Store.Apply] returns nil for a batch with
// Sync set, every operation in it survives a crash (kill -9, power loss on a
// correctly fsyncing disk). Concurrent Apply calls are group-committed by the
// implementation, so callers never batch by hand to save fsyncs.
//
// Fault contract: a store never ends the process and never panics on a
// fault of its disk or damaged data; it returns errors the caller can map.
//
//   - Apply refuses a batch with an error wrapping [ErrNoSpace] when the
//     disk is full or below the store's free-space reserve, or
//     [ErrUnavailable] on another disk fault. A refused batch was not
//     applied, not even in part. While space is short only batches that grow
//     the store are refused: a batch that deletes or rewrites at least as
//     much as it adds (a settlement, a delivery count, a move to the
//     dead-letter queue) is still applied as long as the store can write at
//     all. Writes are accepted again by themselves once space returns.
//   - If the disk fails under a batch already being committed, Apply may
//     return an error wrapping ErrUnavailable and [ErrOutcomeUnknown]
//     without knowing whether the batch reached the disk; it returns
//     rather than wait on a disk that may never answer. The store then
//     refuses every later write until it is reopened, so nothing can build
//     on that unknown outcome; after reopening, the batch is wholly present
//     or wholly absent.
//   - Get and Scan return an error wrapping [ErrCorrupt] for a value that
//     cannot be read back intact (naming the damaged file where the store
//     knows it), and ErrUnavailable when the disk fails them. A damaged
//     value fails only the reads that reach it.
//   - [HealthReporter].Health says whether writes are accepted now, and why
//     not; it returns to nil by itself when the fault clears.
package storage

import "errors"

// ErrNotFound is returned by [Store.Get] when the key does not exist.
var ErrNotFound = errors.New("storage: not found")

// ErrClosed is returned by every method once [Store.Close] has been called.
var ErrClosed = errors.New("storage: closed")

// ErrNoSpace is wrapped by the error [Store.Apply] returns when the store
// refuses a write because its disk is full or below the store's free-space
// reserve. Nothing of the batch was applied; writes are accepted again by
// themselves once space returns. Batches that do not grow the store are
// not refused for lack of space.
var ErrNoSpace = errors.New("storage: no space left")

// ErrUnavailable is wrapped by the error a method returns when a fault of
// the disk (an I/O error, a read-only file system) keeps the store from
// doing it. Nothing of a refused batch was applied.
var ErrUnavailable = errors.New("storage: unavailable")

// ErrOutcomeUnknown is wrapped, with ErrUnavailable, by the error Apply
// returns when the disk failed while the batch was being committed: the
// batch may be durable or not, and which one is known only once the store
// is reopened. A caller that retries it may apply it twice.
var ErrOutcomeUnknown = errors.New("storage: outcome unknown")

// ErrCorrupt is wrapped by the error a read returns when a stored value
// cannot be read back intact (a damaged or truncated file), and by the
// error opening a store returns when its files are damaged.
var ErrCorrupt = errors.New("storage: corrupt")

// HealthReporter is implemented by stores that can say whether they
// accept writes right now.
type HealthReporter interface {
	// Health returns nil while the store accepts writes, or an error
	// wrapping ErrNoSpace (writes that grow the store are refused) or
	// ErrUnavailable (writes are refused) that says why it does not. It
	// returns nil again by itself once the fault clears; after Close it
	// wraps ErrUnavailable and ErrClosed.
	Health() error
}

// Store is an ordered, durable key/value store.
//
// All methods are safe for concurrent use. Keys and values passed in are
// not retained after the call returns; slices passed to callbacks are only
// valid during the callback.
type Store interface {
	// Apply applies every operation of b atomically, in order. If b.Sync is
	// set it returns only once the batch is durable.
	Apply(b *Batch) error
	// Get returns a copy of the value stored at key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for each key with the given prefix that is >= start
	// (start nil means from the beginning of the prefix), in ascending key
	// order, until fn returns false or an error. A non-nil error from fn is
	// returned by Scan.
	Scan(prefix, start []byte, fn func(key, value []byte) (bool, error)) error
	// Close flushes and releases the store. It is safe to call once.
	Close() error
}

// OpKind says what an [Op] does.
type OpKind uint8

// The operation kinds of a [Batch].
const (
	OpSet          OpKind = iota + 1 // set Key to Value
	OpDelete                         // delete Key (no error if absent)
	OpDeletePrefix                   // delete every key starting with Key
	OpDeleteOnce                     // delete Key, set at most once since its last deletion (see Batch.DeleteOnce)
)

// Op is one operation of a [Batch].
type Op struct {
	Kind OpKind
	// New marks a Set of a key the caller knows holds no value when the
	// Set applies (see Batch.SetNew); stores that have no use for it
	// apply the Set as any other.
	New   bool
	Key   []byte
	Value []byte
}

// Batch is a list of operations applied atomically by [Store.Apply].
// The zero value is an empty, non-syncing batch.
type Batch struct {
	Ops []Op
	// Sync makes Apply return only once the batch is durable (fsync). A
	// batch applied without it is durable after the store's next synced
	// write, or after a short delay the store bounds (pebblestore:
	// DefaultLazySyncDelay); a crash before then can lose it.
	Sync bool
}

// Set appends a set of key to value. The batch keeps the slices: callers
// must not modify them until Apply returns.
func (b *Batch) Set(key, value []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpSet, Key: key, Value: value})
}

// SetNew appends a set of key to value for a key the caller knows holds
// no value when the Set applies: never set, or deleted since (earlier in
// the same batch included), such as the records of a message under a
// sequence number just assigned. A store applies it as a Set; one that
// holds writes back and merges them (storage/raftstore's followers) may
// then drop this Set together with a later deletion of the key, where a
// plain Set's deletion must be kept for a value that may lie beneath.
// storage/memstore, the reference, refuses a batch whose SetNew meets a
// key that holds a value.
func (b *Batch) SetNew(key, value []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpSet, New: true, Key: key, Value: value})
}

// Delete appends a deletion of key.
func (b *Batch) Delete(key []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpDelete, Key: key})
}

// DeleteOnce appends a deletion of key for a key the caller knows was set
// at most once since it was last deleted (by any kind of deletion) or
// created: a queue's message records, written once and deleted once. A
// store may then drop the deletion together with the one value it meets
// (pebblestore: Pebble's SingleDelete), so that neither reaches the disk
// when both are still in memory, where a Delete must be kept, written
// and compacted down until no older value can lie beneath it.
//
// The caller must keep the invariant: a key set twice with no deletion
// between may, after DeleteOnce, show its older value again. A key to be
// set again while it holds a value is deleted in the same batch before
// the new Set (Delete, or DeleteOnce if the invariant holds for it), so
// that it again holds one value set once. DeleteOnce of an absent key is
// a no-op. storage/memstore, the reference, refuses a batch whose
// DeleteOnce meets a key set more than once since its last deletion.
func (b *Batch) DeleteOnce(key []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpDeleteOnce, Key: key})
}

// DeletePrefix appends a deletion of every key that starts with prefix.
func (b *Batch) DeletePrefix(prefix []byte) {
	b.Ops = append(b.Ops, Op{Kind: OpDeletePrefix, Key: prefix})
}

// Len reports the number of operations in the batch.
func (b *Batch) Len() int { return len(b.Ops) }

// Reset empties the batch so it can be reused, keeping its capacity.
func (b *Batch) Reset() {
	b.Ops = b.Ops[:0]
	b.Sync = false
}
