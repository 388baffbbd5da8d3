// Package pebblestore implements [storage.Store] on Pebble
// (github.com/cockroachdb/pebble/v2), the broker's default durable store.
//
// It is the only package of the module that imports Pebble. It knows nothing
// of the broker's key layout: it maps a [storage.Batch] to one Pebble batch
// (Set, Delete, and DeleteRange for DeletePrefix), Get to a point lookup and
// Scan to a bounded iterator.
//
// # Durability and group commit
//
// A batch with Sync set is committed with pebble.Sync, so Apply returns only
// once the WAL has been fsynced. Pebble's commit pipeline already groups
// concurrent commits: while one fsync is in flight, later batches queue and
// the next fsync covers all of them. So N goroutines calling Apply at once
// cost far fewer than N fsyncs, and callers should simply call Apply from as
// many goroutines as they have messages (see BenchmarkStoreApplySync).
//
// # Disk faults and damaged files
//
// Pebble ends the process (Logger.Fatalf), panics or wedges its commit
// pipeline when a write of its write-ahead log, MANIFEST or blob files
// fails. The store
// keeps such failures from reaching it: Pebble works on a file system
// (faultFS) that retries a failing write where it stands until the disk
// takes it, so Pebble only ever sees a slow disk, while the store reports
// the fault (Health) and refuses new writes with storage.ErrNoSpace or
// storage.ErrUnavailable. When space returns the blocked write completes
// and the store accepts writes again by itself. An fsync that fails is not
// retried (the kernel may have dropped what it could not write): the store
// refuses writes until it is restarted. Logger.Fatalf never exits (see
// pebbleLogger.Fatalf), and a panic of Pebble's inside a call becomes the
// call's error.
//
// A free-space reserve (Options.DiskReserve, read with statfs) refuses
// writes that grow the store before Pebble meets a full disk; writes that
// free as much as they add, such as settlements, are still applied.
//
// Opening on a full disk fails at once with the reason, and leaves the
// directory as it was, instead of Pebble retrying its flush forever. A
// blob file that is cut short is refused when Pebble opens it, so that
// reading a body in it fails with storage.ErrCorrupt, as a damaged block
// does, instead of panicking.
//
// Each write-ahead log Pebble replays on open is checked (walcheck.go): if
// replay stops short of what had been synced, so acknowledged (the log's
// own records say so, or the store's synced mark, walmark.go), Open fails
// with storage.ErrCorrupt. With Options.Repair it keeps a copy of the log,
// cuts it where replay stops, lowers the mark to that point and fsyncs it
// before it goes on (walrepair.go), so that a power loss during the
// repaired open does not refuse the next start over the loss accepted.
//
// # Single deletes
//
// storage.Batch.DeleteOnce is Pebble's SingleDelete: it cancels with the
// one Set it meets in a flush or compaction and both vanish, where a
// Delete must be written and compacted down to the bottom of the tree. A
// queue's message records are set once and deleted once, so a message
// sent and settled within one memtable's life leaves nothing in the
// sstables or blob files. The condition, a key set at most once since its
// last deletion, is the caller's (the core keeps it: core/write.go);
// Pebble's reports of a SingleDelete that met a second Set are logged as
// errors. A database written by an older version, which may hold keys set
// twice, is compacted once in the background after it opens, and uses
// Delete for DeleteOnce until that is done and recorded in the marker
// file OMNIBUS-SINGLEDEL (singledel.go).
//
// # Closing
//
// Pebble panics on use after Close, while [storage.Store] promises
// [storage.ErrClosed]. A small gate counts the calls in progress: Close
// refuses new calls, waits for those in progress, then closes Pebble. Close
// must therefore not be called from a Scan callback. If a write Pebble
// cannot do without is blocked on the disk, Close does not wait for it: it
// leaves Pebble as it is on disk and returns an error.
package pebblestore
