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
// # Closing
//
// Pebble panics on use after Close, while [storage.Store] promises
// [storage.ErrClosed]. A small gate counts the calls in progress: Close
// refuses new calls, waits for those in progress, then closes Pebble. Close
// must therefore not be called from a Scan callback.
package pebblestore
