package pebblestore

import "context"

// SyncLazily runs the lazy sync at once, as its timer would.
func (s *Store) SyncLazily() { s.syncLazily() }

// FlushAsync starts flushing the memtable and returns at once.
func (s *Store) FlushAsync() error {
	_, err := s.db.AsyncFlush()
	return err
}

// WriteWALMark records at once how far the write-ahead log is synced, as
// the store does every walMarkInterval.
func (s *Store) WriteWALMark() { s.mark.write() }

// Stalled reports whether Pebble stalls writes now.
func (s *Store) Stalled() bool { return s.faults.stalled.Load() }

// Flush writes the memtables to sstables and waits.
func (s *Store) Flush() error { return s.db.Flush() }

// CompactAll compacts every key down to the bottom of the tree.
func (s *Store) CompactAll() error {
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xff, 0xff, 0xff, 0xff}, false)
}

// SingleDeletes waits for the store to decide whether DeleteOnce is a
// SingleDelete, and reports it.
func (s *Store) SingleDeletes() bool {
	<-s.singleDel.done
	return s.singleDel.ok.Load()
}

// SingleDeleteMisuses counts the single deletes Pebble saw meet a key set
// twice.
func (s *Store) SingleDeleteMisuses() int64 { return s.singleDel.misuses.Load() }

// FlushedBytes is what flushes have written so far: sstables and blob
// files.
func (s *Store) FlushedBytes() uint64 {
	m := s.db.Metrics()
	return m.Levels[0].TableBytesFlushed + m.Levels[0].BlobBytesFlushed
}

// SingleDelMarkName is the marker file's name.
const SingleDelMarkName = singleDelMarkName

// WithoutAutoCompactions returns o with Pebble's automatic compactions
// off.
func WithoutAutoCompactions(o Options) Options {
	o.noAutoCompactions = true
	return o
}
